"""Training on 8 emulated devices in one process, through `hpcjax train` as a user runs it."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from hpcjax.train import TrainConfig

pytestmark = pytest.mark.jax  # needs JAX on this machine

SMALL = ["--seq-len", "64", "--d-model", "64", "--heads", "8", "--layers", "2", "--d-ff", "256",
         "--batch-size", "16", "--warmup-steps", "5", "--log-every", "5", "--corpus-bytes", str(2 << 20)]
# Same seed, same data, different shardings: only the order of float32 sums differs.
STRATEGY_RTOL = 1e-4


def train(tmp_path, name, *options, devices=8, shared_cache=True):
    env = {**os.environ, "HPCJAX_GPUS_PER_PROCESS": str(devices)}
    if not shared_cache:  # the session's compilation cache (tests/conftest.py) taken away
        env.pop("HPCJAX_COMPILE_CACHE", None)
    result = subprocess.run([sys.executable, "-m", "hpcjax", "train", "--json", "--run-dir", str(tmp_path / name),
                             *SMALL, *options], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout), result.stderr


@pytest.fixture(scope="module")
def strategy_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("strategies")
    return {s: train(tmp, s, "--strategy", s, "--steps", "20", "--checkpoint-every", "0")[0]
            for s in ("dp", "fsdp", "tp", "fsdp_tp")}


# Both tests read one module fixture: on one xdist worker it trains the four strategies once, not
# once on each worker that draws one of them (CI 15 trained them twice, 130 s of test time).
STRATEGY_RUNS = pytest.mark.xdist_group("train-strategy-runs")


@STRATEGY_RUNS
def test_all_strategies_give_the_same_losses(strategy_runs):
    reference = np.array(strategy_runs["dp"]["losses"])
    assert len(reference) == 20
    for strategy, run in strategy_runs.items():
        np.testing.assert_allclose(run["losses"], reference, rtol=STRATEGY_RTOL, err_msg=strategy)
        assert run["val_loss"] == pytest.approx(strategy_runs["dp"]["val_loss"], rel=STRATEGY_RTOL)


@STRATEGY_RUNS
def test_loss_falls(strategy_runs):
    for run in strategy_runs.values():
        assert run["first_loss"] > 5.0  # about ln(256): an untrained byte model
        assert run["last_loss"] < run["first_loss"] - 2.0 and run["val_loss"] < run["first_loss"] - 2.0


def test_stopped_and_resumed_equals_uninterrupted(tmp_path):
    options = ["--strategy", "fsdp_tp", "--steps", "16", "--checkpoint-every", "5"]
    whole, _ = train(tmp_path, "whole", *options)
    first, err = train(tmp_path, "split", *options, "--stop-after", "7")
    assert first["stopped_early"] and first["end_step"] == 7 and "checkpoint saved" in err
    assert sorted(os.listdir(tmp_path / "split" / "checkpoints")) == ["5", "7"]
    second, err = train(tmp_path, "split", *options)
    assert "resumed from the checkpoint of step 7" in err
    assert (second["start_step"], second["end_step"]) == (7, 16)
    assert first["losses"] + second["losses"] == whole["losses"]  # exactly: same bits
    assert second["val_loss"] == whole["val_loss"]
    # the restart came warm: shapes restored into, the run's corpus, the stored executable
    start = second["time_to_first_step"]
    assert start["warm"] == ["model", "data", "compile"], start
    assert "restore" in [p["phase"] for p in start["phases"]] and "time to first step:" in err
    records = [json.loads(line) for line in (tmp_path / "split" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "time_to_first_step" in r] == [0, 7]  # one per attempt
    steps = [r["step"] for r in records if "loss" in r]
    assert steps == list(range(16))
    for r in records:
        if "loss" in r:
            assert {"loss", "grad_norm", "learning_rate", "step_time_s", "tokens_per_s", "mfu"} <= set(r)
    # Once more on the finished run (a relaunch of a completed job): nothing to train, said so; no crash.
    third, err = train(tmp_path, "split", *options)
    assert (third["start_step"], third["end_step"], third["losses"]) == (16, 16, [])
    assert third["val_loss"] == whole["val_loss"]
    assert "nothing to train: the run is at step 16 of 16 already" in err


def test_gradient_accumulation_and_bf16(tmp_path):
    plain, _ = train(tmp_path, "plain", "--steps", "8", "--checkpoint-every", "0")
    accumulated, _ = train(tmp_path, "accum", "--steps", "8", "--checkpoint-every", "0", "--accum-steps", "2")
    # Two half batches averaged are the same mean gradient as one whole batch.
    np.testing.assert_allclose(accumulated["losses"], plain["losses"], rtol=1e-4)
    mixed, _ = train(tmp_path, "bf16", "--steps", "8", "--checkpoint-every", "0", "--bf16")
    np.testing.assert_allclose(mixed["losses"], plain["losses"], rtol=5e-2)  # bf16 rounding
    assert mixed["last_loss"] < mixed["first_loss"] - 1.0


def test_learning_rate_schedule_is_numpy_on_the_host():
    cfg = TrainConfig(steps=100, warmup_steps=10, learning_rate=1.0, min_lr_ratio=0.1)
    from hpcjax.train.step import learning_rate  # JAX: imported when this test runs, not at collection

    values = [learning_rate(cfg, s) for s in range(100)]
    assert all(isinstance(v, float) for v in values)
    assert values[0] == pytest.approx(0.1) and values[9] == pytest.approx(1.0)
    assert values[-1] == pytest.approx(0.1, abs=1e-3) and values == sorted(values[:10]) + values[10:]


def test_bad_training_options_are_refused(tmp_path):
    for options, words in ([["--strategy", "zero3"], "invalid choice: 'zero3'"],
                           [["--batch-size", "12"], "must split evenly over the 8 devices"],
                           [["--strategy", "tp", "--heads", "4", "--d-model", "64"], "must split over 8 tensor"]):
        env = {**os.environ, "HPCJAX_GPUS_PER_PROCESS": "8"}
        result = subprocess.run([sys.executable, "-m", "hpcjax", "train", "--run-dir", str(tmp_path / "bad"),
                                 *options], capture_output=True, text=True, env=env)
        assert result.returncode == 2 and words in result.stderr and "hint:" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_a_warning_to_one_process_stops_both_at_the_same_step_on_the_local_backend(tmp_path, hpcjax_home):
    """Two processes (the local backend), USR2 to process 1 only, no checkpoint due for
    1000 steps: both agree to stop within a few steps, save, and exit cleanly."""
    import signal
    import time

    from hpcjax import launch
    from hpcjax.job.spec import JobSpec, Layout

    run_dir = tmp_path / "run"
    spec = JobSpec(command=(sys.executable, "-m", "hpcjax", "train", "--steps", "5000", "--checkpoint-every", "1000",
                            "--run-dir", str(run_dir), *SMALL), layout=Layout(nodes=1, gpus_per_node=2),
                   output_dir=str(tmp_path / "logs"))
    run = launch.submit(spec, "local")
    metrics = run_dir / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 10):
        time.sleep(0.05)
    seen = max(json.loads(line)["step"] for line in metrics.read_text().splitlines() if '"loss"' in line)
    run.procs[1].send_signal(signal.SIGUSR2)
    outcome = run.wait(progress=False)
    assert outcome.ok, outcome.report()
    last = json.loads(metrics.read_text().splitlines()[-1])
    assert last["stopped_early"] and seen < last["step"] <= seen + 6  # steps recorded, one late
    assert sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir()) == [last["step"]]
    assert f"stopping after step {last['step']} (checkpoint saved)" in run.logs(rank=0)


