"""Helpers tests in several folders share: the tiny model of the cluster training tests, the
metrics a run wrote, whether a picture is more than a blank page, the CLI run in this process, a
Ctrl-C at the moment a job is recorded, and which words of an `hpcjax ...` command its parser does
not know."""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import re
import shlex
import signal
import time
from pathlib import Path

from hpcjax.protocol.rundir import RunDir

MODEL = ["--seq-len", "32", "--d-model", "64", "--heads", "8", "--layers", "1", "--d-ff", "128",
         "--batch-size", "16", "--warmup-steps", "5", "--corpus-bytes", str(1 << 20)]


def summary_in(log: str) -> dict:
    """The JSON summary `hpcjax train --json` prints last on stdout, from a rank's log: the log holds
    stderr too, where Gloo says it connected when a collective first uses a group of processes,
    which may come after the summary (one process of 2 GPUs per node did, at the run's end)."""
    return json.loads([line for line in log.splitlines() if line.startswith("{")][-1])


def records(run_dir):
    path = RunDir(run_dir).metrics
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_records(run_dir, count: int, timeout: float = 300) -> int:
    """Wait until training has written `count` records; fail if it never gets going."""
    deadline = time.monotonic() + timeout
    while len(records(run_dir)) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(records(run_dir)) >= count, "training did not get going"
    return len(records(run_dir))


def wait_until(check, timeout: float = 120.0, every_s: float = 1.0):
    """check()'s first true answer, asked every every_s seconds; AssertionError after timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (found := check()):
            return found
        time.sleep(every_s)
    raise AssertionError("timed out")


def not_blank(png) -> bool:
    from matplotlib.image import imread

    pixels = imread(str(png))
    return pixels.ndim == 3 and pixels.shape[0] > 100 and float(pixels[..., :3].std()) > 0.05


def cli(cwd: Path, *argv: str) -> tuple[int, str, str]:
    """`hpcjax ARGV...` in this process, in `cwd`: (exit code, stdout, stderr)."""
    from hpcjax.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    finally:
        os.chdir(here)
    return code, out.getvalue(), err.getvalue()


def ctrl_c_once_recorded(monkeypatch) -> None:
    """A real SIGINT to this process as the next job's record is written: the moment a Ctrl-C lands
    while the submission holds it, just before the id is announced (a race a loaded machine hit)."""
    from hpcjax.catalog import keep

    recorded, sent = keep.record, []

    def record_then_ctrl_c(key, fields):
        recorded(key, fields)
        if not sent:
            sent.append(key)
            signal.raise_signal(signal.SIGINT)  # held: it lands when the submission lets it

    monkeypatch.setattr(keep, "record", record_then_ctrl_c)


@functools.lru_cache(maxsize=1)
def hpcjax_parser() -> argparse.ArgumentParser:
    from hpcjax.cli import build_parser

    return build_parser()


def unknown_words(command: str) -> list[str]:
    """The verb and options of an `hpcjax ...` command that its parser does not know (a choice
    like `[--json]` counts as its option; the program after `--` is not hpcjax's)."""
    words = shlex.split(command.replace("[", " ").replace("]", " ").replace("|", " "))[1:]
    if "--" in words:
        words = words[:words.index("--")]
    parser, unknown = hpcjax_parser(), []
    while True:
        verbs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not verbs or not words or words[0].startswith("-"):
            break
        if words[0] not in verbs[0].choices:
            return [words[0]]
        parser, words = verbs[0].choices[words[0]], words[1:]
    known = {option for action in parser._actions for option in action.option_strings}
    for word in words:
        if word.startswith("-") and not re.fullmatch(r"-\d.*", word) and word.split("=")[0] not in known:
            unknown.append(word)
    return unknown
