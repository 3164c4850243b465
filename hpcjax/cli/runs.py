"""`hpcjax runs` (the catalog of runs: list, show, usage) and `hpcjax relaunch` (the same job
again, options on the command line replacing the recorded ones)."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import time
from contextlib import closing
from datetime import datetime

from hpcjax.cli.options import add_backend_option, add_job_options, command_line_options, COMMAND_USAGE
from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.values.voice import say
from hpcjax.cli.verbs import HELP

SINCE = re.compile(r"(\d+)([mhdw])")
SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: float | None = None) -> float:
    """--since 3d / 12h / 90m / 2w, or a date (2026-11-20, 2026-11-20T08:00)."""
    now = time.time() if now is None else now
    match = SINCE.fullmatch(text.strip())
    if match:
        return now - int(match[1]) * SECONDS[match[2]]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise UsageError(f"--since {text!r} is neither a duration nor a date",
                         "e.g. --since 3d, --since 12h, --since 2026-11-20") from None


def load(args: argparse.Namespace) -> list[dict]:
    from hpcjax import backends
    from hpcjax.catalog import db, keep
    from hpcjax.protocol.contract import JOB_STATES

    if args.state is not None and args.state.upper() not in JOB_STATES:
        raise UsageError(f"--state {args.state!r} is not a state a job can be in",
                         f"SLURM's states: {', '.join(sorted(JOB_STATES))} (any case), e.g. --state failed")
    since = parse_since(args.since) if args.since else None
    if args.sweep is not None and not re.fullmatch(r"\d{1,19}", args.sweep.strip()):
        raise UsageError(f"--sweep {args.sweep!r} is not a sweep's id",
                         "a sweep's id is the job id `hpcjax submit --sweep` printed, e.g. --sweep 1234 (`hpcjax runs` "
                         "lists each element as ID_N)")
    with closing(db.connect()) as conn:
        query = dict(state=args.state, since=since, name=args.name, cluster=args.cluster, sweep=args.sweep)
        rows = db.runs(conn, **query)
        if rows:
            keep.refresh(conn, rows, backends.get)
            rows = db.runs(conn, **query)
    return rows


def find(job: str) -> dict:
    from hpcjax.catalog import db

    with closing(db.connect()) as conn:
        rows = [r for r in db.runs(conn) if job in (r["key"], r["job_id"])]
        if rows:
            from hpcjax import backends
            from hpcjax.catalog import keep

            keep.refresh(conn, rows, backends.get)
            rows = [r for r in db.runs(conn) if r["key"] == rows[0]["key"]]
    if not rows:
        raise UsageError(f"no run {job!r} in the catalog", "`hpcjax runs` lists the runs hpcjax knows")
    return rows[0]


def duration(run: dict, now: float | None = None) -> float:
    now = time.time() if now is None else now
    return sum(max(0.0, (a.get("end") or now) - a["start"]) for a in run["attempts"] if a.get("start"))


def clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def last_metric(run: dict) -> str:
    metrics = run.get("metrics") or {}
    name = next((k for k in ("loss", "val_loss") if isinstance(metrics.get(k), (int, float))), None) or next(
        (k for k, v in metrics.items() if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)), None)
    if name is None:
        return ""
    step = f" @{metrics['step']}" if "step" in metrics else ""
    return f"{name} {metrics[name]:.4g}{step}"


def aligned(lines: list[tuple]) -> str:
    """Rows of text cells in columns as wide as their widest cell."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() + "\n" for line in lines)


def table(rows: list[dict]) -> str:
    head = ("ID", "NAME", "STATE", "LAYOUT", "SUBMITTED", "DURATION", "GPU-H", "ATTEMPTS", "LAST")
    lines = [head]
    for run in rows:
        layout = f"{run['nodes']}x{run['gpus_per_node']}/{run['gpus_per_process']}"
        lines.append((run["key"], run["name"] or "", run["state"] or "?", layout,
                      datetime.fromtimestamp(run["submitted"]).strftime("%m-%d %H:%M") if run["submitted"] else "",
                      clock(duration(run)), f"{run['gpu_hours']:.3f}", str(len(run["attempts"])), last_metric(run)))
    return aligned(lines)


