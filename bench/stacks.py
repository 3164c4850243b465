"""What `hpcjax stacks` costs a healthy job (issue 27): a rank's step time while its stacks
are taken, against the same steps undisturbed, measured in the same run.

A stand-in rank (a Python process with the environment of rank 0 of a local job) runs fixed
steps of pure-Python work and reports each step's time. Phase 1: undisturbed. Phase 2: the
node side of `hpcjax stacks` (hpcjax.rank.watch.stacks: find the rank, py-spy dump) every
--every seconds. Prints the median step time of each phase, their ratio, and how long one
look took. py-spy pauses the process while it reads it; the ratio says what that costs at
this rate. Asserts nothing.
    python3 bench/stacks.py [--steps 4000] [--every 0.5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RANK = """
import sys, time
def step():
    total = 0
    for i in range(60000):
        total += i * i
    return total
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    step()
    print(time.perf_counter() - start, flush=True)
"""


def phase(steps: int, every: float | None) -> tuple[list[float], list[float]]:
    env = {**os.environ, "SLURM_JOB_ID": "bench-stacks", "SLURM_PROCID": "0"}
    rank = subprocess.Popen([sys.executable, "-c", RANK, str(steps)], env=env, stdout=subprocess.PIPE, text=True)
    looks, times, next_look = [], [], time.monotonic() + (every or 0)
    for line in rank.stdout:
        times.append(float(line))
        if every and time.monotonic() >= next_look:
            started = time.monotonic()
            subprocess.run([sys.executable, "-m", "hpcjax.rank.watch.stacks", "bench-stacks"], capture_output=True,
                           env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
            looks.append(time.monotonic() - started)
            next_look = time.monotonic() + every
    rank.wait()
    return times, looks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--every", type=float, default=0.5, help="seconds between looks")
    args = parser.parse_args()
    alone, _ = phase(args.steps, None)
    looked, looks = phase(args.steps, args.every)
    base, with_looks = statistics.median(alone), statistics.median(looked)
    print(f"step time undisturbed: median {1e3 * base:.2f} ms, mean {1e3 * statistics.mean(alone):.2f} ms")
    print(f"step time with a look every {args.every:g} s ({len(looks)} looks): median {1e3 * with_looks:.2f} ms, "
          f"mean {1e3 * statistics.mean(looked):.2f} ms")
    print(f"ratio (median): {with_looks / base:.3f}x; ratio (mean): {statistics.mean(looked) / statistics.mean(alone):.3f}x")
    if looks:
        print(f"one look (find the rank, py-spy dump, JSON): median {1e3 * statistics.median(looks):.0f} ms")


if __name__ == "__main__":
    main()
