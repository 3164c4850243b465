"""`hpcjax stacks` on the dev cluster (issue 27, part 1): a 4-rank `hpcjax train` job on two
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
    submitted = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--", *command, cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    return submitted.stdout.strip(), run_dir


def losses(run_dir) -> list[float]:
    return [r["loss"] for r in records(run_dir) if "loss" in r]


def test_stacks_of_a_4_rank_training_job_are_grouped_and_leave_its_losses_alone(tmp_path, slurm_cluster,
                                                                               hpcjax_home):
    job, run_dir = train(tmp_path, "looked-at")
    wait_records(run_dir, 3, timeout=400)
    started = time.monotonic()
    shown = run_hpcjax("stacks", job, "--json", cwd=tmp_path)
    took = time.monotonic() - started
    assert shown.returncode == 0, shown.stderr
    taken = json.loads(shown.stdout)
    ranks = sorted(r["rank"] for r in taken["ranks"] if "threads" in r)
    assert ranks == list(range(4)) and took < 10, (ranks, took)
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


def test_stacks_of_a_4_rank_trainer_job_on_two_nodes(shared_storage, hpcjax_home, monkeypatch):
    """Issue 34: on every Trainer job `hpcjax stacks` died with a JSONDecodeError (a Trainer rank's
    stack is deep, and srun's merged output cut its line). The ranks wait in the loop's function."""
    import subprocess

    monkeypatch.chdir(shared_storage)
    (shared_storage / "probe.py").write_text((__import__("pathlib").Path(__file__).parents[1] / "seams" /
                                              "probe.py").read_text())
    release = shared_storage / "release"
    script = ("import hpcjax, probe\n"
              "trainer = hpcjax.Trainer(probe.loop, train_loop_config={'mode': 'wait', 'release': %r},\n"
              "    scaling_config=hpcjax.ScalingConfig(nodes=2, gpus_per_node=2, time='00:10:00'),\n"
              "    run_config=hpcjax.RunConfig(storage_path=%r, name='deep', backend='slurm'))\n"
              "print(trainer.fit().error)\n") % (str(release), str(shared_storage / "runs"))
    fit = subprocess.Popen([sys.executable, "-c", script], cwd=shared_storage, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        job = ""
        for line in fit.stderr:
            if line.startswith("submitted job "):
                job = line.split()[2]
                break
        logs = shared_storage / "runs" / "deep" / "logs"
        deadline = time.monotonic() + 300
        while sum("waits" in p.read_text() for p in logs.glob(f"{job}-rank*.log")) < 4:
            assert time.monotonic() < deadline, "the ranks did not get to their wait"
            time.sleep(1)
        shown = run_hpcjax("stacks", job, cwd=shared_storage)
        assert shown.returncode == 0, (shown.stdout, shown.stderr)
        assert "stacks of 4 rank(s) in 1 group(s)" in shown.stdout, shown.stdout
        assert "wait_for_release" in shown.stdout and "run_train_loop" in shown.stdout
        assert len(max(shown.stdout.splitlines(), key=len)) < 400  # grouped frames, one per line
    finally:
        release.touch()
        out, err = fit.communicate(timeout=300)
    assert out.strip() == "None", err[-3000:]
