"""Held allocations on the dev cluster (real sbatch, srun and squeue): one hold of 2 nodes runs jobs
queued with --on one after another as steps of its allocation (a failing one named on its rank and
node, a cancelled one, the next passing), the hold staying up throughout; a job too big for it is
refused before anything is queued; the hold's time limit ends the job running in it, and the
report says the hold ended, not that the program failed; `release` ends a hold and squeue shows
nothing of it. The hold asks for 1 GPU of each node's 4, so the other tests' jobs run beside it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import DATA_DIR, run_hpcjax
from support import MODEL

pytestmark = pytest.mark.cluster

WHERE = [sys.executable, "-c", "import os; print('rank', os.environ['SLURM_PROCID'], 'on', os.environ['SLURMD_NODENAME'],"
         " 'as', os.environ['HPCJAX_JOB_KEY'])"]
CATCHES_THE_WARNING = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGUSR2, lambda *_: None); "
                       "time.sleep(300)"]
RANK_1_FAILS = [sys.executable, "-c", "import os, sys; sys.exit(3 if os.environ['SLURM_PROCID'] == '1' else 0)"]


def squeue(job: str) -> str:
    return subprocess.run(["squeue", "-h", "-j", job, "-o", "%i %T"], capture_output=True, text=True).stdout.strip()


def hold(tmp_path, name: str, time_limit: str | None, env: dict | None = None) -> str:
    """A hold of 2 nodes x 1 GPU; `name` "hold" and no time: the defaults (hold, 1 hour)."""
    named = [] if name == "hold" else ["--name", name]
    timed = [] if time_limit is None else ["--time", time_limit]
    done = run_hpcjax("hold", *named, "--nodes", "2", "--gpus-per-node", "1", *timed, cwd=tmp_path, timeout=300,
                      env=env)
    assert done.returncode == 0, done.stderr
    assert f"hold {name} ready: job" in done.stderr and "node[1-2]" in done.stderr, done.stderr
    return done.stdout.strip()


@pytest.mark.waits  # minutes of a time limit or a sleep, and little CPU
def test_jobs_run_one_after_another_in_a_hold_that_outlives_them_until_its_time_limit(
        tmp_path, slurm_cluster, hpcjax_home):
    name = f"t{os.getpid()}"
    held = hold(tmp_path, name, "00:01:00")
    started = time.monotonic()

    first = run_hpcjax("submit", "--on", name, "--nodes", "2", "--wait", "--", *WHERE, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"{held}.s1" and f"queued job {held}.s1 in hold {name}" in first.stderr
    logs = run_hpcjax("logs", f"{held}.s1", cwd=tmp_path).stdout
    assert f"rank 0 on node1 as {held}.s1" in logs and f"rank 1 on node2 as {held}.s1" in logs, logs

    failed = run_hpcjax("submit", "--on", name, "--nodes", "2", "--wait", "--", *RANK_1_FAILS, cwd=tmp_path)
    assert failed.returncode == 3, failed.stderr
    assert f"job {held}.s2 ended FAILED (exit code 3)" in failed.stderr
    assert "rank 1 on node2" in failed.stderr and "exit code 3" in failed.stderr, failed.stderr

    # Cancelled while it runs: the job ends, the hold does not.
    sleeper = run_hpcjax("submit", "--on", name, "--", "sleep", "300", cwd=tmp_path).stdout.strip()
    assert sleeper == f"{held}.s3"
    for _ in range(100):
        if json.loads(run_hpcjax("status", sleeper, "--json", cwd=tmp_path).stdout)["state"] == "RUNNING":
            break
        time.sleep(0.2)
    assert run_hpcjax("cancel", sleeper, cwd=tmp_path).returncode == 0
    for _ in range(100):
        state = json.loads(run_hpcjax("status", sleeper, "--json", cwd=tmp_path).stdout)["state"]
        if state != "RUNNING":
            break
        time.sleep(0.2)
    assert state == "CANCELLED"

    # The usual script's end (issue 48), its last collective in flight: the guard is armed in every rank.
    began = time.monotonic()
    after = run_hpcjax("submit", "--on", name, "--nodes", "2", "--wait", "--", sys.executable,
                       str(DATA_DIR / "exit_stall_program.py"), cwd=tmp_path)
    assert after.returncode == 0 and after.stdout.strip() == f"{held}.s4", after.stderr
    assert time.monotonic() - began < 60  # a stalled exit alone is ~155 s (tests/rank/test_exitguard_cluster.py)
    logs = run_hpcjax("logs", f"{held}.s4", cwd=tmp_path).stdout
    assert logs.count("shape (256, 256), guard armed: True") == 2, logs
    assert squeue(held) == f"{held} RUNNING"
    listed = json.loads(run_hpcjax("holds", "--json", cwd=tmp_path).stdout)
    assert [(h["name"], h["job_id"], h["state"], h["nodes"]) for h in listed] == [(name, held, "RUNNING", "node[1-2]")]

    shell = run_hpcjax("shell", "--on", name, "--", "bash", "-c", "echo $SLURMD_NODENAME $SLURM_JOB_ID; exit 7",
                       cwd=tmp_path)
    assert shell.returncode == 7 and shell.stdout == f"node1 {held}\n", (shell.stdout, shell.stderr)
    if subprocess.run([sys.executable, "-c", "import jupyter_server"], capture_output=True).returncode != 0:
        jupyter = run_hpcjax("jupyter", "--on", name, cwd=tmp_path)
        assert jupyter.returncode == 1 and "no Jupyter in the job's Python" in jupyter.stderr, jupyter.stderr
        assert f"{sys.executable} -m pip install jupyterlab" in jupyter.stderr

    too_big = run_hpcjax("submit", "--on", name, "--nodes", "3", "--", *WHERE, cwd=tmp_path)
    assert too_big.returncode == 2 and too_big.stdout == ""
    assert "has 2 node(s) x 1 GPU(s)" in too_big.stderr, too_big.stderr
    assert not (tmp_path / "hpcjax-logs" / f"{held}-hold" / "000005.sh").exists()  # nothing queued

    # The hold's time limit comes while a job runs: the report says the hold ended. The job catches
    # the warning SLURM sends every job of the hold first (USR2, as hpcjax train does), so that it is
    # running when the limit comes, wherever the warning falls.
    cut = run_hpcjax("submit", "--on", name, "--wait", "--", *CATCHES_THE_WARNING, cwd=tmp_path, timeout=240)
    assert cut.returncode != 0
    assert f"job {held}.s5 ended TIMEOUT" in cut.stderr and "the hold ended" in cut.stderr, cut.stderr
    assert "the program did not fail on its own: its hold's time ran out" in cut.stderr
    print(f"the hold lived {time.monotonic() - started:.0f} s of its 60 s limit (a figure, not asserted)")
    for _ in range(150):
        if squeue(held) == "":
            break
        time.sleep(0.2)
    assert squeue(held) == ""


SAVES_ON_TERM = [sys.executable, "-c", "import pathlib, signal, sys, time\n"
                 "def save(*_):\n    time.sleep(4)\n    pathlib.Path(sys.argv[1]).write_text('saved')\n    sys.exit(0)\n"
                 "signal.signal(signal.SIGTERM, save)\nprint('ready', flush=True)\ntime.sleep(300)"]


def test_release_returns_once_the_hold_is_gone_though_its_job_takes_seconds_to_stop(tmp_path, slurm_cluster,
                                                                                    hpcjax_home):
    """A job in the hold that saves on SIGTERM (as `hpcjax train` does) keeps the hold COMPLETING for
    seconds after scancel: `release` returned at once and the next command still saw the hold (20.11's
    matrix cell failed so in CI). It returns once SLURM no longer lists the hold: its nodes are free."""
    name = f"r{os.getpid()}"
    held = hold(tmp_path, name, "00:05:00")
    try:
        job = run_hpcjax("submit", "--on", name, "--", *SAVES_ON_TERM, str(tmp_path / "saved"), cwd=tmp_path)
        assert job.returncode == 0, job.stderr
        for _ in range(150):
            if "ready" in run_hpcjax("logs", job.stdout.strip(), cwd=tmp_path).stdout:
                break
            time.sleep(0.2)
    finally:
        done = run_hpcjax("release", name, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"released hold {name} (job {held}): ended, its nodes are free" in done.stderr, done.stderr
    assert squeue(held) == ""
    assert (tmp_path / "saved").read_text() == "saved"  # its job had the time to save, and had saved


def test_a_rerun_in_a_hold_is_warm_and_release_ends_the_hold(tmp_path, slurm_cluster, hpcjax_home):
    """The hold's jobs share one compilation cache: the same training run again (another run
    directory, as after an edit that left the program as it was) compiles nothing. Then `release`.
    The hold's default knobs: its name (hold), its time (1 hour) and its cache (the test session's
    shared one is taken out of its environment, as a user's shell would not have it)."""
    name = "hold"
    held = hold(tmp_path, name, None, env={"HPCJAX_COMPILE_CACHE": ""})
    try:
        holds = run_hpcjax("holds", "--json", cwd=tmp_path)
        assert holds.returncode == 0, holds.stderr
        [listed] = json.loads(holds.stdout)
        assert listed["name"] == "hold" and listed["time_left"][:5] in ("00:59", "01:00"), listed
        said = []
        for run in ("first", "again"):
            done = run_hpcjax("submit", "--on", name, "--nodes", "2", "--wait", "--", sys.executable, "-m", "hpcjax",
                              "train", "--steps", "2", "--checkpoint-every", "0", "--run-dir", f"runs/{run}", *MODEL,
                              cwd=tmp_path)
            assert done.returncode == 0, done.stderr
            said.append(run_hpcjax("logs", done.stdout.strip(), "--rank", "0", cwd=tmp_path).stdout)
        first, again = (re.search(r"time to first step: .*", log).group(0) for log in said)
        assert "cold: " in first and "compile" in first.split("cold: ")[1].split(")")[0], first
        assert "compile" in again.split("warm: ")[1].split(";")[0].split(")")[0], again
        assert f"{held}-hold/compile-cache" in again, again
    finally:
        done = run_hpcjax("release", name, cwd=tmp_path)  # never a hold of an hour left behind
    assert done.returncode == 0 and f"released hold {name} (job {held}): ended" in done.stderr, done.stderr
    assert squeue(held) == ""  # release returns once the hold is gone
    late = run_hpcjax("submit", "--on", name, "--", *WHERE, cwd=tmp_path)
    assert late.returncode == 2 and f"hold {name} (job {held}) has ended" in late.stderr, late.stderr
    assert json.loads(run_hpcjax("holds", "--json", cwd=tmp_path).stdout) == []
