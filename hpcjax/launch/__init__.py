"""Submitting a job, the one way every entry point does (launch.steps: resolve, check, stage,
render, submit, record, follow), and finding it again. Never imports JAX, so it starts at once.

    from hpcjax.launch import submit, submit_array, attach
    run = submit(spec)                 # backend "auto": SLURM where sbatch exists, else this machine
    outcome = run.wait()               # Outcome: state, exit code, failed ranks with host and log tail
    runs = submit_array(spec)          # spec.array elements: a SLURM job array, or local jobs in turn
    attach("1234").logs(rank=3)        # a job submitted earlier, from its id
    except KeyboardInterrupt as i: runs_of(i)   # a Ctrl-C once the job existed carries its Runs

Rooms below it: job (what a job is), backends (where it runs: one class each), slurm and
localjobs (each backend's machinery), follow (the Run handle and the failure report).

One module per step: `request` (resolve: what every entry point asks, resolved once), `steps` (the
pipeline), `refusals` (check), `staging` (stage), `uploads` (what travels beside the code).
"""

from __future__ import annotations

from pathlib import Path

from hpcjax.hosts.cluster import THIS_MACHINE
from hpcjax.values.voice import say

AUTO = "auto"  # the backend: $HPCJAX_BACKEND when set, else the first that is there (hpcjax.backends.choose)


def submission(spec, backend: str | None = AUTO, cluster=THIS_MACHINE, *, after=None, announce=None,
               root: Path | None = None, limit_mb: int | None = None, uploads=(), ship_code: bool = True, **more):
    """The resolve step for Python callers: a Submission of `spec` to `backend` (a name, or
    "auto"), on `cluster` (a Cluster: one reached over SSH, or THIS_MACHINE)."""
    import dataclasses

    from hpcjax import backends
    from hpcjax.job.after import dependencies
    from hpcjax.launch.steps import Submission

    if after is not None:
        spec = dataclasses.replace(spec, after=dependencies(after))
    spec = avoiding_failed_nodes(spec, cluster)
    chosen = backends.choose(backend, cluster=cluster)
    extra = {"limit_mb": limit_mb} if limit_mb else {}
    if cluster.remote:  # the working tree that travels: the git repository of `root` (default cwd), else it
        from hpcjax.hosts import ship

        extra["tree"] = ship.tree_root(root or Path.cwd())
    return Submission(spec=spec, backend=chosen, cluster=cluster, announce=announce, uploads=tuple(uploads),
                      ship_code=ship_code, **extra, **more)


def avoiding_failed_nodes(spec, cluster):
    """The spec with the nodes a preflight failed within its `avoid_failed_hours` excluded (said on
    stderr, each with when and what): a site's profile keeps later jobs off a node until it is fixed."""
    import dataclasses

    from hpcjax.catalog.keep import recently_failed

    if not spec.avoid_failed_hours:
        return spec
    found = recently_failed(cluster.destination or "", spec.avoid_failed_hours)
    new = [node for node in sorted(found) if node not in spec.exclude]
    for node in new:
        row = found[node]
        say(f"leaving out {node}: it failed a preflight of job {row['job_id']} at {row['at']} "
            f"(avoid_failed_hours = {spec.avoid_failed_hours})")
    return dataclasses.replace(spec, exclude=spec.exclude + tuple(new)) if new else spec


def submit(spec, backend: str | None = AUTO, cluster=THIS_MACHINE, *, after=None, announce=None, **shipping):
    """Run spec; return its Run handle. With a Cluster reached over SSH, the job goes there
    (shipping: root, limit_mb, uploads, ship_code). `after`: jobs ("JOBID[:ok|:any]", or Runs)
    it waits for; if one does not end as asked, it is cancelled without starting.
    `announce(job_id)`: called as soon as the job has its id and record."""
    from hpcjax.values.errors import UsageError
    from hpcjax.launch import steps

    if spec.array:
        raise UsageError("a job array has one Run per element", "submit it with submit_array(spec)")
    [run] = steps.submit(submission(spec, backend, cluster, after=after, announce=announce, **shipping))
    return run


def submit_array(spec, backend: str | None = AUTO, cluster=THIS_MACHINE, *, announce=None, **shipping) -> list:
    """Run a job array (spec.array elements, at most spec.array_parallel at once); return one Run
    per element, in order. Each element sees its index as SLURM_ARRAY_TASK_ID on either backend."""
    from hpcjax.values.errors import UsageError
    from hpcjax.launch import steps

    if not spec.array:
        raise UsageError("submit_array needs a job array (array=N)", "use submit(spec) for one job")
    return steps.submit(submission(spec, backend, cluster, announce=announce, **shipping))


def attach(job_id: str, cluster=THIS_MACHINE):
    """The Run of a job submitted earlier, from its id (hpcjax.backends.attach)."""
    from hpcjax import backends

    return backends.attach(job_id, cluster)


def runs_of(interrupt: BaseException) -> list:
    """The Runs of the job a Ctrl-C landed on once it existed (a KeyboardInterrupt out of submit
    or submit_array); [] if it came before there was a job."""
    from hpcjax.launch import steps

    return steps.runs_of(interrupt)