def metric(run: dict, name: str):
    value = (run.get("metrics") or {}).get(name)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def check_metric(rows: list[dict], name: str) -> None:
    """--sort names a metric some run reported (a misspelt one would sort nothing, silently)."""
    import difflib

    known = sorted({key for r in rows for key, value in (r.get("metrics") or {}).items()
                    if isinstance(value, (int, float)) and not isinstance(value, bool)})
    if rows and name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        raise UsageError(f"--sort {name!r}: no run listed reported that metric",
                         (f"did you mean --sort {close[0]}? " if close else "")
                         + f"metrics the runs reported: {', '.join(known) or 'none'}")


def sort_by(rows: list[dict], name: str) -> list[dict]:
    """Smallest first (a loss), runs without the metric last."""
    return sorted(rows, key=lambda r: (metric(r, name) is None, metric(r, name) or 0.0))


def sweep_table(rows: list[dict], sort: str | None) -> str:
    """One row per element of a sweep: its values, state and final metric (which setting won)."""
    names = list((rows[0].get("sweep_values") or {}).keys())
    shown = sort or "loss"
    lines = [("ID", *names, "STATE", shown.upper())]
    for run in rows:
        value = metric(run, shown)
        lines.append((run["key"], *[(run.get("sweep_values") or {}).get(n, "") for n in names], run["state"] or "?",
                      "" if value is None else f"{value:.6g}"))
    return aligned(lines)


def usage(rows: list[dict], by: str) -> list[dict]:
    """GPU hours by day or week (of each attempt's start) and partition."""
    from hpcjax.catalog import db

    totals: dict[tuple[str, str], dict] = {}
    for run in rows:
        for attempt in run["attempts"]:
            if attempt.get("start") is None:
                continue
            day = datetime.fromtimestamp(attempt["start"])
            period = day.strftime("%Y-%m-%d") if by == "day" else day.strftime("%G-W%V")
            entry = totals.setdefault((period, run["partition"] or "(default)"),
                                      {"period": period, "partition": run["partition"] or "(default)",
                                       "gpu_hours": 0.0, "runs": set()})
            entry["gpu_hours"] += db.gpu_hours({**run, "attempts": [attempt]})
            entry["runs"].add(run["key"])
    return [{**e, "runs": len(e["runs"])} for _, e in sorted(totals.items(), reverse=True)]


def cmd_runs(args: argparse.Namespace, command: list[str]) -> int:
    if args.what == "show":
        if not args.job:
            raise UsageError("`hpcjax runs show` needs a run's id", "hpcjax runs show JOBID")
        return show(find(args.job), args.json)
    if args.what is not None:
        raise UsageError(f"unknown `hpcjax runs {args.what}`", "hpcjax runs [filters], or hpcjax runs show JOBID")
    rows = load(args)
    if args.usage:
        totals = usage(rows, args.usage)
        if args.json:
            print(json.dumps(totals, indent=2))
        else:
            print(f"{'PERIOD':<12}{'PARTITION':<16}{'GPU-H':>10}{'RUNS':>6}")
            for entry in totals:
                print(f"{entry['period']:<12}{entry['partition']:<16}{entry['gpu_hours']:>10.3f}{entry['runs']:>6}")
        return 0
    if args.sort:
        check_metric(rows, args.sort)
        rows = sort_by(rows, args.sort)
    if args.json:
        print(json.dumps(rows, indent=2))
    elif args.sweep and rows:
        sys.stdout.write(sweep_table(rows, args.sort))
    else:
        sys.stdout.write(table(rows) if rows else "")
        if not rows:
            say("no runs match" if any((args.state, args.since, args.name, args.cluster, args.sweep))
                else "no runs yet: `hpcjax submit` records every job here")
    return 0


def show(run: dict, as_json: bool) -> int:
    if run["final"] and run["state"] != "COMPLETED" and not run.get("report"):
        run["report"] = failure_report(run)
    if as_json:
        print(json.dumps(run, indent=2))
        return 0
    print(f"run {run['key']} ({run['name']}, {run['kind']}, {run['backend']}"
          f"{' on ' + run['cluster'] if run['cluster'] else ''}): {run['state']}")
    print(f"  command: {shlex.join(run['command'] or [])}")
    print(f"  layout: {run['nodes']} node(s) x {run['gpus_per_node']} GPU(s), {run['gpus_per_process']} per process"
          f"{'; partition ' + run['partition'] if run['partition'] else ''}")
    print(f"  logs: {run['output_dir']}" + (f"   run directory: {run['run_dir']}" if run["run_dir"] else ""))
    print(f"  GPU hours: {run['gpu_hours']:.4f} over {len(run['attempts'])} attempt(s); last: {last_metric(run) or '-'}")
    for attempt in run["attempts"]:
        start = datetime.fromtimestamp(attempt["start"]).isoformat(timespec="seconds") if attempt["start"] else "-"
        took = clock((attempt["end"] or time.time()) - attempt["start"]) if attempt["start"] else "-"
        print(f"  attempt {attempt['attempt']}: {attempt['state']}, started {start}, {took}, on "
              f"{attempt['nodelist'] or '-'}, {attempt['gpus'] or '?'} GPU(s)")
    if run.get("report"):
        print(run["report"])
    return 0


