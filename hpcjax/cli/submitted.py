"""The verbs about a job already submitted: status, logs, cancel. They find the job's Runs
(hpcjax.backends: its record says which backend and cluster) and ask them. Apart from the verbs that
build a job (hpcjax.cli.jobs: render, submit), whose job options they do not import: `hpcjax
status` runs all day, and asks SLURM before anything else is imported (ask_slurm_early)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from hpcjax.catalog import records
from hpcjax.cli import kinds
from hpcjax.hosts import here
from hpcjax.slurm import commands, conf
from hpcjax.values import jobid
from hpcjax.cli.reach import add_cluster_options, cluster_from_args
from hpcjax.cli.verbs import HELP
from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.values.voice import say


def cmd_status(args: argparse.Namespace, command: list[str]) -> int:
    ask_slurm_early(args.job_id, args)
    from hpcjax.backends import attach_each

    runs = attach_each(args.job_id, cluster_from_args(args))  # a sweep's id: each of its elements
    if args.json:
        sweep = [run.as_dict() for run in runs] if runs[0].job_id != args.job_id.strip() else None
        print(json.dumps(sweep if sweep is not None else runs[0].as_dict(), indent=2))  # a sweep's: a list
    else:
        print("\n".join(run.describe() for run in runs))
    return 0


def ask_slurm_early(job_id: str, args: argparse.Namespace) -> None:
    """The status poll's squeue and sacct of a job of this machine's SLURM, started before the
    backends are imported and the job's record read (hosts.here.start_early): `hpcjax status` then
    costs about Python's start and one sacct, not the two in turn. Not for --cluster or
    $HPCJAX_CLUSTER, nor for a job whose record names another backend or a cluster; a guess
    that turns out wrong (a profile's host, a sweep's id) costs one query whose answer is dropped."""
    if args.cluster or os.environ.get("HPCJAX_CLUSTER"):
        return
    try:
        conf.check_conf()  # else each query would wait 60 s for it, after hpcjax has said so and ended
        job_id = jobid.check(job_id)
        record = records.load(job_id)
    except HpcjaxError:  # said as it should be by the status itself
        return
    if record is None and records.remote_keys(job_id):  # submitted from here to a cluster over SSH
        return
    if (record or {}).get("backend", "slurm") != "slurm":  # a record here is never a cluster's (KEY@destination)
        return
    # A process that already follows jobs (main() called from a program) polls them too, or not at all
    # when its answer is fresh: the queries its poll will make, not ones nobody takes.
    controller = sys.modules.get("hpcjax.slurm.controller")
    asking = controller.slurm_on().watcher.next_asked(job_id) if controller else [job_id]
    if asking:
        here.start_early(*commands.poll(asking))


# Control characters a terminal acts on (escape sequences that move the cursor, retitle the window,
# or write the clipboard; backspace, bell, ...), but not tab, newline and a progress bar's carriage
# return: shown as \x.. instead.
CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """A job's log text as a terminal should show it: its control characters written out."""
    return CONTROLS.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def cmd_logs(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.backends import attach_one

    if args.follow and args.tail is not None:
        raise UsageError("--tail and --follow together", "--follow streams each log from its start; "
                         "drop --tail, or use --tail without --follow")
    run = attach_one(args.job_id, cluster_from_args(args), "logs")
    shown = visible if sys.stdout.isatty() else str  # a terminal does what a log's escape sequences say
    if not args.follow:
        run.write_logs(lambda text: sys.stdout.write(shown(text)), rank=args.rank, tail=args.tail)
        return 0

    def write(text: str) -> None:
        sys.stdout.write(shown(text))
        sys.stdout.flush()

    try:
        state = run.follow_logs(write, rank=args.rank)
    except KeyboardInterrupt:
        say(f"\ninterrupted: stopped following job {run.job_id} (it keeps running)")
        return 130
    say(f"job {run.job_id} ended {state}")
    return 0


def cmd_cancel(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.backends import attach_each
    from hpcjax.protocol.contract import FINISHED_STATES

    runs = attach_each(args.job_id, cluster_from_args(args))  # a sweep's id: each element not ended yet
    if len(runs) > 1:
        ended = [run for run in runs if run.state() in FINISHED_STATES]
        if len(ended) == len(runs):
            raise HpcjaxError(f"every element of sweep {args.job_id} has already ended; nothing to cancel",
                              f"see `hpcjax status {args.job_id}`")
        # the pending first: a running element cancelled first would let the next one start
        runs = sorted((run for run in runs if run not in ended), key=lambda run: run.state() != "PENDING")
    for run in runs:
        run.cancel()
        say(f"cancelled job {run.job_id}")
    return 0


def add_status_verb(sub) -> None:
    status = sub.add_parser("status", help=HELP["status"])
    status.add_argument("job_id", help="the id submit printed (a SLURM job id, or a local job's)")
    status.add_argument("--json", action="store_true", help="state, attempts and failure report as JSON on stdout")
    add_cluster_options(status, profile_file=True)
    status.set_defaults(run=cmd_status, takes_command=False)


def add_logs_verb(sub) -> None:
    logs = sub.add_parser("logs", help=HELP["logs"])
    logs.add_argument("job_id", help="the id submit printed")
    logs.add_argument("--rank", type=kinds.count, help="only this rank")
    logs.add_argument("--tail", type=kinds.count, help="only the last N lines of each rank")
    logs.add_argument("-f", "--follow", action="store_true",
                      help="stream new lines while the job runs; stop when it ends")
    add_cluster_options(logs, profile_file=True)
    logs.set_defaults(run=cmd_logs, takes_command=False)


def add_cancel_verb(sub) -> None:
    cancel = sub.add_parser("cancel", help=HELP["cancel"])
    cancel.add_argument("job_id", help="the id submit printed")
    add_cluster_options(cancel, profile_file=True)
    cancel.set_defaults(run=cmd_cancel, takes_command=False)
