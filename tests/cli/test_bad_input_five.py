"""Bad input, round five (issue 63), without SLURM: what `site --check` must refuse before its first
job, and the other classes a new user's trial found that need no cluster (the dev cluster's part is
in tests/launch/test_round_five_cluster.py). Each refusal is `error:` + hint, exit 1 or 2, no
traceback, nothing written; each class has its cases here, not only the trial's example."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO
from support import cli
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


# --- arguments after `--` of a verb that runs no command ----------------------------------------------
@pytest.mark.parametrize("argv, words", [
    (["status", "--", "-1"], "invalid job id '-1'"),  # said "the following arguments are required: job_id"
    (["logs", "--", "12x"], "invalid job id '12x'"),
    (["tunnel", "12", "--", "-1"], "argument port: '-1' is not a TCP port"),
    (["status", "12", "--", "extra"], "`hpcjax status` takes no command after --: extra"),
    (["runs", "--sweep", "abc"], "--sweep 'abc' is not a sweep's id"),  # exited 0: "no runs match"
])
def test_what_follows_double_dash_is_the_verbs_own_argument(empty, argv, words):
    refused(empty, argv, words)


# --- values taken silently or misread --------------------------------------------------------------
@pytest.mark.parametrize("profile, words", [
    ('host = ""', "host: invalid host ''"),  # submitted on this machine
    ('host = "@"', "host: invalid host '@'"),  # ssh's usage text
    ('host = "me@"', "host: invalid host 'me@'"),
    ('host = "me@login"\nremote_dir = ""', "remote_dir is empty"),  # "characters hpcjax will not pass to a shell"
])
def test_a_profile_that_names_no_cluster_is_refused_by_its_key(empty, profile, words):
    (empty / "p.toml").write_text(f"[profiles.x]\n{profile}\n")
    refused(empty, ["submit", "--profile", "x", "--profile-file", "p.toml", "--dry-run", "--", "true"],
            f"p.toml, profile 'x': {words}", leaves=["p.toml"])


def test_a_directory_as_requirements_and_a_file_as_a_template_are_named_for_what_they_are(empty):
    (empty / "reqs").mkdir()
    refused(empty, ["container", "recipe", "--requirements", "reqs"], "cannot read requirements file 'reqs': Is a "
            "directory", leaves=["reqs"])  # said "does not exist"
    refused(empty, ["render", "--template", "/etc/passwd", "--", "true"],  # went to sbatch as it was
            "site template /etc/passwd does not extend hpcjax's script", leaves=["reqs"])


@pytest.mark.parametrize("time, kept", [("596523:00:00", "24855-03:00:00"), ("24855-00:00:00", "24855-00:00:00")])
def test_the_longest_limit_slurm_keeps_is_rendered_and_a_longer_one_refused(empty, time, kept):
    """Measured on 20.11, 22.05, 24.11 and 26.05 (hpcjax/job/walltime.py): past 2**31 - 1 seconds SLURM wraps a
    limit into another; 99999999:00:00 was submitted and kept as 2,973,620 days."""
    code, out, err = cli(empty, "render", "--time", time, "--", "true")
    assert code == 0 and f"#SBATCH --time={kept}\n" in out, err
    for longer in ("596524:00:00", "24856-00:00:00", "99999999:00:00"):
        refused(empty, ["render", "--time", longer, "--", "true"], f"walltime '{longer}' is longer than SLURM can keep")
        refused(empty, ["free", "--time", longer], f"walltime '{longer}' is longer than SLURM can keep")


def test_a_run_directory_that_cannot_be_one_is_refused_before_jax_starts(empty):
    """It was found at the compilation cache's first write, after JAX had started, and blamed on it."""
    (empty / "afile").write_text("")
    for run_dir, words in (("afile", "--run-dir 'afile' is a file, not a directory"),
                           ("/proc/hpcjax/run", "cannot make the directory --run-dir '/proc/hpcjax/run'"),
                           ("afile/sub", "cannot make the directory --run-dir 'afile/sub': Not a directory")):
        done = subprocess.run([sys.executable, "-m", "hpcjax", "train", "--run-dir", run_dir, "--steps", "1"],
                              capture_output=True, text=True, cwd=empty, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        assert done.returncode == 2 and done.stderr.startswith(f"error: {words}"), done.stderr
        assert "Traceback" not in done.stderr and "compil" not in done.stderr  # (not blamed on the cache)
    assert sorted(p.name for p in empty.iterdir()) == ["afile"]


# --- tracebacks -------------------------------------------------------------------------------------
def test_a_loop_of_links_as_data_and_the_whole_file_system_as_an_upload_are_refused(empty, monkeypatch):
    import hpcjax
    from hpcjax.launch.uploads import parse_upload
    from hpcjax.values.errors import UsageError

    monkeypatch.chdir(empty)
    (empty / "a").symlink_to("b")
    (empty / "b").symlink_to("a")
    with pytest.raises(UsageError, match=r"Data path 'a' cannot be resolved"):  # a RuntimeError's traceback
        hpcjax.Data("a")
    with pytest.raises(UsageError, match=r"--upload /: / is the whole file system"):  # a PermissionError's,
        parse_upload("/")  # after a walk of every file there


def test_a_generator_or_async_function_is_refused_by_remote_and_trainer_before_any_job(empty, monkeypatch):
    """It ran as a job that gave back a generator (which cannot be pickled) or, as a Trainer's loop,
    ran nothing at all."""
    import hpcjax
    from hpcjax.values.errors import UsageError

    monkeypatch.chdir(empty)

    def numbers():
        yield 1

    async def later():
        return 1

    for function, kind in ((numbers, "a generator function"), (later, "an async function")):
        with pytest.raises(UsageError, match=f"is {kind}: calling it runs nothing"):
            hpcjax.remote(backend="local")(function)
        with pytest.raises(UsageError, match=f"train_loop_per_worker .* is {kind}: calling it runs nothing"):
            hpcjax.Trainer(function)
    assert list(empty.iterdir()) == []


# --- wrong words -------------------------------------------------------------------------------------
def test_the_attempt_that_just_ended_is_not_called_a_next_one():
    """A quick failure's first progress line said "attempt 2 after 1, the last failed" of a job of one
    attempt: the batch script writes the attempt's end a moment before SLURM says the job ended."""
    import time as clock
    from datetime import datetime, timezone

    from hpcjax.slurm.job import ending
    from hpcjax.slurm.status import JobStatus

    def end(seconds_ago: float) -> dict:
        return {"attempt": 1, "ended": "failed",
                "end": datetime.fromtimestamp(clock.time() - seconds_ago, timezone.utc).isoformat()}

    running = JobStatus(job_id="7", name="x", state="RUNNING", running_s=30)
    assert ending(running, end(1))  # this attempt, running 30 s, ended 1 s ago
    requeued = JobStatus(job_id="7", name="x", state="RUNNING", running_s=3)
    assert not ending(requeued, end(40))  # a new attempt, 3 s in, after one that ended 40 s ago
    assert not ending(JobStatus(job_id="7", name="x", state="PENDING"), end(1))  # requeued, waiting: said
    assert not ending(running, {"attempt": 1, "ended": "failed", "end": "?"})
