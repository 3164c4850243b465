"""Where a Python call goes: this machine's SLURM or CPU (api.calls), or a cluster reached over
SSH from a laptop. There the call folder is written here first, in a temporary directory, then
sent whole with rsync beside the job's logs; the ranks import the caller's modules from the
job's snapshot of the working tree, hpcjax from its shipped copy, and submitit and cloudpickle
from copies staged in the call folder (the cluster's Python needs only JAX). Results, reports
and checkpoints are read back through the cluster's shared SSH connection.

    calls = launch(fn, [((1,), {})], scaling, backend=None, storage_path=None, default="hpcjax-calls", ...)
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path, PurePosixPath

from hpcjax.api import calls, folder
from hpcjax.api.configs import Data, ScalingConfig, storage_dir
from hpcjax.containers.binds import in_place
from hpcjax.errors import UsageError
from hpcjax.hosts import ship
from hpcjax.launch import choose_backend


def target_cluster(scaling: ScalingConfig, backend: str | None):
    """The cluster reached over SSH that a call goes to, or None for this machine. The local
    backend runs here: a cluster that only a default named ($HPCJAX_CLUSTER, a profile's host)
    gives way to it; one named in the call is a contradiction."""
    cluster = scaling.cluster
    if cluster is None or not cluster.remote:
        return None
    if backend == "local":
        if scaling.cluster_named:
            raise UsageError(f"backend='local' runs on this machine, not on the cluster {cluster.destination}",
                             "drop backend='local' to run there, or drop cluster= to run here")
        return None
    if backend not in (None, "auto", "slurm"):
        choose_backend(backend)  # its own error for a name that is no backend
    return cluster


def storage_for(scaling: ScalingConfig, backend: str | None, storage_path: str | None, default: str):
    """Where the call keeps its files, on the machine whose SLURM runs it."""
    return storage_dir(storage_path, default, target_cluster(scaling, backend))


def launch(function, arguments: list[tuple[tuple, dict]], scaling: ScalingConfig, *, backend: str | None,
           storage, job_name: str, session: dict | None = None, max_parallel: int | None = None,
           array: bool = False, after: tuple = ()) -> list[calls.Call]:
    """Submit the call here (calls.launch) or to the cluster reached over SSH."""
    from hpcjax.launch import check_can_record

    check_can_record()  # before the call folder is written
    cluster = target_cluster(scaling, backend)
    if cluster is None:
        return calls.launch(function, arguments, scaling, backend=backend, storage=Path(storage),
                            job_name=job_name, session=session, max_parallel=max_parallel, array=array,
                            after=after)
    return launch_on_cluster(function, arguments, scaling, cluster, storage=PurePosixPath(storage),
                             job_name=job_name, session=session, max_parallel=max_parallel, array=array,
                             after=after)


def launch_on_cluster(function, arguments, scaling: ScalingConfig, cluster, *, storage: PurePosixPath,
                      job_name: str, session: dict | None, max_parallel: int | None, array: bool,
                      after: tuple = ()) -> list[calls.Call]:
    from hpcjax import launch as launcher
    from hpcjax.launch import remote

    home = remote.check_cluster(cluster)  # the connection first: a wrong host fails in seconds
    root = ship.tree_root(Path.cwd())
    limit_mb = scaling.ship_limit_mb or ship.DEFAULT_LIMIT_MB
    ship.check_size(root, ship.tree_files(root), limit_mb)
    found: list[Data] = []
    for args, kwargs in arguments:
        calls.unwrap_data((args, kwargs), found)
    check_cluster_data(cluster, [d.path for d in found if d.on_cluster])
    for data in found:
        if not data.on_cluster:
            remote.check_links(Path(data.path), repr(data))
    element = folder.ARRAY_ELEMENT if array else "0"
    fields = dict(output_dir=str(storage / "logs"), job_name=job_name, after=after,
                  run_dir=(session or {}).get("run_dir"))
    if array:
        fields.update(array=len(arguments), array_parallel=max_parallel)
    # Checked as it will be submitted (the binds are the data's, known once uploaded).
    remote.check_binds(cluster, scaling.job(["python3"], **fields))
    where = {id(d): d.path if d.on_cluster else remote.upload(cluster, home, Path(d.path)) for d in found}
    mapped = [calls.unwrap_data((args, kwargs), [], lambda d: where[id(d)]) for args, kwargs in arguments]
    fields["container"] = in_place(scaling.spec.container, [home] + [
        p for p in where.values() if not p.startswith(home + "/")])
    call_dir = ship_call(cluster, storage / "calls", function, mapped, session, root)
    python = "python3" if scaling.spec.container.in_container else cluster.python
    spec = scaling.job([python, "-u", "-m", "hpcjax.api.worker", str(call_dir), element], **fields)
    if array:
        runs = launcher.submit_array(spec, "slurm", cluster, root=root, limit_mb=limit_mb)
        return [calls.Call(call_dir, i, run) for i, run in enumerate(runs)]
    return [calls.Call(call_dir, 0, launcher.submit(spec, "slurm", cluster, root=root, limit_mb=limit_mb))]


def check_cluster_data(cluster, paths: list[str]) -> None:
    """Data('cluster:/path'): each path must be there."""
    from hpcjax.launch import remote

    missing = remote.missing_paths(cluster, paths)
    if missing:
        raise UsageError(f"Data path(s) not on {cluster.name}: {', '.join(missing)}",
                         "check the path there (ssh DEST ls -d PATH), or give a local directory to upload: "
                         "Data('./my_dataset')")


def ship_call(cluster, calls_root: PurePosixPath, function, arguments, session: dict | None,
              root: Path) -> PurePosixPath:
    """The call folder, written here and sent whole; its path on the cluster. The ranks find
    the caller's modules at the same places in the job's snapshot (relative import paths), and
    the worker's own dependencies beside the call."""
    staging = Path(tempfile.mkdtemp(prefix="hpcjax-call-"))
    try:
        local = calls.prepare(staging, function, arguments, session, sys_path=tree_sys_path(root))
        calls.stage_dependencies(local)
        target = calls_root / local.name
        ship.rsync(cluster.host(), "-rlt", f"{local}/", into=str(target))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def tree_sys_path(root: Path) -> list[str]:
    """The caller's import path entries inside the shipped tree, relative to the working
    directory (the job starts in the snapshot's copy of it); the others are this machine's."""
    cwd, root = Path.cwd().resolve(), root.resolve()
    kept = []
    for entry in sys.path:
        path = Path(os.path.abspath(entry or ".")).resolve()
        if path == root or root in path.parents:
            kept.append(os.path.relpath(path, cwd))
    return list(dict.fromkeys(kept))
