"""SLURM's vocabulary, in one room: every command line hpcjax gives SLURM (`commands`), asking
the controller and accounting about jobs (`controller`, `status`), the batch script
(`script`, from templates/sbatch.sh.j2), and following one SLURM job (`job`). The backend that
uses them is hpcjax.backends.slurm."""
