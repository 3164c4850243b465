"""Helpers tests in several folders share: the tiny model of the cluster training tests, the
metrics a run wrote, whether a picture is more than a blank page, and the CLI run in this process."""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from pathlib import Path

from hpcjax.protocol.rundir import RunDir

MODEL = ["--seq-len", "32", "--d-model", "64", "--heads", "8", "--layers", "1", "--d-ff", "128",
         "--batch-size", "16", "--warmup-steps", "5", "--corpus-bytes", str(1 << 20)]


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

