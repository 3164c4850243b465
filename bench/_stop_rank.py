"""One rank of bench/stop_agreement.py: the training loop's step time without a stop
check, with hpcjax's per-step agreement (a coordination-service barrier), and with a
device all-gather of the flag (what a naive check does), interleaved in rounds."""

from __future__ import annotations

import json
import sys
import time

import jax
import numpy as np
from jax.experimental import multihost_utils

from hpcjax.rank.start.runtime import initialize
from hpcjax.train import TrainConfig, data
from hpcjax.train.model import ModelConfig
from hpcjax.train.step import build_program
from hpcjax.train.stop import StopRequest

STEPS, ROUNDS = int(sys.argv[1]), int(sys.argv[2])


def allgather_check(step: int) -> bool:
    return bool(np.any(multihost_utils.process_allgather(np.int32(0))))


def main() -> None:
    initialize()
    cfg = TrainConfig(model=ModelConfig(seq_len=64, d_model=128, heads=8, layers=2, d_ff=512),
                      batch_size=32, steps=10_000, corpus_bytes=1 << 20)
    program, state = build_program(cfg)
    tokens, _ = data.load_corpus(cfg.corpus_bytes)
    batches = program.batches(data.Batches(tokens, cfg.model.seq_len, cfg.batch_size, 0), 0)
    stop = StopRequest(namespace="bench/stop")
    checks = {"none": lambda step: False, "barrier (hpcjax)": stop.agreed, "device all-gather": allgather_check}
    times = {name: [] for name in checks}
    step = 0
    for round_ in range(ROUNDS + 1):  # round 0 compiles and warms up
        for name, check in checks.items():
            previous = None
            start = time.perf_counter()
            for _ in range(STEPS):
                state, metrics = program.train_step(state, next(batches), 1e-3)
                if previous is not None:
                    jax.device_get(previous)  # the loop reads metrics one step late
                previous = metrics
                step += 1
                check(step)
            jax.device_get(previous)
            if round_:
                times[name].append((time.perf_counter() - start) / STEPS)
    if jax.process_index() == 0:
        print(json.dumps({name: float(np.median(t)) for name, t in times.items()}))


main()
