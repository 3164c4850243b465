"""hpcjax: take a JAX training job from a laptop to a SLURM GPU cluster.

Importing hpcjax does not import JAX; only the runtime and the programs a job
runs do.
"""

__version__ = "0.1.0"
