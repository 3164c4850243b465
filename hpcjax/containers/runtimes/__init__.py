"""One module per container runtime; each registers its class(es) with
`hpcjax.containers.table.register`. Every module here is imported when the table is
first read, so a new runtime is one new file.

One file per runtime: `apptainer` (and singularity), `charliecloud`, `pyxis` (srun
--container-image), `bare` (no container).
"""
