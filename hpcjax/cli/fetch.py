"""`hpcjax fetch` and `hpcjax tunnel`: a job's files back from the cluster, and a port of its
first node forwarded to this machine, both through the cluster's shared SSH connection."""

from __future__ import annotations

import argparse
from pathlib import Path, PurePosixPath

from hpcjax.cli import kinds
from hpcjax.cli.reach import add_cluster_options, cluster_from_args
from hpcjax.cli.stopping import sigterm_as_ctrl_c
from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.protocol import contract
from hpcjax.values import jobid
from hpcjax.values.voice import say
from hpcjax.cli.verbs import HELP

CHECKPOINTS = ("latest", "all", "none")


def fetch_run_dir(host, source: str, target: Path, checkpoints: str) -> tuple[int, int]:
    """A run directory into target: its checkpoints as asked, never its compile cache (it
    belongs to the cluster's machines)."""
    from hpcjax.hosts import ship
    from hpcjax.protocol.rundir import CHECKPOINTS as CKPT, COMPILE_CACHE

    excludes = [f"/{COMPILE_CACHE}/"]
    if checkpoints == "none":
        excludes.append(f"/{CKPT}/")
    elif checkpoints == "latest":
        steps = sorted(int(n) for n in host.files.list_names(f"{source}/{CKPT}") if n.isdigit())
        excludes += [f"/{CKPT}/{step}/" for step in steps[:-1]]
    return ship.fetch(host, source, target, excludes=tuple(excludes))


def fetch_target(args: argparse.Namespace, target: Path | None, checkpoints: str,
                 run_dir_needed: bool = False) -> tuple[Path, str]:
    """Copy what TARGET names (a job id: its logs and its run directory; else a run directory
    of the cluster) below target; (where the run directory landed or the logs, summary).
    run_dir_needed: a job without a run directory is refused before anything is copied."""
    from hpcjax.backends import attach_one

    cluster = cluster_from_args(args)
    if jobid.is_element(args.target):
        from hpcjax.hosts import ship

        run = attach_one(args.target, cluster, "report" if run_dir_needed else "fetch")
        if run_dir_needed and not getattr(run, "run_dir", None):
            raise UsageError(f"job {run.job_id} names no run directory: its command has no --run-dir (and it is "
                             "not a Trainer run), so there is nothing to report",
                             f"its logs: `hpcjax logs {run.job_id}`; a report is of a training run "
                             "(hpcjax train --run-dir DIR, or a Trainer's storage_path/name)")
        where = target or Path(f"hpcjax-job-{run.job_id}")
        names = [p.name for p in run.rank_logs().values()]
        # The job's own files are named "<job>-..." (hpcjax.protocol.contract); not another job whose id starts
        # the same, nor submitit's copy of the script, nor a hold's queue (a directory).
        queue = contract.HOLD_QUEUE.replace("%j", run.job_id)
        names += [n for n in run.files.list_names(str(run.log_dir))
                  if n.startswith(f"{run.job_id}-") and n != queue and n not in names]
        if not names and not getattr(run, "run_dir", None):
            raise HpcjaxError(f"job {run.job_id} has nothing to fetch: no logs in {run.log_dir} and no run directory",
                              f"it may never have started: `hpcjax status {run.job_id}` says how it ended")
        files, size = ship.fetch(run.host, str(run.log_dir), where / "logs", files=names)
        said = f"{files} log file(s) of job {run.job_id} into {where / 'logs'}"
        run_dir = getattr(run, "run_dir", None)
        if not run_dir:
            return where / "logs", said + " (its command names no --run-dir)"
        name = PurePosixPath(run_dir).name
        if name in ("", ".", ".."):  # a record names it: never a place above the target
            raise UsageError(f"job {run.job_id}'s run directory {run_dir!r} has no name to fetch it under",
                             "fetch it by its path instead: hpcjax fetch PATH --to DIR")
        landed = where / name
        more, more_size = fetch_run_dir(run.host, run_dir, landed, checkpoints)
        return landed, said + f"; run directory {run_dir}: {more} file(s), {(size + more_size) / 1e6:.1f} MB sent"
    source = args.target.rstrip("/")
    if not source:
        raise UsageError(f"{args.target!r} names no run directory", "give a job id, or the run directory's path "
                         "(relative paths are under remote_dir on a cluster)")
    if cluster.remote and not source.startswith("/"):
        source = f"{cluster.home()}/{source}"  # relative to the remote directory
    host = cluster.host()
    if not host.files.is_dir(source):
        raise UsageError(f"{source} is not a directory on {cluster.name}",
                         "give a job id, or the run directory's path there (relative paths are under remote_dir)")
    from hpcjax.protocol.rundir import MARKS

    if not set(host.files.list_names(source)) & set(MARKS):  # never a home directory or / copied by a slip
        raise UsageError(f"{source} on {cluster.name} is not a run directory: it holds none of {', '.join(MARKS)}",
                         "give the --run-dir of a training run, or a job id")
    landed = target or Path(PurePosixPath(source).name)
    files, size = fetch_run_dir(host, source, landed, checkpoints)
    return landed, f"{files} file(s) of {source}, {size / 1e6:.1f} MB, into {landed}"


