"""Bad input, round five (issue 63), without SLURM: what `site --check` must refuse before its first
job, and the other classes a new user's trial found that need no cluster (the dev cluster's part is
in tests/launch/test_round_five_cluster.py). Each refusal is `error:` + hint, exit 1 or 2, no
traceback, nothing written; each class has its cases here, not only the trial's example."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from test_bad_input import refused


# --- site --check: its own options before any job -------------------------------------------------
@pytest.mark.parametrize("page, words", [
    ("/proc/hpcjax-check.html", "--page '/proc/hpcjax-check.html': its folder '/proc' cannot be written"),
    ("/no/such/folder/page.html", "--page '/no/such/folder/page.html': its folder '/no/such/folder' is not there"),
    (".", "--page '.' is a directory"),
])
def test_a_page_that_cannot_be_written_is_refused_before_any_job(empty, page, words):
    refused(empty, ["site", "--check", "--gpus-per-node", "2", "--page", page], words)


def test_a_working_directory_that_cannot_be_written_is_refused_before_any_job(tmp_path):
    """The probe goes under the working directory: /proc takes no file (even for root, which the
    tests run as: chmod would not stop it)."""
    done = subprocess.run([sys.executable, "-m", "hpcjax", "site", "--check", "--gpus-per-node", "2", "--page",
                           str(tmp_path / "page.html")], capture_output=True, text=True, cwd="/proc",
                          env={**os.environ, "HPCJAX_BACKEND": "local", "HPCJAX_HOME": str(tmp_path / "home")},
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert "error: the working directory (where the check writes its probe, hpcjax-check/) '/proc' cannot be " \
           "written" in done.stderr and "\n\nhint: run the check from a directory you can write" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "page.html").exists()


@pytest.mark.parametrize("argv, words", [
    (["--runtime", "docker", "--image", "x.sif"], "the check's jobs would be refused: unknown container runtime "
                                                  "'docker'"),
    (["--image", "x.sif", "--runtime", "apptainer"], "the check's jobs would be refused: the local backend runs "
                                                     "the command bare"),
    (["--nodes", "0"], "the check's jobs would be refused:"),
])
def test_what_submit_refuses_is_said_once_before_any_job(empty, argv, words):
    """Asked of submit's own checks (--dry-run): the refusal once, not "submitting" five times."""
    err = refused(empty, ["site", "--check", "--gpus-per-node", "2", *argv], words)
    assert "submitting" not in err, err


# --- a job in a hold: its time is the hold's unless it asks less ------------------------------------
def test_a_job_in_a_hold_without_time_runs_to_the_holds_end_and_one_with_time_keeps_it():
    """No --time: no step limit (the command's default hour used to be every step's, and refused
    nothing while meaning nothing past a shorter hold); a --time given is the steps' own."""
    from hpcjax.job.profiles import build_spec
    from hpcjax.slurm.script import in_hold_options

    plain = build_spec(["true"], {"on": "dev"}, defaults={"time": "01:00:00"})
    assert plain.time_seconds is None and "--time" not in in_hold_options(plain)
    timed = build_spec(["true"], {"on": "dev", "time": "5"}, defaults={"time": "01:00:00"})
    assert " --time=00:05:00" in in_hold_options(timed)
    assert build_spec(["true"], {}, defaults={"time": "01:00:00"}).time == "01:00:00"  # a job of its own: as before
