"""`hpcjax nodes`: the nodes a preflight failed (when, what, which job), from hpcjax's records of
the jobs it followed. A job's failures are recorded when its outcome is read (`submit --wait`,
`status`, a Trainer's fit)."""

from __future__ import annotations

import argparse
import json
from hpcjax.values.voice import say
from hpcjax.cli.verbs import HELP


def cmd_nodes(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.catalog.keep import preflight_failures

    rows = preflight_failures()
    if args.node:
        rows = [r for r in rows if r["node"] == args.node]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    if not rows:
        say("no node has failed a preflight in the jobs hpcjax followed" +
            (f" (none named {args.node})" if args.node else ""))
        return 0
    width = max(len(r["node"]) for r in rows)
    for r in rows:
        where = f"{r['job_id']}" + (f" on {r['cluster']}" if r["cluster"] else "") + f" attempt {r['attempt']}"
        print(f"{r['node']:<{width}}  {r['at'] or '?'}  job {where}: {r['what']}")
    return 0


def add_nodes_verb(sub) -> None:
    nodes = sub.add_parser("nodes", help=HELP["nodes"])
    nodes.add_argument("node", nargs="?", help="only this node")
    nodes.add_argument("--json", action="store_true", help="the failures as JSON on stdout")
    nodes.set_defaults(run=cmd_nodes, takes_command=False)
