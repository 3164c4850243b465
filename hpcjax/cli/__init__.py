"""The `hpcjax` command. Thin: parse, build a spec or find a job, call one step.

Verbs by subject: jobs (render, submit; status, logs, cancel), runs and relaunch, fetch and tunnel, stacks,
smoke, rank
(env, check: they run inside a job step), train, profile, container. Importing the CLI imports
neither JAX nor jinja2 nor submitit: `hpcjax render` runs many times on login
nodes and has to answer at once, and `hpcjax check` must start inside an image
that holds only JAX and NumPy. Each verb imports what it needs when it runs.

By file: `jobs` (render, submit), `submitted` (status, logs, cancel), `runs` (runs, relaunch, sweeps, chains),
`fetch` (fetch, tunnel), `stacks`, `smoke`, `rank` (env, check, preflight), `train`, `profile`,
`container`, `holds` (hold, release), `nodeshell` (shell and jupyter --on), `nodes`, `free`, `agents` (mcp: the
verbs as an AI agent's tools, whose schemas and command lines `tools` reads from the parsers), `site`
(its `acceptance` check, and what the check is asked: `checkoptions`), `report`; what they share:
`verbs` (the table: each verb's module and its line in --help), `parsing` (argparse the house
way: the error format), `options` (the job options), `reach` (the cluster a verb reaches: --cluster), `following` (a submitted job followed to
its exit status, and Ctrl-C), `kinds` (argparse value types), `outputs` (files written in one step), `stopping`
(SIGTERM as Ctrl-C).
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys

from hpcjax import __version__
from hpcjax.cli.parsing import Parser, join_dashed_values
from hpcjax.cli.verbs import HELP, VERBS
from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.values.voice import say

DESCRIPTION = """\
Take a JAX training job from a laptop to a SLURM GPU cluster, right the first time.

Render sbatch scripts for one-process-per-GPU and several-GPUs-per-process
layouts, submit and follow them (SLURM, or this machine's CPU with
--backend local), prove a layout on every rank before spending GPU hours,
and train. Put the job's command after `--`:

  hpcjax smoke --nodes 2 --gpus-per-node 4
  hpcjax submit --nodes 2 --gpus-per-node 4 --time 02:00:00 --wait -- python train.py
"""


def build_parser(verb: str | None = None) -> Parser:
    """The parser for `verb` (its module's verbs only), or for every verb with all their options."""
    parser, sub = _top()
    adders = [VERBS[verb]] if verb in VERBS else list(dict.fromkeys(VERBS.values()))
    for module, function in adders:
        getattr(importlib.import_module(f"hpcjax.cli.{module}"), function)(sub)
    return parser


def listing_parser() -> Parser:
    """For no verb or one that is not a verb (`hpcjax --help`, a misspelling): every verb's line,
    and none of their modules (argparse lists the verbs, or refuses the word with them)."""
    parser, sub = _top()
    for name in VERBS:  # each verb's line, as add_parser lists it, without building 26 parsers (6 ms of 15)
        sub._name_parser_map[name] = None  # a choice: the listing never runs a verb (build_parser does)
        sub._choices_actions.append(sub._ChoicesPseudoAction(name, (), HELP[name]))
    return parser


def _top() -> tuple[Parser, argparse._SubParsersAction]:
    parser = Parser(prog="hpcjax", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"hpcjax {__version__}")
    return parser, parser.add_subparsers(dest="verb", required=True, parser_class=Parser)


def verb_of(options: list[str]) -> str | None:
    """The verb: the first word that is not an option (hpcjax's own options take no value)."""
    return next((word for word in options if not word.startswith("-")), None)


def takes_a_command(parser: argparse.ArgumentParser, verb: str | None) -> bool:
    """Whether `verb` runs a command given after `--` (submit, render, shell): its parser's default."""
    for action in parser._actions:  # argparse keeps its subparsers in no public place
        if isinstance(action, argparse._SubParsersAction) and verb in action.choices:
            return bool(action.choices[verb].get_default("takes_command"))
    return False


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """Everything after the first `--` is the job's command, untouched by argparse."""
    if "--" not in argv:
        return argv, None
    at = argv.index("--")
    return argv[:at], argv[at + 1:]


class OutputError(HpcjaxError):
    """What a verb printed could not be written: a full disk, a closed or broken descriptor."""


class Output:
    """The verbs' stdout: a write that fails says why in one line (OutputError), not a traceback; a
    closed stdout (`hpcjax runs >&-`) is one that fails to write, as a shell's `echo` says."""

    def __init__(self, stream) -> None:
        self.stream = stream

    def _do(self, what: str, *args):
        if self.stream is None:
            raise OutputError("cannot write the output: standard output is closed",
                              "run it with its output going somewhere (a terminal, a file, a pipe)")
        try:
            return getattr(self.stream, what)(*args)
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as err:
            said = getattr(err, "strerror", None) or str(err)
            raise OutputError(f"cannot write the output: {said}", "write it where there is room and you may "
                              "write (`> FILE` on another file system, or a pipe)") from None

    def write(self, text: str):
        return self._do("write", text)

    def flush(self):
        return self._do("flush")

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def main(argv: list[str] | None = None) -> int:
    options, command = split_command(list(sys.argv[1:] if argv is None else argv))
    real = sys.stdout
    sys.stdout = Output(real)
    try:
        options = join_dashed_values(options)
        verb = verb_of(options)
        parser = build_parser(verb) if verb in VERBS else listing_parser()
        if command is not None and not takes_a_command(parser, verb):
            # there `--` only ends the options, as it does for any program: `status -- -1` asks for job -1
            args, extra = parser.parse_known_args(options + ["--"] + command)
            if extra:
                raise UsageError(f"`hpcjax {verb}` takes no command after --: {shlex.join(extra)}",
                                 f"see `hpcjax {verb} --help`")
            command = None
        else:
            args = parser.parse_args(options)
        code = args.run(args, command or [])
        sys.stdout.flush()  # here, where a failure is said: not at the interpreter's exit
        return code
    except OutputError as err:
        say(f"error: {err.message}\n\nhint: {err.hint}")
        output_gone(real)
        return 1
    except HpcjaxError as err:
        say(f"error: {err.message}")
        if err.hint:
            say(f"\nhint: {err.hint}")
        return ended(err.exit_code)
    except KeyboardInterrupt:
        say("interrupted")
        return ended(130)
    except BrokenPipeError:  # `hpcjax logs JOB | head`: the reader has what it wanted
        return reader_gone()
    finally:
        sys.stdout = real


def reader_gone() -> int:
    """The shell's status of a writer whose pipe closed (128 + SIGPIPE), without a traceback: the
    pipe's remaining buffered output goes nowhere instead of failing again at exit."""
    output_gone(sys.stdout)
    return 141


def output_gone(stream) -> None:
    """What is still buffered for stdout goes nowhere: the interpreter's exit would fail to flush it
    again, with a traceback of its own."""
    import os

    if stream is None:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def ended(code: int) -> int:
    """`code`; a rank of a multi-process job (`hpcjax train`, `check`) that fails exits here
    and now instead (hpcjax.rank.start.runtime.end_now_if_failed). The rank side is looked up, not
    imported: a verb that never initialized JAX never loaded it."""
    runtime = sys.modules.get("hpcjax.rank.start.runtime")
    if runtime is not None:
        runtime.end_now_if_failed(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
