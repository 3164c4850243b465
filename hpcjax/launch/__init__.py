"""What runs on the login node (or a laptop): the job spec, the rendered script,
the backends that run it, and the Run handle that follows it. Never imports JAX,
so it starts at once.

    from hpcjax.launch import submit, submit_array, attach
    run = submit(spec)                 # backend "auto": SLURM where sbatch exists, else this machine
    outcome = run.wait()               # Outcome: state, exit code, failed ranks with host and log tail
    runs = submit_array(spec)          # spec.array elements: a SLURM job array, or local jobs in turn
    attach("1234").logs(rank=3)        # a job submitted earlier, from its id

The backend is chosen here and nowhere else. Modules: spec -> render -> (slurm | local,
localqueue) -> run/outcome; slurmctl (with jobstatus's watcher) asks SLURM about jobs;
smoke reads the checks' verdicts; examples renders slurm/. Job records live in
hpcjax.catalog, container runtimes in hpcjax.containers, hosts in hpcjax.hosts.
"""

from __future__ import annotations

import os
import shutil
import sys

from hpcjax.errors import UsageError

BACKENDS = ("auto", "slurm", "local")
BACKEND_ENV = "HPCJAX_BACKEND"  # what "auto" means when set: slurm or local


def choose_backend(name: str | None = "auto", *, quiet: bool = False) -> str:
    """'slurm' or 'local': 'auto' is $HPCJAX_BACKEND if set, else SLURM where `sbatch`
    exists, else this machine's CPU."""
    name = name or "auto"
    if name == "auto" and os.environ.get(BACKEND_ENV):
        name = os.environ[BACKEND_ENV]
        if name not in BACKENDS:
            raise UsageError(f"{BACKEND_ENV}={name!r} is not a backend", f"valid backends: {', '.join(BACKENDS)}")
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}", f"valid backends: {', '.join(BACKENDS)}")
    if name != "auto":
        return name
    if shutil.which("sbatch"):
        return "slurm"
    if not quiet:
        print("no SLURM on this machine (no `sbatch`): running locally on this machine's CPU, "
              "GPUs emulated as CPU devices", file=sys.stderr)
    return "local"


def submit(spec, backend: str | None = "auto", cluster=None, *, after=None, announce=None, **shipping):
    """Run spec on the chosen backend; return its Run handle. With a Cluster reached over
    SSH, the job goes there (shipping: root, limit_mb, uploads; see launch.remote). `after`:
    jobs ("JOBID[:ok|:any]", or Runs) it waits for; if one does not end as asked, it is
    cancelled without starting. `announce(job_id)`: called as soon as the job has its id and record."""
    check_can_record()
    if after is not None:
        import dataclasses

        from hpcjax.launch.spec import dependencies

        spec = dataclasses.replace(spec, after=dependencies(after))
    if _slurm_for(backend, cluster):
        from hpcjax.launch import slurm
        return slurm.submit(spec, cluster, announce, **shipping)
    from hpcjax.launch import local
    return local.submit(spec, announce)


def submit_array(spec, backend: str | None = "auto", cluster=None, *, announce=None, **shipping) -> list:
    """Run a job array (spec.array elements, at most spec.array_parallel at once) on the
    chosen backend; return one Run per element, in order. Each element sees its index as
    SLURM_ARRAY_TASK_ID on either backend."""
    if not spec.array:
        raise UsageError("submit_array needs a job array (array=N)", "use submit(spec) for one job")
    check_can_record()
    if _slurm_for(backend, cluster):
        from hpcjax.launch import slurm
        return slurm.submit_array(spec, cluster, announce, **shipping)
    from hpcjax.launch import localqueue
    return localqueue.submit_array(spec, announce)


def check_can_record() -> None:
    """Refuse before anything is written or submitted when hpcjax could not keep the job's record."""
    from hpcjax.catalog import records

    records.require_writable()


def _slurm_for(backend: str | None, cluster) -> bool:
    if cluster is not None and cluster.remote:
        if (backend or "auto") not in ("auto", "slurm"):
            raise UsageError(f"--backend {backend} runs on this machine, not on the cluster {cluster.destination}",
                             "drop --cluster to run here, or drop --backend to submit to the cluster")
        return True
    return choose_backend(backend) == "slurm"


def attach(job_id: str, cluster=None):
    """The Run of a job submitted earlier, from its id: hpcjax's record says which backend
    (and which cluster) ran it; a job without a record is a SLURM job (plain sbatch). With a
    cluster reached over SSH, its record there is the truth (another laptop submitted it)."""
    from hpcjax.catalog import records
    from hpcjax.launch.slurmctl import check_job_id

    job_id = check_job_id(job_id)
    if cluster is not None and cluster.remote:
        from hpcjax.launch import remote
        from hpcjax.launch.slurm import SlurmRun

        record = records.load(records.key(job_id, cluster.destination)) or remote.load_record(cluster, job_id)
        return SlurmRun.attach(job_id, record, cluster)
    record = records.load(job_id)
    if record is None and cluster is None:
        elsewhere = records.remote_keys(job_id)
        if len(elsewhere) > 1:
            names = ", ".join(records.load(k)["cluster"]["destination"] for k in elsewhere)
            raise UsageError(f"job {job_id} was submitted to more than one cluster ({names})",
                             "name the one you mean with --cluster")
        record = records.load(elsewhere[0]) if elsewhere else None
    if record and record.get("backend") == "local":
        from hpcjax.launch.local import LocalRun
        return LocalRun.attach(job_id, record)
    from hpcjax.launch.slurm import SlurmRun
    return SlurmRun.attach(job_id, record)
