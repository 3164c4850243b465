"""The `hpcjax` command. Thin: parse, build a spec or find a job, call one step.

Verbs by subject: jobs (render, submit, status, logs, cancel), runs and relaunch, fetch and tunnel, stacks,
smoke, rank
(env, check: they run inside a job step), train, profile, container. Importing the CLI imports
neither JAX nor jinja2 nor submitit: `hpcjax render` runs many times on login
nodes and has to answer at once, and `hpcjax check` must start inside an image
that holds only JAX and NumPy. Each verb imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import sys

from hpcjax import __version__
from hpcjax.cli.container import add_container_verb
from hpcjax.cli.fetch import add_fetch_verbs
from hpcjax.cli.jobs import add_job_verbs
from hpcjax.cli.options import Parser, join_dashed_values
from hpcjax.cli.profile import add_profile_verb
from hpcjax.cli.rank import add_rank_verbs
from hpcjax.cli.report import add_report_verb
from hpcjax.cli.runs import add_runs_verbs
from hpcjax.cli.smoke import add_smoke_verb
from hpcjax.cli.stacks import add_stacks_verb
from hpcjax.cli.train import add_train_verb
from hpcjax.errors import HpcjaxError, UsageError

DESCRIPTION = """\
Take a JAX training job from a laptop to a SLURM GPU cluster, right the first time.

Render sbatch scripts for one-process-per-GPU and several-GPUs-per-process
layouts, submit and follow them (SLURM, or this machine's CPU with
--backend local), prove a layout on every rank before spending GPU hours,
and train. Put the job's command after `--`:

  hpcjax smoke --nodes 2 --gpus-per-node 4
  hpcjax submit --nodes 2 --gpus-per-node 4 --time 02:00:00 --wait -- python train.py
"""


def build_parser() -> Parser:
    parser = Parser(prog="hpcjax", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"hpcjax {__version__}")
    sub = parser.add_subparsers(dest="verb", required=True, parser_class=Parser)
    add_job_verbs(sub)
    add_smoke_verb(sub)
    add_rank_verbs(sub)
    add_train_verb(sub)
    add_profile_verb(sub)
    add_container_verb(sub)
    add_report_verb(sub)
    add_fetch_verbs(sub)
    add_stacks_verb(sub)
    add_runs_verbs(sub)
    return parser


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """Everything after the first `--` is the job's command, untouched by argparse."""
    if "--" not in argv:
        return argv, None
    at = argv.index("--")
    return argv[:at], argv[at + 1:]


def main(argv: list[str] | None = None) -> int:
    options, command = split_command(list(sys.argv[1:] if argv is None else argv))
    try:
        args = build_parser().parse_args(join_dashed_values(options))
        if command is not None and not args.takes_command:
            raise UsageError(f"`hpcjax {args.verb}` takes no command after --", f"see `hpcjax {args.verb} --help`")
        return args.run(args, command or [])
    except HpcjaxError as err:
        print(f"error: {err.message}", file=sys.stderr)
        if err.hint:
            print(f"\nhint: {err.hint}", file=sys.stderr)
        return ended(err.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return ended(130)
    except BrokenPipeError:  # `hpcjax logs JOB | head`: the reader has what it wanted
        return reader_gone()


def reader_gone() -> int:
    """The shell's status of a writer whose pipe closed (128 + SIGPIPE), without a traceback: the
    pipe's remaining buffered output goes nowhere instead of failing again at exit."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


def ended(code: int) -> int:
    """`code`; a rank of a multi-process job (`hpcjax train`, `check`) that fails exits here
    and now instead (hpcjax.rank.runtime.end_now_if_failed). The rank side is looked up, not
    imported: a verb that never initialized JAX never loaded it."""
    runtime = sys.modules.get("hpcjax.rank.runtime")
    if runtime is not None:
        runtime.end_now_if_failed(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
