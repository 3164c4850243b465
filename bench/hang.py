"""The hang watch (issue 27): what it costs a healthy job, and how long a hung job takes to end.

1. Cost: one process takes fixed steps of pure-Python work (about 1 ms each), in interleaved
   rounds without and with `hpcjax.rank.progress(step)` at the top of every step (the watch's
   thread running, its timeout the default floor). Prints the median step time of each and
   their ratio, and the cost of one progress() call.
2. Hang to end: a job of 4 ranks (2 nodes x 2) on the local backend, or SLURM with
   --backend slurm, whose rank 3 stops before step 12 while the others wait in the step's
   collective (real multi-process JAX). Prints, from the files the watch leaves: the hang (the
   last progress of any rank) -> the marker (the timeout: HPCJAX_HANG_FLOOR, --floor) -> the
   job's end as its follower saw it, and the rank the report named.
Asserts nothing.
    python3 bench/hang.py [--steps 2000] [--rounds 5] [--floor 5] [--backend local|slurm]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpcjax.rank.watch import hangwatch  # noqa: E402

RANK = """
import sys, time
import numpy as np
from jax.experimental import multihost_utils
from hpcjax.rank import initialize, progress
rank = initialize().process_id
for step in range(10000):
    if rank == 3 and step == 12:
        time.sleep(3600)
    progress(step)
    time.sleep(0.2)
    multihost_utils.process_allgather(np.int32(step))
"""


def work() -> int:
    total = 0
    for i in range(20000):
        total += i * i
    return total


def timed_steps(steps: int, watched: bool) -> list[float]:
    times = []
    for step in range(steps):
        start = time.perf_counter()
        if watched:
            hangwatch.progress(step)
        work()
        times.append(time.perf_counter() - start)
    return times


def cost(steps: int, rounds: int) -> None:
    plain, watched = [], []
    timed_steps(steps // 4, False)  # warm up
    for _ in range(rounds):
        plain += timed_steps(steps, False)
        watched += timed_steps(steps, True)
    calls = 200_000
    start = time.perf_counter()
    for step in range(calls):
        hangwatch.progress(step)
    per_call = (time.perf_counter() - start) / calls
    base, with_watch = statistics.median(plain), statistics.median(watched)
    print(f"step time, median of {len(plain)}: without the watch {base * 1e3:.3f} ms, with progress() "
          f"{with_watch * 1e3:.3f} ms: ratio {with_watch / base:.3f}x; one progress() call {per_call * 1e6:.2f} us")
    hangwatch.close()


def hang_to_end(floor: float, backend: str) -> None:
    from hpcjax.launch import submit
    from hpcjax.job.spec import JobSpec, Layout

    where = Path(tempfile.mkdtemp(prefix="bench-hang-", dir=os.environ.get("HPCJAX_BENCH_DIR")))
    program = where / "rank.py"
    program.write_text(RANK)
    spec = JobSpec(command=(sys.executable, str(program)), layout=Layout(nodes=2, gpus_per_node=2),
                   output_dir=str(where / "logs"), time="00:10:00",
                   env=(("HPCJAX_HANG_FLOOR", str(floor)), ("HPCJAX_HANG_CEILING", "600")))
    run = submit(spec, backend)
    outcome = run.wait(progress=False)
    ended = time.time()
    states = [json.loads(p.read_text()) for p in (where / "logs").glob("*.hang.json")]
    marker = next((where / "logs").glob("*-hang"))
    hung = max(s["last_progress_at"] for s in states)
    seen = marker.stat().st_mtime
    named = [f.rank for f in outcome.failed]
    print(f"{backend}, 4 ranks, floor {floor:g} s: hang -> marker {seen - hung:.1f} s (the timeout), marker -> job "
          f"ended as followed {ended - seen:.1f} s (every rank's stacks, then srun or the local backend stops "
          f"the job, then the follower's poll and the analysis); total {ended - hung:.1f} s; "
          f"the report names rank(s) {named}, cause {outcome.cause.cause if outcome.cause else None}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--floor", type=float, default=5.0)
    parser.add_argument("--backend", choices=("local", "slurm"), default="local")
    args = parser.parse_args()
    cost(args.steps, args.rounds)
    hang_to_end(args.floor, args.backend)


if __name__ == "__main__":
    main()
