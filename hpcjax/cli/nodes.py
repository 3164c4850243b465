"""`hpcjax nodes`: the nodes a preflight failed (when, what, which job), from hpcjax's records of
the jobs it followed. A job's failures are recorded when its outcome is read (`submit --wait`,
`status`, a Trainer's fit)."""

from __future__ import annotations

import argparse
import json
import sys


def failed_nodes() -> list[dict]:
    """Every recorded preflight failure, the newest first."""
    from hpcjax.catalog import records

    rows = []
    for file in sorted(records.records_dir().glob("*.json")):
        try:
            record = records.parse(file.read_text(errors="replace"), file.stem, str(file))
        except (OSError, records.DamagedRecord):
            continue
        for failure in (record or {}).get("preflight_failures") or []:
            if isinstance(failure, dict) and failure.get("node"):
                rows.append({"node": str(failure["node"]), "job_id": str(record.get("job_id", file.stem)),
                             "cluster": str((record.get("cluster") or {}).get("destination") or ""),
                             "attempt": failure.get("attempt"), "at": failure.get("at") or "",
                             "what": str(failure.get("what") or "")})
    return sorted(rows, key=lambda r: str(r["at"]), reverse=True)


def cmd_nodes(args: argparse.Namespace, command: list[str]) -> int:
    rows = failed_nodes()
    if args.node:
        rows = [r for r in rows if r["node"] == args.node]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    if not rows:
        print("no node has failed a preflight in the jobs hpcjax followed" +
              (f" (none named {args.node})" if args.node else ""), file=sys.stderr)
        return 0
    width = max(len(r["node"]) for r in rows)
    for r in rows:
        where = f"{r['job_id']}" + (f" on {r['cluster']}" if r["cluster"] else "") + f" attempt {r['attempt']}"
        print(f"{r['node']:<{width}}  {r['at'] or '?'}  job {where}: {r['what']}")
    return 0


def add_nodes_verb(sub) -> None:
    nodes = sub.add_parser("nodes", help="the nodes a preflight failed: when, what, which job (--preflight)")
    nodes.add_argument("node", nargs="?", help="only this node")
    nodes.add_argument("--json", action="store_true", help="the failures as JSON on stdout")
    nodes.set_defaults(run=cmd_nodes, takes_command=False)
