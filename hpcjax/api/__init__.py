"""The Python API: Ray Train's Trainer and a `@remote` decorator, on SLURM and locally.

Caller side (the login node, a laptop): `configs` (ScalingConfig, RunConfig, Result,
Data), `trainer`, `remote`, `calls` (a call as a job, through the one JobSpec -> script
-> backend -> Run path). Every rank: `worker` (runs the pickled call) and `session`
(report, get_checkpoint, get_context). `folder` names the files both sides read.
Importing this package imports nothing else.

`submit` turns a call into the pipeline's Submission (its folder, its storage).
"""
