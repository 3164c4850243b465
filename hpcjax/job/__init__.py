"""What a job is, wherever it runs: the spec (layout, container, resources, command) and what
builds it (site profiles, extra #SBATCH lines, sweeps). Never imports JAX, a backend or SLURM.

Modules: `spec` (the JobSpec), `profiles` (site profiles), `clusters` (the cluster a name, a
profile or a job record means), `sweeps`, `after` (dependencies),
`envvars` (environment variables), `extras` (lines a site adds), `walltime` (time limits).
"""
