"""What naming a slow rank costs: the training loop's time per step with train.pace's
captures (a 3-step profiler trace every N steps, each ending with one device
synchronisation) over the same run with none (--pace-every 0).

Runs `hpcjax train` as one local job of 2 processes (2 emulated nodes) per setting,
in interleaved rounds, and compares the mean step time of steps 20 onwards, taken
from each run's metrics.jsonl (the first steps compile and warm up). On CPU the
profiler's per-op tracing is a larger share of a small step than on a GPU.

    python bench/pace.py [--steps 120] [--rounds 2] [--every 10 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MODEL = ["--seq-len", "64", "--d-model", "256", "--heads", "8", "--layers", "2", "--d-ff", "1024",
         "--batch-size", "16", "--warmup-steps", "5", "--corpus-bytes", str(1 << 20), "--checkpoint-every", "0"]


def mean_step_s(every: int, steps: int, workdir: Path) -> float:
    run_dir = workdir / f"run-{every}"
    subprocess.run([sys.executable, "-m", "hpcjax", "submit", "--backend", "local", "--nodes", "2",
                    "--gpus-per-node", "1", "--wait", "--", sys.executable, "-m", "hpcjax", "train",
                    "--strategy", "dp", "--steps", str(steps), "--pace-every", str(every),
                    "--run-dir", str(run_dir), *MODEL], cwd=workdir, check=True, capture_output=True)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    times = [r["step_time_s"] for r in records if "loss" in r and r["step"] >= 20]
    return statistics.mean(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--every", type=int, nargs="+", default=[10, 50])
    args = parser.parse_args()
    settings = [0, *args.every]
    seen: dict[int, list[float]] = {every: [] for every in settings}
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(args.rounds):
            for every in settings:
                seen[every].append(mean_step_s(every, args.steps, Path(workdir)))
    base = statistics.mean(seen[0])
    print(f"mean step time, 2 processes, steps 20..{args.steps - 1}, {args.rounds} round(s):")
    print(f"  no captures        {1e3 * base:8.2f} ms/step  1.00x")
    for every in args.every:
        mean = statistics.mean(seen[every])
        print(f"  --pace-every {every:<5} {1e3 * mean:8.2f} ms/step  {mean / base:.2f}x")


if __name__ == "__main__":
    main()