def failure_report(run: dict) -> str:
    """How a failed run ended, kept in the catalog once read (SLURM forgets, the catalog does not)."""
    from hpcjax.catalog import db
    from hpcjax.launch import attach

    try:
        report = attach(run["job_id"], _cluster(run)).outcome.report()
    except HpcjaxError as error:
        return f"(no failure report: {error.message})"
    with closing(db.connect()) as conn:
        db.save(conn, run["key"], report=report)
    return report


def _cluster(run: dict):
    from hpcjax.catalog import records
    from hpcjax.job.clusters import cluster_from_record

    return cluster_from_record((records.load(run["key"]) or {}).get("cluster"))


def cmd_relaunch(args: argparse.Namespace, command: list[str] | None) -> int:
    from hpcjax.cli.following import submit_and_follow
    from hpcjax.launch.request import Request, job_and_cluster, submission

    run = find(args.job)
    if run.get("kind") == "hold":
        raise UsageError(f"run {run['key']} is a held allocation, not a job to run again",
                         f"hold another: hpcjax hold --name {run.get('name') or 'NAME'} --nodes N --gpus-per-node G")
    if not run.get("options") or not run.get("command"):
        raise UsageError(f"run {run['key']} was recorded before hpcjax kept its options and command",
                         "submit it again with `hpcjax submit`")
    given = {k: v for k, v in command_line_options(args).items() if v is not None}
    values = {**run["options"], **given}  # what is given replaces what was recorded, lists too
    if "env" in given:
        values["env"] = {**run["options"].get("env", {}), **given["env"]}
    backend = args.backend if args.backend != "auto" else run["backend"]
    request = Request(command=command or run["command"], given=values, backend=backend, cluster=_cluster(run),
                      travels={"announce": lambda job: print(job, flush=True)})
    spec, cluster, merged = job_and_cluster(request)  # a bad value refused before it is said to relaunch
    say(f"relaunching run {run['key']}" + (f" with {', '.join(sorted(given))} changed" if given else ""))
    sub = submission(request, spec, cluster, merged)
    return submit_and_follow(sub, args.wait)


def add_runs_verb(sub) -> None:
    verb = sub.add_parser("runs", help=HELP["runs"])
    verb.add_argument("what", nargs="?", metavar="show", help="`show` to see one run in full")
    verb.add_argument("job", nargs="?", metavar="ID", help="with show: the run's id")
    verb.add_argument("--state", help="only runs in this state, e.g. FAILED")
    verb.add_argument("--since", help="only runs submitted since: 3d, 12h, 90m, 2w, or a date (2026-11-20)")
    verb.add_argument("--name", help="only runs whose name contains this")
    verb.add_argument("--cluster", help="only runs on this cluster (its SSH destination)")
    verb.add_argument("--sweep", metavar="ID", help="the elements of one sweep")
    verb.add_argument("--sort", metavar="METRIC", help="smallest first by this metric of the last record, "
                                                         "e.g. --sort val_loss (with --sweep: which setting won)")
    verb.add_argument("--usage", choices=("day", "week"), help="GPU hours by day or week and partition")
    verb.add_argument("--json", action="store_true", help="as JSON on stdout")
    verb.set_defaults(run=cmd_runs, takes_command=False)


def add_relaunch_verb(sub) -> None:  # its own: `hpcjax runs` builds no parser with every job option
    again = sub.add_parser("relaunch", help=HELP["relaunch"],
                           usage="%(prog)s ID [options]" + f" [{COMMAND_USAGE.strip()}]")
    again.add_argument("job", metavar="ID", help="the run's id (see `hpcjax runs`)")
    add_job_options(again)
    again.add_argument("--wait", action="store_true", help="wait and exit with the job's outcome")
    add_backend_option(again)
    again.set_defaults(run=cmd_relaunch, takes_command=True, job_defaults={})
