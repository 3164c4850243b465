"""`hpcjax stacks JOBID`: every rank's Python stacks, grouped (hpcjax.follow.stacks)."""

from __future__ import annotations

import argparse
import json
import sys

from hpcjax.cli import kinds
from hpcjax.cli.reach import add_cluster_options, cluster_from_args
from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.values.voice import say
from hpcjax.cli.verbs import HELP


def cmd_stacks(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax import backends
    from hpcjax.follow import stacks

    run = backends.attach_one(args.job_id, cluster_from_args(args), "stacks")
    say(f"taking the stacks of job {run.job_id} (py-spy on every node)...")
    entries, seconds = stacks.take(run, backends.get(run.backend), native=args.native)
    if args.rank is not None:
        entries = [e for e in entries if e.get("rank") == args.rank]
        if not entries:
            raise UsageError(f"rank {args.rank} of job {run.job_id} was not found on its nodes",
                             f"ranks are 0..{run.num_ranks - 1}" if run.num_ranks else "see `hpcjax status`")
    if args.json:
        print(json.dumps({"job_id": run.job_id, "seconds": round(seconds, 3), "ranks": entries}, indent=2))
    else:
        sys.stdout.write(stacks.report(run.job_id, entries, seconds, all_threads=args.all))
    if not any("threads" in e for e in entries):
        raise HpcjaxError(f"no rank of job {run.job_id} could be read", entries[0].get("hint", ""))
    return 0


def add_stacks_verb(sub) -> None:
    verb = sub.add_parser("stacks", help=HELP["stacks"])
    verb.add_argument("job_id", help="a running job's id")
    verb.add_argument("--rank", type=kinds.count, help="only this rank")
    verb.add_argument("--all", action="store_true", help="every thread of each rank (default: the main thread's "
                                                         "stack decides the groups)")
    verb.add_argument("--native", action="store_true", help="with native frames (C, C++, Cython: XLA, NCCL)")
    verb.add_argument("--json", action="store_true", help="py-spy's threads of every rank as JSON on stdout")
    add_cluster_options(verb, profile_file=True)
    verb.set_defaults(run=cmd_stacks, takes_command=False)
