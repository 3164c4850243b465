"""The verbs about jobs: render, submit, status, logs, cancel. They build a spec
or find a job, then use only the Run handle (hpcjax.launch), whatever the backend."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from hpcjax.cli import kinds
from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.values.validate import make_directory
from hpcjax.cli.options import (add_backend_option, add_cluster_options, add_job_options, cluster_from_args,
                                request_from_args, takes_command)
from hpcjax.cli.outputs import output_file, write_atomically
from hpcjax.cli.following import submit_and_follow
from hpcjax.values.voice import say
from hpcjax.cli.verbs import HELP


def cmd_render(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.launch.request import job_and_cluster, submission
    from hpcjax.slurm.script import render_sbatch

    output = output_file(args.output) if args.output is not None else None
    request = request_from_args(args, command)
    spec, cluster, values = job_and_cluster(request)
    if cluster.remote:
        spec = as_there(submission(request, spec, cluster, values))
    else:
        warn_missing_here(spec)
    text = render_sbatch(spec, check_syntax=args.check)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    made = not cluster.remote and not Path(spec.output_dir).exists()
    if not cluster.remote:  # sbatch needs the log directory to exist
        make_directory(spec.output_dir, "--output-dir")
    try:
        write_atomically(output, text)
    except UsageError:
        if made:  # nothing half done: the log directory goes with the script that was not written
            Path(spec.output_dir).rmdir()
        raise
    if cluster.remote:
        say(f"wrote {args.output} ({spec.layout.name}) with {cluster.name}'s paths; `hpcjax submit "
            f"--cluster {cluster.destination}` ships hpcjax and the code it expects there")
    else:
        say(f"wrote {args.output} ({spec.layout.described}); submit it with: sbatch {args.output}")
    return 0


def warn_missing_here(spec) -> None:
    """What `submit` would refuse because it is missing on this machine (the image file, a bind
    source), said on stderr: a rendered script may be meant for where they exist, or made
    before them."""
    from hpcjax.containers import binds

    image, sources = binds.paths_to_check(spec)
    for what, path in [("image", image)] * bool(image) + [("bind source", s) for s in sources]:
        if not Path(path).exists():
            say(f"warning: {what} {path!r} does not exist on this machine: `hpcjax submit` would refuse it; "
                "sbatch of this script fails unless it exists where the job runs")


def as_there(sub):
    """The submission's spec with the cluster's paths, its image and binds checked there (one round
    trip; nothing shipped or made)."""
    from hpcjax.launch import refusals, staging

    probe = refusals.ask(sub, sub.backend.wants(sub))
    sub.backend.check(sub, probe)
    return staging.as_there(sub, probe.home).spec


def cmd_submit(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.launch import steps
    from hpcjax.launch.request import resolve

    announce = lambda job_id: print(job_id, flush=True)  # noqa: E731 (on stdout once it is recorded)
    sub = resolve(request_from_args(args, command, announce=announce))
    if args.dry_run:
        shown, said = steps.dry_run(sub)
        say(said)
        sys.stdout.write(shown)
        return 0
    return submit_and_follow(sub, args.wait)


def cmd_status(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.backends import attach_each

    runs = attach_each(args.job_id, cluster_from_args(args))  # a sweep's id: each of its elements
    if args.json:
        sweep = [run.as_dict() for run in runs] if runs[0].job_id != args.job_id.strip() else None
        print(json.dumps(sweep if sweep is not None else runs[0].as_dict(), indent=2))  # a sweep's: a list
    else:
        print("\n".join(run.describe() for run in runs))
    return 0


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


def add_job_verbs(sub) -> None:
    render = sub.add_parser("render", help=HELP["render"])
    add_job_options(render)
    add_sweep_options(render)
    render.add_argument("-o", "--output", help="write the script to this file instead of stdout")
    render.add_argument("--check", action="store_true",
                        help="also check the script with `bash -n` (submit always does, when a prologue, "
                             "epilogue or site template is given)")
    add_cluster_options(render)
    takes_command(render, cmd_render)

    submit = sub.add_parser("submit", help=HELP["submit"])
    add_job_options(submit)
    add_sweep_options(submit)
    submit.add_argument("--wait", action="store_true",
                        help="wait and exit with the job's outcome (the local backend always waits: its "
                             "ranks are this process's children)")
    submit.add_argument("--dry-run", action="store_true", help="show what would be submitted")
    add_backend_option(submit)
    add_cluster_options(submit)
    submit.add_argument("--upload", action="append", metavar="LOCAL[:NAME]",
                        help="with --cluster: send a local directory (or file) to the cluster, once per content, "
                             "and link it into the job's working directory as NAME (default: its path below "
                             "the working directory, else its name), e.g. --upload ./data (repeatable)")
    takes_command(submit, cmd_submit)

    status = sub.add_parser("status", help=HELP["status"])
    status.add_argument("job_id", help="the id submit printed (a SLURM job id, or a local job's)")
    status.add_argument("--json", action="store_true", help="state, attempts and failure report as JSON on stdout")
    add_cluster_options(status, profile_file=True)
    status.set_defaults(run=cmd_status, takes_command=False)

    logs = sub.add_parser("logs", help=HELP["logs"])
    logs.add_argument("job_id", help="the id submit printed")
    logs.add_argument("--rank", type=kinds.count, help="only this rank")
    logs.add_argument("--tail", type=kinds.count, help="only the last N lines of each rank")
    logs.add_argument("-f", "--follow", action="store_true",
                      help="stream new lines while the job runs; stop when it ends")
    add_cluster_options(logs, profile_file=True)
    logs.set_defaults(run=cmd_logs, takes_command=False)

    cancel = sub.add_parser("cancel", help=HELP["cancel"])
    cancel.add_argument("job_id", help="the id submit printed")
    add_cluster_options(cancel, profile_file=True)
    cancel.set_defaults(run=cmd_cancel, takes_command=False)


def add_sweep_options(parser) -> None:
    chain = parser.add_argument_group("sweeps and chains")
    chain.add_argument("--sweep", action="append", metavar="NAME=V1,V2",
                       help="run the command once per value, {NAME} in it replaced (repeatable: the cross product), "
                            "as one job array, e.g. --sweep lr=1e-3,3e-4 -- python train.py --lr {lr}")
    chain.add_argument("--max-parallel", type=kinds.positive, metavar="N",
                       help="with --sweep: at most N elements at once")
    chain.add_argument("--after", action="append", metavar="JOBID[:ok|:any]",
                       help="start when job JOBID has ended: ok (the default) when it succeeded, any however it "
                            "ended; if it failed, this job is cancelled, not left pending (repeatable)")
