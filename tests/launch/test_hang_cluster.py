"""Hangs on the dev cluster (issue 27, part 2), 2 nodes: `hpcjax train` whose rank 3 is held
before step 12 ends by itself and names rank 3 with its stack; the same with a Trainer; a
hang is retried by --retry-failed and the next attempt, which does not hang, completes. The
local backend's cases: tests/rank/test_hangwatch.py and tests/api/test_api_local.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

import api_cases
from conftest import DATA_DIR, run_hpcjax
from hpcjax.launch import submit
from hpcjax.job.spec import JobSpec, Layout
from support import MODEL

pytestmark = pytest.mark.cluster


def test_hpcjax_train_whose_rank_3_stops_before_step_12_ends_naming_rank_3(tmp_path, slurm_cluster, hpcjax_home):
    command = (sys.executable, str(DATA_DIR / "hang_train.py"), "--strategy", "dp", "--steps", "400",
               "--run-dir", str(tmp_path / "run"), *MODEL)
    spec = JobSpec(command=command, layout=Layout(nodes=2, gpus_per_node=2), output_dir=str(tmp_path / "logs"),
                   env=(("HPCJAX_HANG_FLOOR", "10"), ("HPCJAX_HANG_CEILING", "300")), time="00:10:00")
    run = submit(spec, "slurm")
    outcome = run.wait(progress=False)
    ended = time.time()
    report = outcome.report()
    assert outcome.state == "FAILED" and outcome.exit_code == 124 and outcome.cause.cause == "hang", report
    [held] = outcome.failed
    assert held.rank == 3 and held.host == "node2", report  # 2 ranks per node
    assert "did not reach step 12, which rank(s) 0-2 reached (rank 3 at step 11)" in held.reason
    assert "wait_for_data_that_never_comes" in held.reason
    assert outcome.stopped == (0, 1, 2) and "ranks 3 (node2): wait_for_data_that_never_comes" in report
    states = [json.loads(p.read_text()) for p in (tmp_path / "logs").glob("*.hang.json")]
    assert sorted(s["rank"] for s in states) == list(range(4))
    hung_at = max(s["last_progress_at"] for s in states)
    assert ended - hung_at < 60, (ended - hung_at, report)  # steps well under 1 s: the floor, 10 s, then the stacks
    status = run_hpcjax("status", run.job_id, cwd=tmp_path)
    assert "likely cause: hang" in status.stdout + status.stderr


def test_a_hang_seen_on_another_node_and_a_rank_that_aborts_leave_124_on_the_held_ranks_node(tmp_path, slurm_cluster,
                                                                                             hpcjax_home):
    """CI 39: two of the waiting ranks aborted (Gloo's collective torn down under them) and srun named
    that first, so the job ended 134. Stop 60's CI: a waiting rank on node1 saw the hang first, and the
    attempt's record named node1, not the held rank's node2. Here node1's ranks see the hang first
    (node2's watch with a longer floor) and rank 2 aborts once it is judged, just before the rank that
    saw it ends: the job ends 124 on the hung rank's node, for sacct, hpcjax and the attempt's
    record alike. Whether srun names the abort or the 124 first varies from run to run; the abort
    first, every time, with srun's stand-in: tests/launch/test_render.py."""
    spec = JobSpec(command=(sys.executable, str(DATA_DIR / "hang_program.py"), "behind-seen-elsewhere"),
                   layout=Layout(nodes=2, gpus_per_node=2), output_dir=str(tmp_path / "logs"),
                   env=(("HPCJAX_HANG_FLOOR", "5"), ("HPCJAX_HANG_CEILING", "120")), time="00:05:00")
    run = submit(spec, "slurm")
    outcome = run.wait(progress=False)
    report = outcome.report()
    assert (outcome.state, outcome.exit_code, outcome.cause.cause) == ("FAILED", 124, "hang"), report
    assert [(f.rank, f.host) for f in outcome.failed] == [(3, "node2")], report
    batch = (tmp_path / "logs" / f"{run.job_id}-batch.log").read_text()
    assert re.search(r"^srun: error: node2: tasks? 2\S*: Aborted", batch, re.M), batch  # srun saw rank 2 abort
    [attempt] = run.attempts()
    assert (attempt["exit_code"], attempt["failed_node"]) == (124, "node2"), attempt
    sacct = subprocess.run(["sacct", "-X", "-n", "-P", "-j", run.job_id, "-o", "ExitCode"], capture_output=True,
                           text=True, check=True).stdout.strip()
    assert sacct == "124:0", sacct


@pytest.mark.waits  # a hang waited out: 6 CPU-s in 18 s alone
def test_a_trainer_run_whose_rank_3_hangs_ends_by_itself(shared_storage, hpcjax_home):
    api_cases.trainer_hang("slurm", shared_storage, 2, 2, "node2")


@pytest.mark.waits  # a hang waited out, then a requeue: 9 CPU-s in 43 s alone
def test_a_hang_is_retried_and_the_next_attempt_starts_clean(tmp_path, slurm_cluster, hpcjax_home):
    """--retry-failed --requeue 2: the first attempt hangs (rank 3 held) and is ended by the
    watch; the second runs on (the hang marker of the first was removed) and completes."""
    done = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--requeue", "2", "--retry-failed",
                      "--env", "HPCJAX_HANG_FLOOR=5", "--env", "HPCJAX_HANG_CEILING=120", "--wait", "--",
                      sys.executable, str(DATA_DIR / "hang_program.py"), "behind-once", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    job = done.stdout.split()[0]
    attempts = [json.loads(line) for line in (tmp_path / "hpcjax-logs" / f"{job}-attempts.jsonl").read_text().splitlines()]
    assert [(a["ended"], a["not_retried"]) for a in attempts] == [("failed", ""), ("completed", "")]
    batch = (tmp_path / "hpcjax-logs" / f"{job}-batch.log").read_text()
    first = batch.split("hpcjax: attempt 2 ")[0]
    assert "Exited with exit code 124" in first and "hpcjax: requeueing job" in first  # the watch ended attempt 1
