"""Pipeline parallelism on this machine's CPU, 8 emulated devices in one process.

Prints, all measured in this run, at the same global batch and model:
- step time and tokens/s of dp_pp (S stages x 8/S data-parallel replicas, M micro-batches)
  over fsdp's;
- the measured bubble against GPipe's theoretical (S-1)/(M+S-1). In SPMD every stage
  computes at every tick, so the bubble is wasted work, not idle time: the step time is
  fitted as T(M) = tick x (M + S - 1) + fixed over two micro-batch counts of the same
  per-tick work, and (S-1) x tick / T(M) is the share of the step spent on bubble ticks.
On CPU the "devices" share the host's cores, so absolute speeds mean little; the ratios
are the point.

    python bench/pipeline.py [--steps 6] [--stages 2]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HPCJAX_GPUS_PER_PROCESS", "8")

import jax  # noqa: E402

from hpcjax.rank.start.runtime import initialize  # noqa: E402
from hpcjax.train import TrainConfig, data  # noqa: E402
from hpcjax.train.model import ModelConfig  # noqa: E402
from hpcjax.train.pipeline import bubble_fraction  # noqa: E402
from hpcjax.train.step import build_program  # noqa: E402

MODEL = ModelConfig(seq_len=64, d_model=128, heads=8, layers=4, d_ff=512)


def seconds_per_step(cfg: TrainConfig, steps: int) -> float:
    program, state = build_program(cfg)
    tokens, _ = data.load_corpus(cfg.corpus_bytes)
    batches = program.batches(data.Batches(tokens, cfg.model.seq_len, cfg.batch_size, cfg.seed), 0)
    state, metrics = program.train_step(state, next(batches), 1e-3)  # compile and warm
    jax.device_get(metrics)
    start = time.perf_counter()
    for _ in range(steps):
        state, metrics = program.train_step(state, next(batches), 1e-3)
    jax.device_get(metrics)
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--stages", type=int, default=2)
    args = parser.parse_args()
    initialize()
    s = args.stages
    base = dict(model=MODEL, batch_size=64, corpus_bytes=1 << 20, checkpoint_every=0)
    fsdp = seconds_per_step(TrainConfig(strategy="fsdp", **base), args.steps)
    # Two micro-batch counts with the same rows per micro-batch: the per-tick work is equal.
    times = {m: seconds_per_step(TrainConfig(strategy="dp_pp", stages=s, microbatches=m,
                                             **{**base, "batch_size": base["batch_size"] * m // 4}), args.steps)
             for m in (4, 8)}
    tick = (times[8] - times[4]) / 4
    tokens = base["batch_size"] * MODEL.seq_len
    print(f"fsdp:                {fsdp * 1e3:8.1f} ms/step  {tokens / fsdp / 1e3:7.1f}k tokens/s  (baseline)")
    print(f"dp_pp {s} stages, M=4: {times[4] * 1e3:8.1f} ms/step  {tokens / times[4] / 1e3:7.1f}k tokens/s  "
          f"({fsdp / times[4]:.2f}x fsdp's tokens/s)")
    for m in (4, 8):
        measured = (s - 1) * tick / times[m]
        print(f"bubble at M={m}: measured {measured:.1%} of the step, GPipe's theory {bubble_fraction(s, m):.1%} "
              f"(ratio {measured / bubble_fraction(s, m):.2f})")


if __name__ == "__main__":
    main()
