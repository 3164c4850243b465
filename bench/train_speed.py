"""Training speed in one process: 8 emulated devices on this machine's CPU, or its GPUs (HPCJAX_GPUS_PER_PROCESS).

Prints, all measured in this run:
- tokens per second per strategy (dp, fsdp, tp, fsdp_tp), through hpcjax's train step;
- the step bubble: the loop's step time (host dispatching each step, reading
  metrics one step late; with its data loading, and with batches placed
  beforehand) over the step time of the same steps fused under jax.lax.scan
  with no host in the loop. On CPU the "devices" are the host's own cores, so
  host work in the loop (dispatch, data) competes with the computation itself:
  the ratios here are an upper bound of what a GPU run would show;
- model FLOPs utilization against a matrix-multiply peak measured now on the
  same devices.

    python bench/train_speed.py [--steps 20]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HPCJAX_GPUS_PER_PROCESS", "8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

from hpcjax.train import data  # noqa: E402
from hpcjax.train.model import ModelConfig  # noqa: E402
from hpcjax.rank.start.runtime import initialize  # noqa: E402
from hpcjax.train import TrainConfig  # noqa: E402
from hpcjax.train.step import StepProgram, build_program  # noqa: E402

MODEL = ModelConfig(seq_len=128, d_model=128, heads=8, layers=2, d_ff=512)


def matmul_peak(size: int = 1024, reps: int = 10) -> float:
    """FLOP/s of independent float32 matmuls on every device at once."""
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("d",))
    sharding = NamedSharding(mesh, P("d"))
    a = jax.device_put(np.ones((jax.device_count(), size, size), np.float32), sharding)
    f = jax.jit(lambda x: jnp.einsum("bij,bjk->bik", x, x))
    f(a).block_until_ready()
    start = time.perf_counter()
    for _ in range(reps):
        out = f(a)
    out.block_until_ready()
    return reps * jax.device_count() * 2 * size ** 3 / (time.perf_counter() - start)


def loop_seconds_per_step(program: StepProgram, state, batches, steps: int, lr: float):
    """As in the training loop: dispatch, read the previous step's metrics."""
    previous = None
    start = time.perf_counter()
    for _ in range(steps):
        state, metrics = program.train_step(state, next(batches), lr)
        if previous is not None:
            jax.device_get(previous)
        previous = metrics
    jax.device_get(previous)
    return (time.perf_counter() - start) / steps, state


def fused_seconds_per_step(program: StepProgram, state, batches, steps: int, lr: float):
    """The same steps under one jit with lax.scan: no host between steps."""
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *[next(batches) for _ in range(steps)])

    def many(state, stacked):
        return jax.lax.scan(lambda s, b: program.step(s, b, lr), state, stacked)

    many = jax.jit(many, donate_argnums=0, out_shardings=(program.state_shardings, program.replicated))

    state, _ = many(state, stacked)  # compile and warm
    jax.block_until_ready(state)
    start = time.perf_counter()
    state, metrics = many(state, stacked)
    jax.device_get(metrics)
    return (time.perf_counter() - start) / steps, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    steps = parser.parse_args().steps
    initialize()
    peak = matmul_peak()
    train_tokens, _ = data.load_corpus(2 << 20)
    print(f"{jax.device_count()} {jax.devices()[0].platform.upper()} devices; measured matmul peak {peak / 1e9:.1f} GFLOP/s (all devices)")
    print(f"{'strategy':<9} {'tokens/s':>10} {'loop ms/step':>13} {'placed ms/step':>15} {'fused ms/step':>14} "
          f"{'loop/fused':>11} {'placed/fused':>13} {'MFU':>7}")
    for strategy in ("dp", "fsdp", "tp", "fsdp_tp"):
        cfg = TrainConfig(model=MODEL, strategy=strategy, batch_size=32, steps=steps)
        program, state = build_program(cfg)
        batches = program.batches(data.Batches(train_tokens, MODEL.seq_len, cfg.batch_size, 0), 0)
        _, state = loop_seconds_per_step(program, state, batches, 3, 1e-3)  # compile and warm
        loop_s, state = loop_seconds_per_step(program, state, batches, steps, 1e-3)
        placed = [next(batches) for _ in range(steps)]  # the same loop without data loading
        jax.block_until_ready(placed)
        placed_s, state = loop_seconds_per_step(program, state, iter(placed), steps, 1e-3)
        fused_s, state = fused_seconds_per_step(program, state, batches, steps, 1e-3)
        tokens = cfg.batch_size * MODEL.seq_len
        mfu = MODEL.flops_per_token() * tokens / loop_s / peak
        print(f"{strategy:<9} {tokens / loop_s:>10.0f} {loop_s * 1e3:>13.1f} {placed_s * 1e3:>15.1f} "
              f"{fused_s * 1e3:>14.1f} {loop_s / fused_s:>11.3f} {placed_s / fused_s:>13.3f} {100 * mfu:>6.1f}%")


if __name__ == "__main__":
    main()
