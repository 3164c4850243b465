"""Start-up cost of hpcjax's runtime against bare JAX, on the dev cluster.

For the one-process-per-GPU layout (2 nodes x 4 GPUs, 8 processes; the layout
where JAX's own SLURM detection works), each rank measures the seconds from its
start to its first completed all-reduce, once with hpcjax.runtime.initialize()
and once with a bare jax.distributed.initialize(). A job is ready when its
slowest rank is; the median over rounds is compared. Prints the ratio, and the slowest
rank's phases: python (from the exec to the interpreter up, the exit guard's sitecustomize
included under hpcjax), import jax, initialize, first all-reduce (compile and run).

    bash slurm/devcluster/up.sh && python bench/startup.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RANK = Path(__file__).resolve().parent / "_startup_rank.py"


def one_job(mode: str, workdir: Path, gpus: int) -> tuple[float, dict]:
    command = f'export HPCJAX_BENCH_T0=$(date +%s.%N); exec {sys.executable} {RANK} {mode}'
    result = subprocess.run([sys.executable, "-m", "hpcjax", "submit", "--nodes", "2", "--gpus-per-node", str(gpus),
                             "--wait", "--",
                             "bash", "-c", command], capture_output=True, text=True, cwd=workdir)
    if result.returncode != 0:
        sys.exit(f"{mode} job failed:\n{result.stderr}")
    job = result.stdout.strip()
    reports = []
    for log in sorted((workdir / "hpcjax-logs").glob(f"{job}-rank*.log")):
        line = next(l for l in log.read_text().splitlines() if l.startswith('{"mode"'))
        reports.append(json.loads(line))
        assert reports[-1]["sum"] == 2 * gpus, reports[-1]
    assert len(reports) == 2 * gpus, reports
    slowest = max(reports, key=lambda r: r["seconds"])
    return slowest["seconds"], slowest["phases"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gpus-per-node", type=int, default=4,
                        help="ranks per node (1: one rank per core of this 2-core machine, no contention)")
    args = parser.parse_args()
    rounds, gpus = args.rounds, args.gpus_per_node
    times: dict[str, list[float]] = {"bare": [], "hpcjax": []}
    phases: dict[str, list[dict]] = {"bare": [], "hpcjax": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            for mode in (("bare", "hpcjax") if i % 2 == 0 else ("hpcjax", "bare")):  # alternate order
                seconds, split = one_job(mode, Path(tmp), gpus)
                times[mode].append(seconds)
                phases[mode].append(split)
                print(f"round {i + 1} {mode:>6}: {times[mode][-1]:.3f} s to the first all-reduce "
                      f"(slowest of {2 * gpus} ranks)", file=sys.stderr)
    bare, ours = statistics.median(times["bare"]), statistics.median(times["hpcjax"])
    print(f"bare jax.distributed.initialize(): median {bare:.3f} s over {rounds} rounds")
    print(f"hpcjax.runtime.initialize():       median {ours:.3f} s over {rounds} rounds")
    print(f"ratio hpcjax / bare: {ours / bare:.3f}")
    for mode in ("bare", "hpcjax"):  # the slowest rank's phases, median over rounds
        split = {name: statistics.median(p[name] for p in phases[mode]) for name in phases[mode][0]}
        print(f"{mode:>6} phases (median s): " + ", ".join(f"{name} {s:.2f}" for name, s in split.items()))


if __name__ == "__main__":
    main()
