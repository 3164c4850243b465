"""`hpcjax report RUN_DIR`: one HTML page (and PNG plots beside it) about a training run,
made from what the run wrote. Prints the page's path on stdout; nothing is served."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hpcjax.errors import UsageError
from hpcjax.rundir import RunDir


def cmd_report(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.pages.page import render

    from hpcjax.cli.options import output_file

    if not args.run_dir.strip():
        raise UsageError("the run directory is an empty string", "give the --run-dir of a training run, or a job id")
    chosen = output_file(args.output) if args.output is not None else None
    run_dir = Path(args.run_dir)
    if args.cluster or not run_dir.is_dir():
        run_dir = _fetched(args) or run_dir
    output, record = render(run_dir, chosen or RunDir(run_dir).report_page)
    for problem in record.problems:
        print(f"note: {problem}", file=sys.stderr)
    print(f"report of {len(record.steps)} step(s), {len(record.restarts)} restart(s): "
          + ("open it in a browser" if args.open else "the page and its PNGs"), file=sys.stderr)
    print(output.resolve())
    return 0


def _fetched(args: argparse.Namespace) -> Path | None:
    """A run (or job) on a cluster reached over SSH: fetched without checkpoints into
    ./RUN_NAME (or --to), and the report built here. None when no cluster is named."""
    from hpcjax.cli.fetch import fetch_target
    from hpcjax.cli.options import cluster_from_args

    if cluster_from_args(args) is None and not args.run_dir.replace("_", "").isdigit():
        return None
    args.target = args.run_dir
    landed, said = fetch_target(args, Path(args.to) if args.to else None, "none")
    print(f"fetched {said}", file=sys.stderr)
    return landed


def add_report_verb(sub) -> None:
    report = sub.add_parser("report", help="an HTML page with plots about a training run: report RUN_DIR")
    report.add_argument("run_dir", help="the training run's --run-dir (with --cluster: its path there, or "
                                        "the job id whose command named it)")
    report.add_argument("-o", "--output", metavar="FILE.html", help="default: RUN_DIR/report.html")
    report.add_argument("--open", action="store_true", help="print the page's path to open (nothing is served)")
    report.add_argument("--to", metavar="DIR", help="with --cluster: where the fetched run goes (default: "
                                                    "./RUN_NAME)")
    from hpcjax.cli.options import add_cluster_options

    add_cluster_options(report, profile_file=True)
    report.set_defaults(run=cmd_report, takes_command=False)
