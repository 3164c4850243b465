"""TensorBoard scalars of a 2-process run on the dev cluster, read back with TensorBoard's
own reader: one point per step, and each step once after a resume that redid steps."""

from __future__ import annotations

import shutil
import sys

import pytest

from conftest import run_hpcjax
from support import MODEL

pytestmark = pytest.mark.cluster


def train(tmp_path, run_dir):
    result = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "1", "--wait", "--", sys.executable, "-m",
                        "hpcjax", "train", "--strategy", "dp", "--steps", "8", "--checkpoint-every", "4",
                        "--run-dir", str(run_dir), *MODEL, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr


def scalars(run_dir, tag):
    # TensorBoard's own reader, imported here: half a second every worker would pay to collect this file
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


def test_scalars_have_one_point_per_step_and_a_resumed_run_each_step_once(tmp_path, slurm_cluster, hpcjax_home):
    run_dir = tmp_path / "run"
    train(tmp_path, run_dir)
    first = scalars(run_dir, "train/loss")
    assert [step for step, _ in first] == list(range(8))
    for tag in ("train/grad_norm", "train/learning_rate", "perf/step_time_s", "perf/tokens_per_s", "perf/mfu"):
        assert [step for step, _ in scalars(run_dir, tag)] == list(range(8)), tag
    assert [step for step, _ in scalars(run_dir, "eval/val_loss")] == [8]
    # As if the job had died after writing steps 4..7 but before saving step 8: the next
    # run resumes from step 4 and writes steps 4..7 again.
    shutil.rmtree(run_dir / "checkpoints" / "8")
    train(tmp_path, run_dir)
    again = scalars(run_dir, "train/loss")
    assert [step for step, _ in again] == list(range(8))  # TensorBoard purged the replaced steps
    assert again == first  # and the redone steps have the same losses
