"""Training across the dev cluster's two nodes: real srun, 4 processes, one emulated GPU each."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from conftest import run_hpcjax
from support import MODEL, records, wait_records

pytestmark = pytest.mark.cluster

def test_two_node_training_checkpoints_and_finishes(tmp_path, slurm_cluster, hpcjax_home):
    run_dir = tmp_path / "run"
    result = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--wait", "--", sys.executable, "-m",
                        "hpcjax", "train", "--strategy", "fsdp_tp", "--steps", "30", "--checkpoint-every", "10",
                        "--run-dir", str(run_dir), "--json", *MODEL, cwd=tmp_path, timeout=900)
    assert result.returncode == 0, result.stderr
    job = result.stdout.strip()
    summary = json.loads(run_hpcjax("logs", job, "--rank", "0", cwd=tmp_path).stdout.strip().splitlines()[-1])
    assert summary["end_step"] == 30 and summary["last_loss"] < summary["first_loss"] - 1.0
    assert sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit()) == [10, 20, 30]
    steps = [r["step"] for r in records(run_dir) if "loss" in r]
    assert steps == list(range(30))  # written once, by process 0 only
    mesh = "training fsdp_tp on mesh replica 1 x data 2 (across 2 nodes) x tensor 2 (within a node) (4 devices, 4 processes)"
    assert mesh in run_hpcjax("logs", job, "--rank", "0", cwd=tmp_path).stdout
    log = run_hpcjax("logs", job, "--rank", "3", cwd=tmp_path).stdout
    assert "process 3/4" in log and mesh not in log  # progress: process 0 only


def test_preemption_warning_saves_and_the_next_job_resumes(tmp_path, slurm_cluster, hpcjax_home):
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "hpcjax", "train", "--strategy", "fsdp", "--steps", "3000",
               "--checkpoint-every", "20", "--run-dir", str(run_dir), *MODEL]
    submitted = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--", *command, cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    wait_records(run_dir, 25)
    deadline = time.monotonic() + 300
    # What SLURM sends before the time limit or a preemption (the script's --signal=USR2@...).
    subprocess.run(["scancel", "--signal=USR2", job], check=True)
    while json.loads(run_hpcjax("status", job, "--json", cwd=tmp_path).stdout)["state"] not in (
            "COMPLETED", "FAILED", "CANCELLED") and time.monotonic() < deadline:
        time.sleep(1)
    assert json.loads(run_hpcjax("status", job, "--json", cwd=tmp_path).stdout)["state"] == "COMPLETED"
    saved = max(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())
    assert 25 <= saved < 3000  # stopped at once, not at the next checkpoint step (every 20)
    assert records(run_dir)[-1] == {"step": saved, "val_loss": None, "stopped_early": True}

    resumed = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--wait", "--",
                         *[c if c != "3000" else str(saved + 10) for c in command], cwd=tmp_path, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    log = run_hpcjax("logs", resumed.stdout.strip(), "--rank", "0", cwd=tmp_path).stdout
    assert f"resumed from the checkpoint of step {saved}" in log
    steps = [r["step"] for r in records(run_dir) if "loss" in r]
    assert steps[-10:] == list(range(saved, saved + 10))
