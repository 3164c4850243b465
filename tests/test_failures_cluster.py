"""Failures on the dev cluster, part two: a warning honoured at any step, a job that
requeues itself, a rank that cannot resolve the coordinator, a frozen rank."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time

import pytest

from conftest import run_hpcjax
from test_train_cluster import MODEL, records

pytestmark = pytest.mark.cluster

STEPS = 120


def train_command(run_dir, *extra: str) -> list[str]:
    return [sys.executable, "-m", "hpcjax", "train", "--strategy", "fsdp", "--steps", str(STEPS),
            "--run-dir", str(run_dir), *MODEL, *extra]


def losses(run_dir) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records(run_dir) if "loss" in r}


def rank_pid(log_path, rank: int) -> int:
    """The pid a rank announces in its first line (hpcjax's runtime)."""
    match = re.search(rf"process {rank}/\d+ on \S+ \(pid (\d+)\)", log_path.read_text())
    assert match, f"rank {rank} did not announce itself in {log_path}"
    return int(match.group(1))


def wait_state(job: str, cwd, states=("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=600) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = json.loads(run_hpcjax("status", job, "--json", cwd=cwd).stdout)
        if status["state"] in states:
            return status
        time.sleep(1)
    pytest.fail(f"job {job} did not reach {states} in {timeout} s")


def test_a_warning_on_one_rank_stops_every_rank_at_once_and_the_job_requeues_itself(
        tmp_path, slurm_cluster, hpcjax_home):
    """USR2 on rank 1 only, at a step far from any checkpoint (--checkpoint-every is larger
    than the run): every rank stops within a few steps and saves, the job requeues itself,
    the second attempt resumes, and every loss equals an uninterrupted run's, bitwise."""
    plain, warned = tmp_path / "plain", tmp_path / "warned"
    baseline = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--", *train_command(plain),
                          cwd=tmp_path)
    submitted = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--requeue", "2", "--",
                           *train_command(warned, "--checkpoint-every", "1000"), cwd=tmp_path)
    assert baseline.returncode == 0 and submitted.returncode == 0, baseline.stderr + submitted.stderr
    job = submitted.stdout.strip()
    deadline = time.monotonic() + 300
    while len(records(warned)) < 20 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(records(warned)) >= 20, "training did not get going"
    os.kill(rank_pid(tmp_path / "hpcjax-logs" / f"{job}-rank1.log", 1), signal.SIGUSR2)
    seen_at_signal = len(records(warned))  # metrics are written one step late: this is a lower bound

    status = wait_state(job, tmp_path)
    assert status["state"] == "COMPLETED"
    assert [(a["attempt"], a["ended"]) for a in status["attempts"]] == [(1, "stopped"), (2, "completed")]
    stop = next(r for r in records(warned) if r.get("stopped_early"))
    assert seen_at_signal <= stop["step"] <= seen_at_signal + 5, "every rank stops within a few steps"
    assert stop["step"] < STEPS and stop["step"] % 1000
    assert wait_state(baseline.stdout.strip(), tmp_path)["state"] == "COMPLETED"
    assert sorted(losses(warned)) == list(range(STEPS))
    assert losses(warned) == losses(plain)  # bitwise: floats from JSON compare exactly
    text = run_hpcjax("status", job, cwd=tmp_path).stdout
    assert "attempts: 2 ended: 1 stopped on node[1-2]; 2 completed on node[1-2]" in text
    log = run_hpcjax("logs", job, "--rank", "0", cwd=tmp_path).stdout
    assert f"stopping after step {stop['step']} (checkpoint saved)" in log
    assert f"resumed from the checkpoint of step {stop['step']}" in log


def test_a_job_that_stopped_without_requeue_stays_stopped(tmp_path, slurm_cluster, hpcjax_home):
    """--stop-after is a preemption the job plays on itself: without --requeue the job
    ends COMPLETED after one attempt, marked stopped."""
    result = run_hpcjax("submit", "--nodes", "1", "--gpus-per-node", "2", "--wait", "--",
                        *train_command(tmp_path / "run", "--stop-after", "5"), cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr
    status = json.loads(run_hpcjax("status", result.stdout.strip(), "--json", cwd=tmp_path).stdout)
    assert [(a["attempt"], a["ended"]) for a in status["attempts"]] == [(1, "stopped")]
