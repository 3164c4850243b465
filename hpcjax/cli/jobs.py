"""The verbs that build a job: render and submit. They build a request from the job options, which
hpcjax.launch resolves and submits, then use only the Run handle, whatever the backend. (The verbs
about a job already submitted are hpcjax.cli.submitted's.)"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hpcjax.cli import kinds
from hpcjax.values.errors import UsageError
from hpcjax.values.validate import make_directory
from hpcjax.cli.options import add_backend_option, add_job_options, request_from_args, takes_command
from hpcjax.cli.reach import add_cluster_options
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


# One adder per verb (hpcjax.cli.verbs): `hpcjax status` builds its own parser, not submit's and
# render's with every job option (7 ms of its 30 before it can ask SLURM).
def add_render_verb(sub) -> None:
    render = sub.add_parser("render", help=HELP["render"])
    add_job_options(render)
    add_sweep_options(render)
    render.add_argument("-o", "--output", help="write the script to this file instead of stdout")
    render.add_argument("--check", action="store_true",
                        help="also check the script with `bash -n` (submit always does, when a prologue, "
                             "epilogue or site template is given)")
    add_cluster_options(render)
    takes_command(render, cmd_render)


def add_submit_verb(sub) -> None:
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
