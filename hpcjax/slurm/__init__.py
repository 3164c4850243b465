"""SLURM's vocabulary, in one room: every command line hpcjax gives SLURM (`commands`), asking
the controller and accounting about jobs (`controller`, `status`), the batch script
(`script`, from templates/sbatch.sh.j2), and following one SLURM job (`job`). The backend that
uses them is hpcjax.backends.slurm.

Beside them: `sbatch` (its output read), `fit` (whether a job can ever run where it asks), `enforce`
(what the site enforces of accounts and QOS, and so refused or said of a job), `reasons`
(pending reasons in words), `free` (free GPUs and start estimates), `site` (a site read from its
SLURM), `versions` (every SLURM release's options), `dependencies` (whether a job's --after can still be
honoured), `holds` and `inhold` (held allocations and a job
in one), `examples` (the example scripts in slurm/, regenerated).
"""
