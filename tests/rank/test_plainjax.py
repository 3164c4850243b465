"""`hpcjax env`'s view of what a plain jax.distributed.initialize() resolves (JAX's own
detection code, run for real on synthetic SLURM environments) and the differences it flags."""

import os
import subprocess
import sys

import pytest

from hpcjax.rank.start.mapping import DistributedEnv
from hpcjax.rank.start.plainjax import differences

pytestmark = pytest.mark.jax  # JAX's own detection code runs here

# Rank 5 of G8N2p8 as srun starts it, on a nodelist JAX's parser misreads.
STEP = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "node[1-2]-ib", "SLURM_NTASKS": "8",
        "SLURM_PROCID": "5", "SLURM_LOCALID": "1", "CUDA_VISIBLE_DEVICES": "1", "JAX_PLATFORMS": "cuda",
        "HPCJAX_GPUS_PER_PROCESS": "1"}


def env_output(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "JAX_", "HPCJAX_"))}
    return subprocess.run([sys.executable, "-m", "hpcjax", "env"], capture_output=True, text=True,
                          env={**env, **STEP, **extra}).stdout


def test_without_hpcjax_exports_plain_jax_takes_the_wrong_gpu_and_host():
    out = env_output({})
    assert "DIFFERS: coordinator_address: plain JAX 'node1:61517', hpcjax 'node1-ib:11232'" in out
    assert "DIFFERS: local_device_ids: plain JAX [1], hpcjax [0]" in out


def test_with_the_scripts_exports_plain_jax_agrees():
    out = env_output({"JAX_COORDINATOR_ADDRESS": "node1-ib:11232", "JAX_LOCAL_DEVICE_IDS": "0"})
    assert "a plain jax.distributed.initialize() agrees with hpcjax here" in out and "DIFFERS" not in out


def denv(platform):
    return DistributedEnv(coordinator_host="n1", coordinator_port=5, num_processes=2, process_id=1,
                          local_device_ids=(0,), devices_per_process=1, platform=platform, launcher="srun")


def test_gpu_ordinals_only_matter_on_gpus():
    plain = {"coordinator_address": "n1:5", "num_processes": 2, "process_id": 1, "local_device_ids": [1]}
    assert differences(denv("gpu"), plain) == ["local_device_ids: plain JAX [1], hpcjax [0]"]
    assert differences(denv("cpu"), plain) == []
    assert differences(denv("gpu"), {"error": "ValueError: x"}) == ["JAX's detection fails: ValueError: x"]
