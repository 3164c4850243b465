"""hpcjax: take a JAX training job from a laptop to a SLURM GPU cluster.

Rooms, by step of the flow (docs/architecture.md):
  hpcjax.job         what a job is: the spec, its layout, profiles, sweeps
  hpcjax.launch      the one pipeline every entry point uses: resolve, check, stage, render, submit, record
  hpcjax.backends    where a job runs (local, slurm), one registered class each
  hpcjax.slurm       SLURM's vocabulary: every command line, the script, status, submitit
  hpcjax.localjobs   the local backend's processes, queue and chains
  hpcjax.follow      any job, followed: its Run, outcome, hangs, stacks
  hpcjax.containers  one class per container runtime; image recipes
  hpcjax.hosts       where commands run: this machine, a login node over SSH
  hpcjax.catalog     what hpcjax remembers of the jobs it submitted
  hpcjax.pages       pages and plots about runs (hpcjax.report is the API's function)
  hpcjax.rank        every rank: start-up, proofs (checks, preflight), watchdogs, caches
  hpcjax.train       the training program
  hpcjax.api         the Python API: Trainer (Ray Train's names), @remote, report, Data
  hpcjax.cli         the command line (a verb imports its own module only)
  hpcjax.protocol    what the login side and the ranks agree on (standard library only)
  hpcjax.values      values read and written one way: errors, checks, job ids, hostlists
Importing hpcjax imports none of them; the names below, and the rooms themselves
(`hpcjax.rank.progress(step)` after a plain `import hpcjax`), load when first used.
`__main__` is `python -m hpcjax`.
"""

__version__ = "0.2.0"

_LAZY = {
    "initialize": ("hpcjax.rank.start.runtime", "initialize"),
    "compiled": ("hpcjax.rank.cache.executables", "compiled"),
    "submit": ("hpcjax.launch", "submit"),
    "submit_array": ("hpcjax.launch", "submit_array"),
    "attach": ("hpcjax.launch", "attach"),
    "JobSpec": ("hpcjax.job.spec", "JobSpec"),
    "Layout": ("hpcjax.job.spec", "Layout"),
    "Container": ("hpcjax.job.spec", "Container"),
    "job_spec": ("hpcjax.job.profiles", "job_spec"),
    # The Python API (hpcjax.api): Ray Train's names, and the decorator.
    "Trainer": ("hpcjax.api.trainer", "Trainer"),
    "JaxTrainer": ("hpcjax.api.trainer", "JaxTrainer"),
    "ScalingConfig": ("hpcjax.api.configs", "ScalingConfig"),
    "RunConfig": ("hpcjax.api.configs", "RunConfig"),
    "Result": ("hpcjax.api.configs", "Result"),
    "Data": ("hpcjax.api.configs", "Data"),
    "Checkpoint": ("hpcjax.api.session", "Checkpoint"),
    "report": ("hpcjax.api.session", "report"),
    "get_checkpoint": ("hpcjax.api.session", "get_checkpoint"),
    "get_context": ("hpcjax.api.session", "get_context"),
    "remote": ("hpcjax.api.remote", "remote"),
    "RemoteError": ("hpcjax.api.calls", "RemoteError"),
}


ROOMS = ("job", "launch", "backends", "slurm", "localjobs", "follow", "containers", "hosts", "catalog", "pages",
         "rank", "train", "api", "cli", "protocol", "values")


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)
    if name in ROOMS:
        return importlib.import_module(f"hpcjax.{name}")
    raise AttributeError(f"module 'hpcjax' has no attribute {name!r}")
