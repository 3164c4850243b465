"""Checkpoints under fire: training killed (SIGKILL) while Orbax writes a checkpoint,
five times at different moments of the save; every next run resumes from a complete
checkpoint, never a partial one, and the last run finishes.

One process on this machine's CPU, saving every step a model big enough (about 130 MB
per checkpoint) that a save is still being written most of the time."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.jax  # needs JAX on this machine

TRAIN = ["--seq-len", "32", "--d-model", "512", "--heads", "8", "--layers", "4", "--d-ff", "2048",
         "--batch-size", "4", "--warmup-steps", "2", "--corpus-bytes", str(1 << 20), "--log-every", "1",
         "--checkpoint-every", "1"]
STEPS = 200
DELAYS_S = (0.0, 0.03, 0.08, 0.15, 0.25)  # after a save is seen starting


def complete_steps(directory) -> list[int]:
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) if directory.exists() else []


def saving(directory) -> list[str]:
    """Steps being written now: Orbax writes into a temporary directory and renames it."""
    return [p.name for p in directory.iterdir() if not p.name.isdigit()] if directory.exists() else []


def start(run_dir, steps: int = STEPS) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hpcjax", "train", "--steps", str(steps), "--run-dir",
                             str(run_dir), *TRAIN], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "JAX_PLATFORMS": "cpu"}, start_new_session=True)


def test_a_kill_during_a_save_always_leaves_a_complete_checkpoint_to_resume_from(tmp_path):
    run_dir = tmp_path / "run"
    checkpoints = run_dir / "checkpoints"
    landed_in_a_save = 0
    for round_, delay in enumerate(DELAYS_S):
        before = complete_steps(checkpoints)
        proc = start(run_dir)
        deadline = time.monotonic() + 300
        # Wait for a save beyond this run's first, so the run has got going.
        while time.monotonic() < deadline and proc.poll() is None:
            fresh = [s for s in complete_steps(checkpoints) if not before or s > before[-1]]
            if fresh and saving(checkpoints):
                break
            time.sleep(0.005)
        assert proc.poll() is None, f"round {round_}: training ended early:\n{proc.stderr.read()}"
        time.sleep(delay)
        in_a_save = bool(saving(checkpoints))
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        landed_in_a_save += in_a_save
        if before:
            assert f"resumed from the checkpoint of step {before[-1]}" in err, err[-2000:]
    # Most kills must have hit a save in progress, or the test proved nothing.
    assert landed_in_a_save >= 3, f"only {landed_in_a_save} of {len(DELAYS_S)} kills landed during a save"

    latest = complete_steps(checkpoints)[-1]
    proc = start(run_dir, steps=latest + 3)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert f"resumed from the checkpoint of step {latest}" in err
    assert re.search(rf"step {latest + 3}/{latest + 3}", err)
    assert complete_steps(checkpoints)[-1] == latest + 3
