"""`hpcjax report RUN_DIR`: one HTML page (and PNG plots beside it) about a training run,
made from what the run wrote; `hpcjax report RUN_A RUN_B ...`: one page comparing them.
Prints the page's path on stdout; nothing is served."""

from __future__ import annotations

import argparse
from pathlib import Path

from hpcjax.values.errors import UsageError
from hpcjax.protocol.rundir import RunDir
from hpcjax.values.voice import say
from hpcjax.cli.verbs import HELP


def cmd_report(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.pages.page import render

    from hpcjax.cli.outputs import output_file

    if any(not text.strip() for text in args.run_dir):
        raise UsageError("the run directory is an empty string", "give the --run-dir of a training run, or a job id")
    chosen = output_file(args.output) if args.output is not None else None
    if len(args.run_dir) > 1:
        return compare(args, chosen)
    args.run_dir = args.run_dir[0]
    run_dir = Path(args.run_dir)
    if args.cluster or not run_dir.is_dir():
        run_dir = _fetched(args) or run_dir
    output, record = render(run_dir, chosen or RunDir(run_dir).report_page)
    for problem in record.problems:
        say(f"note: {problem}")
    say(f"report of {len(record.steps)} step(s), {len(record.restarts)} restart(s): "
        + ("open it in a browser" if args.open else "the page and its PNGs"))
    print(output.resolve())
    return 0


def compare(args: argparse.Namespace, chosen: Path | None) -> int:
    """Several runs on one page: their curves overlaid, the configuration keys that differ."""
    from hpcjax.pages import compare as comparison

    if args.cluster:
        raise UsageError("a comparison reads run directories here",
                         "fetch each run first (`hpcjax fetch JOBID --cluster ...`), then compare the copies")
    output, records = comparison.render([Path(d) for d in args.run_dir], chosen or Path("compare.html"))
    for name, record in zip(comparison.names_of([Path(d) for d in args.run_dir]), records):
        for problem in record.problems:
            say(f"note: {name}: {problem}")
    say(f"comparison of {len(records)} runs: the page and its PNGs")
    print(output.resolve())
    return 0


def _fetched(args: argparse.Namespace) -> Path | None:
    """A run (or job) on a cluster reached over SSH: fetched without checkpoints into
    ./RUN_NAME (or --to), and the report built here. None when no cluster is named (this machine)."""
    from hpcjax.cli.fetch import fetch_target
    from hpcjax.cli.reach import cluster_from_args

    from hpcjax.values import jobid

    if not cluster_from_args(args).remote and not (jobid.is_element(args.run_dir) and not Path(args.run_dir).exists()):
        return None  # a run directory here (a directory named like a job id is one too)
    args.target = args.run_dir
    landed, said = fetch_target(args, Path(args.to) if args.to else None, "none", run_dir_needed=True)
    say(f"fetched {said}")
    return landed


def add_report_verb(sub) -> None:
    report = sub.add_parser("report", help=HELP["report"])
    report.add_argument("run_dir", nargs="+", help="the training run's --run-dir (with --cluster: its path there, "
                                                   "or the job id whose command named it); several: a comparison")
    report.add_argument("-o", "--output", metavar="FILE.html", help="default: RUN_DIR/report.html; for a "
                                                                    "comparison ./compare.html")
    report.add_argument("--open", action="store_true", help="print the page's path to open (nothing is served)")
    report.add_argument("--to", metavar="DIR", help="with --cluster: where the fetched run goes (default: "
                                                    "./RUN_NAME)")
    from hpcjax.cli.reach import add_cluster_options

    add_cluster_options(report, profile_file=True)
    report.set_defaults(run=cmd_report, takes_command=False)
