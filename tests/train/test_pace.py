"""train.pace's logic on its own: which trace events are collectives on CPU and GPU
traces, who the others waited for, when a rank is named and cleared, and what the
progress line says. The whole path runs on the dev cluster in test_pace_cluster.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hpcjax.values.errors import ConfigError
from hpcjax.train.config import ModelConfig, TrainConfig

pytestmark = pytest.mark.jax  # needs JAX on this machine

MS = 1_000_000  # nanoseconds


def pace():
    """hpcjax.train.pace, imported when a test runs: it imports JAX (1.3 s), which every worker of
    the pure tier would pay just to collect this file."""
    from hpcjax.train import pace as module

    return module


def test_cpu_traces_count_the_xla_thread_pools_collectives():
    events = [("/host:CPU", "python", "all-reduce", 0, 50 * MS),  # a host annotation, not the op
              ("/host:CPU", "tf_XLAEigen/1", "all-reduce", 0, 30 * MS),
              ("/host:CPU", "tf_XLAEigen/1", "end: all-reduce", 30 * MS, 0),
              ("/host:CPU", "tf_XLAPjRtCpuClient/2", "all-gather.3", 40 * MS, 10 * MS),
              ("/host:CPU", "tf_XLAPjRtCpuClient/2", "reduce-scatter.1", 60 * MS, 20 * MS),
              ("/host:CPU", "tf_XLAPjRtCpuClient/2", "dot.1", 80 * MS, 40 * MS),
              ("/host:CPU", "tf_XLAPjRtCpuClient/2", "copy_subtract_fusion", 120 * MS, 5 * MS)]
    assert pace().collective_seconds(events, local_devices=1) == pytest.approx(0.060)


def test_with_several_devices_per_process_each_instance_counts_its_last_arriving_device():
    # Two steps of one all-reduce on 4 local devices: the runs of an instance end together
    # (within 0.6 ms here), whatever thread ran them; a device that arrived early waited
    # for its siblings, which is not waiting for another process.
    events = []
    for step_end, durations in ((100, (2, 9, 30, 4)), (200, (7, 3, 12, 5))):
        for n, wait in enumerate(durations):
            end = step_end * MS + n * MS // 5
            events.append(("/host:CPU", f"tf_XLAEigen/{n % 2}", "all-reduce", end - wait * MS, wait * MS))
    assert pace().collective_seconds(events, local_devices=4) == pytest.approx((2 + 3) / 1000)
    # A capture that cut an instance short still groups the rest by their ends.
    assert pace().collective_seconds(events[1:], local_devices=4) == pytest.approx((4 + 3) / 1000)


def test_a_real_cpu_trace_of_four_devices_groups_into_one_instance_per_step(tmp_path):
    """The grouping's premise, on XLA's own trace: one process, 4 CPU devices, a jitted
    step with one gradient all-reduce, traced for a few steps."""
    steps = 3
    program = f"""
import os, sys, json
os.environ["JAX_NUM_CPU_DEVICES"] = "4"
import jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from hpcjax.train import pace
mesh = Mesh(jax.devices(), ("d",))
x = jax.device_put(jnp.ones((1024, 128)), NamedSharding(mesh, P("d")))
w = jax.device_put(jnp.ones((128, 128)), NamedSharding(mesh, P()))
step = jax.jit(lambda w, x: w - 1e-3 * jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w))
w = step(w, x).block_until_ready()
jax.profiler.start_trace(sys.argv[1])
for _ in range({steps}):
    w = step(w, x)
w.block_until_ready()
jax.profiler.stop_trace()
events = [e for e in pace.read_trace(pace.Path(sys.argv[1])) if pace.COLLECTIVE.match(e[2])
          and e[1].startswith("tf_XLA")]
