"""What a preflight costs, and how it grows with nodes.

On the dev cluster (SLURM here): the same job (`true` on every rank, 2 nodes x 4 GPUs) submitted
with and without --preflight, interleaved; prints each job's wall time from submit to its end,
and the preflight's own figure from its line ("passed in N s": the slowest rank's time from its
process start to the verdict).

Without a cluster of that size here, the growth with nodes is measured on its parts: the pair
schedule's rounds (N-1 for N nodes; each round is one exchange of disjoint pairs at once, so its
time does not grow with N on a non-blocking fabric) and rank 0's verdict over the measurements
of N nodes x 8 ranks and every pair of nodes.

    python bench/preflight.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from hpcjax.protocol.preflight_rules import Floors, verdict
from hpcjax.rank.prove.pairs import rounds


def one_job(preflight: bool, work: str) -> tuple[float, float | None]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "hpcjax", "submit", "--nodes", "2", "--gpus-per-node", "4",
                           "--time", "00:05:00", "--wait", *(["--preflight"] if preflight else []), "--", "true"],
                          capture_output=True, text=True, cwd=work)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"job failed:\n{done.stderr}")
    job = done.stdout.split()[0]
    log = open(os.path.join(work, "hpcjax-logs", f"{job}-batch.log")).read()
    found = re.search(r"preflight: .* passed in (\d+) s", log)
    return wall, float(found.group(1)) if found else None


def analysis(nodes: int, per_node: int = 8) -> tuple[int, float]:
    """(the schedule's rounds, seconds of the verdict) for synthetic measurements of that size."""
    names = [f"node{i:04d}" for i in range(nodes)]
    ranks = [{"rank": n * per_node + i, "node": name, "devices": 1, "expected": 1, "kinds": ["NVIDIA H100"],
              "gflops": [random.uniform(600e3, 700e3)], "in_node_busbw": random.uniform(370, 480),
              "storage": {"path": "/scratch", "free_gb": 900.0, "error": ""} if i == 0 else None, "gpus": None}
             for n, name in enumerate(names) for i in range(per_node)]
    schedule = rounds(nodes)
    pairs = [{"nodes": [names[a], names[b]], "busbw_gbps": random.uniform(300, 360)}
             for each in schedule for a, b in each]
    started = time.perf_counter()
    verdict(ranks, pairs, Floors(), 0.0)
    return len(schedule), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for nodes in (2, 8, 64, 512):
        count, seconds = analysis(nodes)
        print(f"{nodes:4d} nodes: {count:3d} rounds of pairs ({nodes * (nodes - 1) // 2} pairs), "
              f"verdict over {nodes * 8} ranks in {seconds * 1000:.1f} ms")
    if shutil.which("sbatch") is None:
        print("no SLURM here: the jobs are not measured", file=sys.stderr)
        return
    work = tempfile.mkdtemp(prefix="hpcjax-bench-preflight-")
    walls = {False: [], True: []}
    own = []
    for _ in range(args.rounds):
        for preflight in (False, True):
            wall, seconds = one_job(preflight, work)
            walls[preflight].append(wall)
            if seconds is not None:
                own.append(seconds)
            print(f"{'with' if preflight else 'without':>7} --preflight: {wall:.1f} s from submit to the end"
                  + (f" (preflight's own line: {seconds:.0f} s)" if seconds is not None else ""))
    plain, checked = statistics.median(walls[False]), statistics.median(walls[True])
    print(f"median: {plain:.1f} s without, {checked:.1f} s with: the preflight adds {checked - plain:.1f} s "
          f"on 2 nodes x 4 (its own line: median {statistics.median(own):.0f} s)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
