"""What a job is, wherever it runs: the spec (layout, container, resources, command) and what
builds it (site profiles, extra #SBATCH lines, sweeps). Never imports JAX, a backend or SLURM."""
