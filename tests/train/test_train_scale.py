"""Training at scale, on this machine: the compilation cache reused by a second run,
hybrid sharding agreeing with data parallelism across 2 emulated nodes, a profiler
trace of chosen steps, the time to the first step."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from hpcjax import launch
from hpcjax.job.spec import JobSpec, Layout
from support import summary_in
from test_train import SMALL, STRATEGY_RTOL, train

pytestmark = pytest.mark.jax  # needs JAX on this machine


def local_train(tmp_path, name: str, *options: str) -> tuple[dict, str]:
    """`hpcjax train` as a local job of 2 nodes x 2 emulated GPUs, one process of 2 per node: a mesh
    axis across the nodes and one within, at half the processes (and compiles) of one per GPU."""
    spec = JobSpec(command=(sys.executable, "-m", "hpcjax", "train", "--json", "--run-dir", str(tmp_path / name),
                            *SMALL, "--checkpoint-every", "0", *options),
                   layout=Layout(nodes=2, gpus_per_node=2, gpus_per_process=2), output_dir=str(tmp_path / f"{name}-logs"))
    run = launch.submit(spec, "local")
    run.wait(progress=False).raise_if_failed()
    log = run.logs(rank=0)
    return summary_in(log), log


def test_hybrid_sharding_across_two_nodes_agrees_with_data_parallel(tmp_path, hpcjax_home):
    dp, _ = local_train(tmp_path, "dp", "--strategy", "dp", "--steps", "12")
    hsdp, log = local_train(tmp_path, "hsdp", "--strategy", "hsdp", "--steps", "12")
    assert "mesh replica 2 (across 2 nodes) x data 2 (within a node) x tensor 1" in log
    np.testing.assert_allclose(hsdp["losses"], dp["losses"], rtol=STRATEGY_RTOL)
    assert hsdp["val_loss"] == pytest.approx(dp["val_loss"], rel=STRATEGY_RTOL)


def test_a_second_run_takes_its_first_step_from_the_cache_with_the_same_losses(tmp_path, hpcjax_home):
    cache = str(tmp_path / "cache")
    cold, cold_log = local_train(tmp_path, "cold", "--steps", "6", "--compile-cache", cache)
    warm, warm_log = local_train(tmp_path, "warm", "--steps", "6", "--compile-cache", cache)
    assert "written to the compilation cache" in cold_log
    assert f"(cold: compiled (no stored executable yet); stored in {cache}/executables/train_step/" in cold_log
    first = warm["time_to_first_step"]
    assert first["compile_cache"].startswith(f"warm: executable loaded from {cache}/executables/train_step/")
    assert "warm: executable loaded" in warm_log
    assert warm["losses"] == cold["losses"]  # bitwise: the loaded executable is the compiled one
    assert warm["val_loss"] == cold["val_loss"]
    # every process keeps its own executables of every program (JAX's own cache serves process 0 alone on CPU)
    for program in ("init_params", "train_step", "eval_loss"):
        stored = (tmp_path / "cache" / "executables" / program).glob("*/process*.bin")
        assert sorted(p.name for p in stored) == [f"process{i}.bin" for i in range(2)], program
    model = {p["phase"]: p for p in first["phases"]}["model"]
    assert model["how"] == "cold: parameters initialized from the seed, its program loaded", model
    assert "(cold: parameters initialized from the seed, its program compiled)" in cold_log
    phases = [p["phase"] for p in first["phases"]]
    assert phases == ["initialized", "model", "data", "restore", "setup", "compile", "first step"]
    assert first["total_s"] == pytest.approx(sum(p["s"] for p in first["phases"]), abs=0.01)


def test_the_compile_cache_defaults_to_the_run_directory_and_can_be_turned_off(tmp_path):
    _, err = train(tmp_path, "auto", "--steps", "2", "--checkpoint-every", "0", shared_cache=False)
    assert (tmp_path / "auto" / "compile-cache").is_dir()
    assert any((tmp_path / "auto" / "compile-cache").iterdir())
    summary, err = train(tmp_path, "off", "--steps", "2", "--checkpoint-every", "0", "--compile-cache", "off")
    assert not (tmp_path / "off" / "compile-cache").exists()
    assert "no compilation cache: --compile-cache off" in summary["time_to_first_step"]["compile_cache"]
    assert "time to first step:" in err


def test_auto_takes_the_cache_the_job_names_in_the_environment():
    from hpcjax.train.config import TrainConfig

    config = TrainConfig(run_dir="/runs/a")
    assert config.compile_cache_dir({}) == "/runs/a/compile-cache"
    assert config.compile_cache_dir({"HPCJAX_COMPILE_CACHE": "/shared/jax-cache"}) == "/shared/jax-cache"
    assert config.compile_cache_dir({"HPCJAX_COMPILE_CACHE": "off"}) is None
    assert TrainConfig(compile_cache="/mine").compile_cache_dir({"HPCJAX_COMPILE_CACHE": "/shared"}) == "/mine"


def test_profile_steps_leave_a_trace_naming_the_train_step(tmp_path):
    _, err = train(tmp_path, "prof", "--steps", "8", "--checkpoint-every", "0", "--profile-steps", "3:5")
    traces = list((tmp_path / "prof" / "profile").rglob("*.xplane.pb"))
    assert len(traces) == 1, err
    assert b"_train_step" in traces[0].read_bytes()
    assert "profile of steps 3..5 in" in err and "tensorboard --logdir" in err


def test_a_cache_written_by_another_configuration_is_not_used_for_this_one(tmp_path):
    cache = str(tmp_path / "cache")
    train(tmp_path, "other", "--steps", "2", "--checkpoint-every", "0", "--compile-cache", cache)
    wider = ["--steps", "3", "--checkpoint-every", "0", "--d-model", "128", "--heads", "4"]
    shared, err = train(tmp_path, "shared", *wider, "--compile-cache", cache)
    alone, _ = train(tmp_path, "alone", *wider, "--compile-cache", "off")
    how = shared["time_to_first_step"]["compile_cache"]
    assert how.startswith("cold: compiled (the stored executable is another program's: "), how
    assert "program.model.d_model: 64 -> 128" in how and "program.model.heads" in how and "XLA: compiled 1" in how
    assert shared["losses"] == alone["losses"]


def test_any_program_using_hpcjax_initialize_gets_the_cache_from_the_environment(tmp_path):
    import os
    import subprocess

    program = ("import jax, jax.numpy as jnp\nfrom hpcjax.rank import initialize\nfrom hpcjax.rank.cache import "
               "compile_cache\ninitialize()\nprint(float(jax.jit(lambda x: (x * 2).sum())(jnp.ones(4))))\n"
               "print(compile_cache.stats().describe())\n")
    env = {**os.environ, "HPCJAX_COMPILE_CACHE": str(tmp_path / "cache"), "JAX_PLATFORMS": "cpu"}
    runs = [subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=120)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr
    assert runs[0].stdout.splitlines()[0] == runs[1].stdout.splitlines()[0] == "8.0"
    assert "written to the compilation cache" in runs[0].stdout
    assert "from the compilation cache" in runs[1].stdout


def test_a_small_models_initialization_is_compiled_unoptimized_on_the_cpu_only():
    """The rule (train.model): level 0 on the CPU below 8M parameters; XLA's defaults for a bigger
    model and on a GPU. The compile itself is measured in docs/training.md, not asserted."""
    import dataclasses

    from hpcjax.train import model
    from hpcjax.train.config import ModelConfig

    small = ModelConfig(seq_len=64, d_model=64, heads=8, layers=2, d_ff=256)
    big = dataclasses.replace(small, d_model=1024, d_ff=4096, heads=16)  # 25M parameters
    assert model.init_compiler_options(small, "cpu") == {"xla_backend_optimization_level": 0}
    assert model.init_compiler_options(small, "gpu") is None and model.init_compiler_options(small, "cuda") is None
    assert model.init_compiler_options(big, "cpu") is None