def cmd_fetch(args: argparse.Namespace, command: list[str]) -> int:
    if args.to is not None and (not args.to.strip() or Path(args.to).exists() and not Path(args.to).is_dir()):
        raise UsageError(f"--to {args.to!r} is not a directory" + (" (it is a file)" if args.to.strip() else ""),
                         "give a directory (made if it does not exist), e.g. --to runs-back")
    if args.to is not None:
        from hpcjax.catalog.records import pseudo_file_system
        from hpcjax.values.validate import require_utf8

        require_utf8("--to", args.to)
        if pseudo_file_system(args.to):
            raise UsageError(f"--to {args.to!r} is in {pseudo_file_system(args.to)}, the kernel's tree, not a file system",
                             "give a directory for files (made if it does not exist), e.g. --to runs-back")
    landed, said = fetch_target(args, Path(args.to) if args.to else None, args.checkpoints)
    say(f"fetched {said}")
    print(landed.resolve())
    return 0


def cmd_tunnel(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.launch import attach
    from hpcjax.values.nodelist import expand_hostlist

    cluster = cluster_from_args(args)
    run = attach(args.job_id, cluster)
    if not getattr(run.host, "remote", False):
        raise UsageError(f"job {run.job_id} runs on this machine's cluster: no tunnel is needed",
                         "connect to the node's port directly")
    status = run.status()
    if status.finished:  # waiting would never help: it has ended
        raise HpcjaxError(f"job {run.job_id} has ended ({status.state}): no node to forward to",
                          f"run the program again (a tunnel reaches a running job's port); `hpcjax status "
                          f"{run.job_id}` says how it ended")
    if status.state != "RUNNING" or not status.nodelist:
        raise HpcjaxError(f"job {run.job_id} is {status.state}, not running yet: no node to forward to",
                          f"wait for it to start (`hpcjax status {run.job_id}`), then run the tunnel again")
    node = expand_hostlist(status.nodelist)[0]
    local = args.local_port or args.port
    try:
        with sigterm_as_ctrl_c(), run.host.forward(local, node, args.port):
            say(f"forwarding http://127.0.0.1:{local}/ to {node}:{args.port} of job {run.job_id} "
                f"through {run.host.destination}; Ctrl-C stops the tunnel (not the job)")
            print(f"http://127.0.0.1:{local}/", flush=True)
            run.wait(progress=False)  # the tunnel lasts as long as the job
            say(f"job {run.job_id} ended: tunnel closed")
    except KeyboardInterrupt:
        say("\ntunnel closed; the job keeps running")
    return 0


def add_fetch_verbs(sub) -> None:
    fetch = sub.add_parser("fetch", help=HELP["fetch"])
    fetch.add_argument("target", help="a job id, or a run directory on the cluster")
    fetch.add_argument("--to", metavar="DIR", help="where to put it (default: ./hpcjax-job-ID, or the run "
                                                   "directory's name)")
    fetch.add_argument("--checkpoints", choices=CHECKPOINTS, default="latest",
                       help="which checkpoints to copy (default: latest)")
    add_cluster_options(fetch, profile_file=True)
    fetch.set_defaults(run=cmd_fetch, takes_command=False)

    tunnel = sub.add_parser("tunnel", help=HELP["tunnel"])
    tunnel.add_argument("job_id", help="the running job (its first node is reached)")
    tunnel.add_argument("port", type=kinds.port, help="the port on the job's first node")
    tunnel.add_argument("--local-port", type=kinds.port, help="the port here (default: the same)")
    add_cluster_options(tunnel, profile_file=True)
    tunnel.set_defaults(run=cmd_tunnel, takes_command=False)