print(json.dumps([len(events), len(pace._instances_by_end(events, 4))]))
"""
    out = subprocess.run([sys.executable, "-c", program, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    runs, instances = json.loads(out.stdout.splitlines()[-1])
    assert (runs, instances) == (4 * steps, steps)


def test_gpu_traces_count_each_device_planes_ops_once():
    events = []
    for device, wait in (("/device:GPU:0", 10), ("/device:GPU:1", 30)):
        events += [(device, "XLA Ops", "all-reduce-start.2", 0, wait * MS), (device, "XLA Ops", "fusion.4", 40 * MS, 50 * MS),
                   (device, "Stream #13(compute)", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, wait * MS),
                   (device, "XLA Ops", "collective-permute-done", 95 * MS, 2 * MS)]
    events.append(("/host:CPU", "tf_XLAPjRtGpuClient/1", "all-reduce", 0, 999 * MS))  # the host side: not counted
    # Each instance counts its last-arriving device: GPU:0's 10 ms, and 2 ms.
    assert pace().collective_seconds(events, local_devices=2) == pytest.approx(0.012)
    # Without an "XLA Ops" line, the kernels of the streams are what there is.
    kernels = [e for e in events if e[1].startswith("Stream")]
    assert pace().collective_seconds(kernels, local_devices=2) == pytest.approx(0.010)
    # An op's Nth run on each plane is one instance: two runs, each device's shorter one in turn.
    twice = [(f"/device:GPU:{d}", "XLA Ops", "all-reduce.1", n * 100 * MS, w * MS)
             for d, waits in ((0, (5, 20)), (1, (25, 8))) for n, w in enumerate(waits)]
    assert pace().collective_seconds(twice, local_devices=2) == pytest.approx((5 + 8) / 1000)


def test_a_gpu_trace_without_device_planes_is_refused_not_misread():
    host_only = [("/host:CPU", "tf_XLAPjRtGpuClient/1", "all-reduce", 0, 9 * MS)]
    with pytest.raises(ValueError, match="no gpu device activity"):
        pace().collective_seconds(host_only, local_devices=1, platform="gpu")


def test_the_rank_that_waits_least_is_the_one_the_others_waited_for():
    assert pace().judge_capture([0.70, 0.45, 0.72, 0.68]) == (1, pytest.approx(0.70 - 0.45))
    assert pace().judge_capture([0.40, 0.38]) == (1, pytest.approx(0.02))
    assert pace().judge_capture([0.5]) == (None, 0.0)


def shares(slow: int, wait: float, ranks: int = 2) -> list[float]:
    return [0.3 if r == slow else 0.3 + wait for r in range(ranks)]


def test_a_rank_is_named_after_streak_captures_and_cleared_when_the_others_stop_waiting():
    judge = pace().Judge()
    verdicts = [judge(shares(1, 0.3)) for _ in range(pace().STREAK)]
    assert [v.named for v in verdicts] == [None] * (pace().STREAK - 1) + [1]
    assert verdicts[-1].named_wait == pytest.approx(0.3)
    # A capture that caught few of its pauses (it still waited least) keeps it named...
    kept = judge(shares(1, 0.02))
    assert kept.named == 1 and kept.named_wait == pytest.approx((0.3 * (pace().STREAK - 1) + 0.02) / pace().STREAK)
    # ...until the others' average wait is under SLOW_SHARE.
    quiet = [judge(shares(0, 0.01)).named for _ in range(pace().STREAK)]
    assert quiet[-1] is None and judge(shares(0, 0.01)).named_wait == 0.0


def test_jitter_that_moves_from_rank_to_rank_names_no_one():
    judge = pace().Judge()
    assert all(judge(shares(r % 2, pace().SLOW_SHARE + 0.1)).named is None for r in range(10))


def test_a_small_steady_difference_names_no_one():
    judge = pace().Judge()
    assert all(judge(shares(1, pace().SLOW_SHARE / 2)).named is None for _ in range(10))


def test_the_progress_line_names_rank_node_and_how_long_the_others_wait():
    assert pace().describe(pace().Verdict(waited_for=5, others_wait=0.1, named=5, named_wait=0.384),
                    [f"node{i // 4 + 1}" for i in range(8)]) \
        == "slow: rank 5 on node2, others wait 38 % of each step for it"
    assert pace().describe(pace().Verdict(waited_for=None, others_wait=0.02, named=None), ["a", "b"]) == ""


@pytest.mark.parametrize("value", [1, 5, -1])
def test_too_short_a_pace_interval_is_refused_with_the_valid_values(value):
    with pytest.raises(ConfigError) as caught:
        TrainConfig(model=ModelConfig(), pace_every=value)
    assert "pace_every" in str(caught.value) and "--pace-every" in caught.value.hint
