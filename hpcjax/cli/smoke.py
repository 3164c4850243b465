"""`hpcjax smoke`: one job that runs the checks on every rank (SLURM or this
machine), then one verdict: a table per node and rank, exit 0 only if all pass."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from hpcjax.cli.following import interrupted_one
from hpcjax.cli.options import add_backend_option, add_job_options, request_from_args, takes_command
from hpcjax.cli.reach import add_cluster_options
from hpcjax.cli.kinds import parse_sizes
from hpcjax.values.errors import UsageError
from hpcjax.values.voice import say
from hpcjax.cli.verbs import HELP

PLOT_FORMATS = (".png", ".svg", ".pdf")


def smoke_command(spec, bandwidth: bool, sizes: str | None,
                  cluster_python: str | None = None) -> tuple[str, ...]:
    python = replace(spec, cluster_python=cluster_python or "").hpcjax_python()
    command = [python, "-m", "hpcjax", "check", "all", "--json"]
    if bandwidth:
        command.append("--bandwidth")
    if sizes:
        command += ["--sizes", sizes]
    return tuple(command)


def smoke_spec(base, bandwidth: bool, sizes: str | None = None,
               cluster_python: str | None = None):
    return replace(base, command=smoke_command(base, bandwidth, sizes, cluster_python))


def cmd_smoke(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.follow import verdicts as smoke
    from hpcjax.launch import steps
    from hpcjax.launch.request import resolve

    if command:
        raise UsageError("`hpcjax smoke` runs its own checks and takes no command",
                         "use `hpcjax submit ... -- COMMAND` to run a program")
    if args.sizes:
        parse_sizes(args.sizes)  # refuse a bad value before anything runs
    if args.plot and not args.bandwidth:
        raise UsageError("--plot draws the bandwidth sweep, and --bandwidth was not given",
                         "add --bandwidth, e.g. hpcjax smoke --bandwidth --plot bandwidth.png ...")
    if args.plot and Path(args.plot).suffix.lower() not in PLOT_FORMATS:
        raise UsageError(f"--plot {args.plot!r}: a plot is written as {', '.join(PLOT_FORMATS)}",
                         "e.g. --plot bandwidth.png")
    # The checks need nothing of the working tree: only hpcjax is shipped.
    sub = resolve(request_from_args(args, ["placeholder"], ship_code=False))
    spec = smoke_spec(sub.spec, args.bandwidth, args.sizes, sub.cluster.python if sub.cluster.remote else None)
    sub = replace(sub, spec=spec)
    backend = sub.backend.name
    try:
        [run] = steps.submit(sub)
    except KeyboardInterrupt as interrupt:
        return interrupted_one(interrupt, cancelled)
    try:
        outcome = run.wait()
    except KeyboardInterrupt:
        return cancelled(run)
    reports = smoke.read_reports(run)
    rows = smoke.verdicts(reports, spec.layout.num_processes, args.bandwidth,
                          smoke.silent_ranks(run, reports, spec.layout.num_processes, outcome))
    ok = all(r["ok"] for r in rows)
    pairs = reports.get(0, {}).get("bandwidth", {}).get("pairs", [])
    # No rank reported: the job ended before its ranks ran (a runtime not on the nodes, a module that
    # would not load), and why is the job's to say, not an empty log's (issue 63)
    job_said = outcome.report() if not reports and not outcome.ok else ""
    if job_said:
        say(job_said)
    if args.json:
        print(json.dumps({"layout": spec.layout.name, "backend": backend, "job_id": run.job_id, "ranks": rows,
                          "pairs": pairs, "ok": ok, **({"job": job_said} if job_said else {})}, indent=2))
    else:
        where = f" on {sub.cluster.destination}" if sub.cluster.remote else ""
        print(f"smoke test {spec.layout.described} ({backend}{where}, job {run.job_id}):")
        print(smoke.format_table(rows, args.bandwidth))
        print(smoke.format_pairs(pairs), end="")
    if args.plot and "bandwidth" in reports.get(0, {}):
        from hpcjax.pages.bandwidth import bandwidth_plot

        say(f"bandwidth plot: {bandwidth_plot(reports[0]['bandwidth'], Path(args.plot)).resolve()}")
    return 0 if ok else 1


def add_smoke_verb(sub) -> None:
    smoke = sub.add_parser("smoke", help=HELP["smoke"])
    add_job_options(smoke, job_name="hpcjax-smoke", time="00:10:00")
    smoke.add_argument("--bandwidth", action="store_true", help="also run the bandwidth sweep")
    smoke.add_argument("--sizes", help="bandwidth sizes, as for `hpcjax check`")
    smoke.add_argument("--plot", metavar="FILE.png", help="with --bandwidth: bus bandwidth by message size, "
                       "for all devices and per node pair, drawn into FILE")
    add_backend_option(smoke)
    add_cluster_options(smoke)
    smoke.add_argument("--json", action="store_true", help="the verdict as JSON on stdout")
    takes_command(smoke, cmd_smoke)


def cancelled(run) -> int:
    """Ctrl-C once the smoke job exists: it is cancelled, as a smoke test is worth nothing half-run."""
    from hpcjax.follow.interrupts import uninterrupted

    with uninterrupted():  # a second Ctrl-C must not leave it running
        run.cancel()
    say(f"\ninterrupted: cancelled smoke job {run.job_id}")
    return 130
