"""Pipeline parallelism (pp, dp_pp) on emulated devices in one process, through `hpcjax
train` as a user runs it: the same losses as data parallelism, an exact resume, each
stage's layers on its own devices, and the errors."""

import os
import subprocess
import sys

import numpy as np
import pytest

from test_train import SMALL, STRATEGY_RTOL, train

pytestmark = pytest.mark.jax  # needs JAX on this machine

LAYERS = ["--layers", "4"]  # divides into 1, 2 and 4 stages


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pp-reference")
    return train(tmp, "dp", "--strategy", "dp", *LAYERS, "--steps", "10", "--checkpoint-every", "0")[0]


# The four read one module fixture, computed once on the one xdist worker that runs them all.
@pytest.mark.xdist_group("pipeline-reference")
@pytest.mark.parametrize("strategy, stages, devices", [("pp", 2, 2), ("pp", 4, 4), ("dp_pp", 2, 8), ("dp_pp", 4, 8)],
                         ids=["pp-2-stages", "pp-4-stages", "dp_pp-2x4", "dp_pp-4x2"])
def test_pipelines_give_the_losses_of_data_parallelism(reference, tmp_path, strategy, stages, devices):
    run, err = train(tmp_path, strategy, "--strategy", strategy, "--stages", str(stages), *LAYERS, "--steps", "10",
                     "--checkpoint-every", "0", "--microbatches", "4", devices=devices)
    np.testing.assert_allclose(run["losses"], reference["losses"], rtol=STRATEGY_RTOL, err_msg=strategy)
    assert run["val_loss"] == pytest.approx(reference["val_loss"], rel=STRATEGY_RTOL)
    assert f"mesh stage {stages}" in err and f"on each of {stages} stages" in err
    assert "bubble" in err


def test_a_pipelined_run_stopped_and_resumed_equals_an_uninterrupted_one(tmp_path):
    options = ["--strategy", "dp_pp", "--stages", "2", *LAYERS, "--steps", "10", "--checkpoint-every", "4"]
    whole, _ = train(tmp_path, "whole", *options)
    first, _ = train(tmp_path, "split", *options, "--stop-after", "6")
    second, err = train(tmp_path, "split", *options)
    assert "resumed from the checkpoint of step 6" in err
    assert first["losses"] + second["losses"] == whole["losses"]  # bitwise
    assert second["val_loss"] == whole["val_loss"]


def test_each_stage_holds_only_its_own_layers():
    program = """
from hpcjax.rank.start.runtime import initialize
initialize()  # 8 emulated devices, as in a job
from hpcjax.train.config import ModelConfig, TrainConfig
from hpcjax.train.step import build_program

cfg = TrainConfig(model=ModelConfig(seq_len=16, d_model=32, heads=4, layers=4, d_ff=64), strategy="dp_pp",
                  stages=2, batch_size=16)
program, state = build_program(cfg)
kernel = state["params"]["layers"]["mlp_in"]
stage_of = {d: s for s, row in enumerate(program.mesh.devices) for d in row.flat}
print(kernel.shape, sorted({(stage_of[sh.device], sh.index[0].start, sh.index[0].stop) for sh in kernel.addressable_shards}))
"""
    env = {**os.environ, "HPCJAX_GPUS_PER_PROCESS": "8", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "(4, 32, 64) [(0, 0, 2), (1, 2, 4)]"


@pytest.mark.parametrize("options, message", [
    (["--strategy", "dp_pp", "--stages", "3"], "4 layers do not divide into 3 pipeline stages"),
    (["--strategy", "dp_pp", "--stages", "8"], "4 layers do not divide into 8 pipeline stages"),
    (["--strategy", "pp", "--stages", "2"], "pp puts every device on the stage axis: 8 stages, not 2"),
    (["--strategy", "dp_pp", "--stages", "4", "--microbatches", "3"], "do not split into 3 pipeline micro-batches"),
    (["--strategy", "fsdp", "--stages", "2"], "--stages 2 was given with strategy 'fsdp'"),
])
def test_bad_pipeline_options_are_refused(tmp_path, options, message):
    env = {**os.environ, "HPCJAX_GPUS_PER_PROCESS": "8"}
    result = subprocess.run([sys.executable, "-m", "hpcjax", "train", "--run-dir", str(tmp_path / "r"), *SMALL,
                             *LAYERS, "--steps", "2", *options], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    assert message in result.stderr and "hint:" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_stages_must_fit_the_devices(tmp_path):
    env = {**os.environ, "HPCJAX_GPUS_PER_PROCESS": "6"}
    result = subprocess.run([sys.executable, "-m", "hpcjax", "train", "--run-dir", str(tmp_path / "r"), *SMALL,
                             *LAYERS, "--strategy", "dp_pp", "--stages", "4", "--steps", "2", "--batch-size", "24"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 2 and "4 pipeline stages do not divide the 6 devices" in result.stderr
    assert "--stages one of 1, 2, 3, 6" in result.stderr
