"""`hpcjax smoke`: one job that runs the checks on every rank (SLURM or this
machine), then one verdict: a table per node and rank, exit 0 only if all pass."""

from __future__ import annotations

import argparse
import json
import sys

from hpcjax.cli.options import add_backend_option, add_job_options, parse_sizes, spec_from_args
from hpcjax.errors import UsageError


def cmd_smoke(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax import launch
    from hpcjax.launch import smoke

    if command:
        raise UsageError("`hpcjax smoke` runs its own checks and takes no command",
                         "use `hpcjax submit ... -- COMMAND` to run a program")
    if args.sizes:
        parse_sizes(args.sizes)  # refuse a bad value before anything runs
    spec = smoke.smoke_spec(spec_from_args(args, ["placeholder"]), args.bandwidth, args.sizes)
    backend = launch.choose_backend(args.backend)
    run = launch.submit(spec, backend)
    try:
        run.wait()
    except KeyboardInterrupt:
        run.cancel()  # a smoke test is worth nothing half-run
        print(f"\ninterrupted: cancelled smoke job {run.job_id}", file=sys.stderr)
        return 130
    rows = smoke.verdicts(smoke.read_reports(run.rank_logs()), spec.layout.num_processes, args.bandwidth)
    ok = all(r["ok"] for r in rows)
    if args.json:
        print(json.dumps({"layout": spec.layout.name, "backend": backend, "job_id": run.job_id, "ranks": rows,
                          "ok": ok}, indent=2))
    else:
        print(f"smoke test {spec.layout.name} ({backend}, job {run.job_id}):")
        print(smoke.format_table(rows, args.bandwidth))
    return 0 if ok else 1


def add_smoke_verb(sub) -> None:
    smoke = sub.add_parser("smoke", help="submit one job that checks devices and all-reduce on every rank")
    add_job_options(smoke, job_name="hpcjax-smoke", time="00:10:00")
    smoke.add_argument("--bandwidth", action="store_true", help="also run the bandwidth sweep")
    smoke.add_argument("--sizes", help="bandwidth sizes, as for `hpcjax check`")
    add_backend_option(smoke)
    smoke.add_argument("--json", action="store_true", help="the verdict as JSON on stdout")
    smoke.set_defaults(run=cmd_smoke, takes_command=True)
