"""`hpcjax stacks` on the dev cluster (issue 27, part 1): an 8-rank `hpcjax train` job on two
nodes, its stacks taken through `srun --overlap` while it trains; the losses equal those of
the same run undisturbed (taking stacks reads the ranks, never changes them)."""

from __future__ import annotations

import json
import sys
import time

import pytest

from conftest import run_hpcjax
from support import MODEL, records, wait_records

pytestmark = pytest.mark.cluster


def train(tmp_path, name: str) -> tuple[str, object]:
    run_dir = tmp_path / name
    command = [sys.executable, "-m", "hpcjax", "train", "--strategy", "fsdp", "--steps", "40", "--log-every", "5",
               "--checkpoint-every", "0", "--pace-every", "0", "--run-dir", str(run_dir), *MODEL]
    submitted = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "4", "--", *command, cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    return submitted.stdout.strip(), run_dir


def losses(run_dir) -> list[float]:
    return [r["loss"] for r in records(run_dir) if "loss" in r]


def test_stacks_of_an_8_rank_training_job_are_grouped_and_leave_its_losses_alone(tmp_path, slurm_cluster,
                                                                                hpcjax_home):
    job, run_dir = train(tmp_path, "looked-at")
    wait_records(run_dir, 3, timeout=400)
    started = time.monotonic()
    shown = run_hpcjax("stacks", job, "--json", cwd=tmp_path)
    took = time.monotonic() - started
    assert shown.returncode == 0, shown.stderr
    taken = json.loads(shown.stdout)
    ranks = sorted(r["rank"] for r in taken["ranks"] if "threads" in r)
    assert ranks == list(range(8)) and took < 10, (ranks, took)
    assert {r["host"] for r in taken["ranks"]} == {"node1", "node2"}
    waited = run_hpcjax("status", job, cwd=tmp_path)
    for _ in range(300):
        if "COMPLETED" in waited.stdout or "FAILED" in waited.stdout:
            break
        time.sleep(1)
        waited = run_hpcjax("status", job, cwd=tmp_path)
    assert "COMPLETED" in waited.stdout, waited.stdout
    alone, alone_dir = train(tmp_path, "alone")
    assert run_hpcjax("status", alone, cwd=tmp_path).returncode == 0
    deadline = time.monotonic() + 600
    while len(losses(alone_dir)) < len(losses(run_dir)) and time.monotonic() < deadline:
        time.sleep(1)
    assert losses(run_dir) and losses(alone_dir) == losses(run_dir)


def test_stacks_of_a_job_that_is_not_running_is_a_clear_error(tmp_path, slurm_cluster, hpcjax_home):
    done = run_hpcjax("submit", "--nodes", "1", "--gpus-per-node", "1", "--wait", "--", "true", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    refused = run_hpcjax("stacks", done.stdout.strip(), cwd=tmp_path)
    assert refused.returncode == 1 and "is COMPLETED, not running: there are no stacks to take" in refused.stderr
    assert "\nhint: " in refused.stderr
