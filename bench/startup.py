"""Start-up cost of hpcjax's runtime on the dev cluster: time from each rank's start to its first
collective, against the floor (importing JAX and running one local op, in the same srun step
shape) and against a bare jax.distributed.initialize() (issue 64: at most 1.05x the floor).

Each round runs three jobs in turn (their order rotates, so a busy moment hits them all alike):
  floor   import jax; one local op
  bare    jax.distributed.initialize() (JAX's own SLURM detection), then an all-reduce
  hpcjax  hpcjax's initialize(), then the same all-reduce
A job is ready when its slowest rank is; medians over rounds are compared. Printed: each mode's
median, the ratios to the floor, each mode's phases (python: from the exec to the interpreter up,
the exit guard's sitecustomize included under hpcjax; import jax; initialize; the first
all-reduce), and where hpcjax's initialize spends its time (the imports beyond JAX, the mapping of
SLURM's environment, the roll call, JAX's initialize, the exit guard's arming). Bare initialize is
bimodal here (1.4-1.8 s, or 2.5 s when its ranks wait for the coordinator): the floor is the
honest baseline.

With --load N, N busy loops run on this machine through every round (the suite's load, or a
login node's): the same three jobs, the same ratios, measured under it.

    bash slurm/devcluster/up.sh && python bench/startup.py [--rounds 4] [--gpus-per-node 1] [--load 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RANK = Path(__file__).resolve().parent / "_startup_rank.py"
MODES = ("floor", "bare", "hpcjax")


def one_job(mode: str, workdir: Path, gpus: int) -> dict:
    """The slowest rank's report of one job."""
    command = f'export HPCJAX_BENCH_T0=$(date +%s.%N); exec {sys.executable} {RANK} {mode}'
    result = subprocess.run([sys.executable, "-m", "hpcjax", "submit", "--nodes", "2", "--gpus-per-node", str(gpus),
                             "--wait", "--", "bash", "-c", command], capture_output=True, text=True, cwd=workdir)
    if result.returncode != 0:
        sys.exit(f"{mode} job failed:\n{result.stderr}")
    job = result.stdout.strip()
    reports = []
    for log in sorted((workdir / "hpcjax-logs").glob(f"{job}-rank*.log")):
        line = next(l for l in log.read_text().splitlines() if l.startswith('{"mode"'))
        reports.append(json.loads(line))
        assert reports[-1]["value"] == 1.0, reports[-1]
    assert len(reports) == 2 * gpus, reports
    return max(reports, key=lambda r: r["seconds"])


def median_of(reports: list[dict], key: str) -> dict[str, float]:
    names = list(dict.fromkeys(name for r in reports for name in r[key]))
    return {name: statistics.median(r[key].get(name, 0.0) for r in reports) for name in names}


@contextlib.contextmanager
def busy_loops(count: int):
    """count processes that only spin, for as long as the block runs."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--gpus-per-node", type=int, default=1,
                        help="ranks per node (1: one rank per core of this 2-core machine, as issue 64 measures)")
    parser.add_argument("--load", type=int, default=0, metavar="N",
                        help="N busy loops beside the jobs through every round (default 0: a quiet machine)")
    args = parser.parse_args()
    reports: dict[str, list[dict]] = {mode: [] for mode in MODES}
    if args.load:
        print(f"under load: {args.load} busy loop(s) beside every job", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp, busy_loops(args.load):
        for i in range(args.rounds):
            for mode in MODES[i % 3:] + MODES[:i % 3]:  # rotate the order
                reports[mode].append(one_job(mode, Path(tmp), args.gpus_per_node))
                print(f"round {i + 1} {mode:>6}: {reports[mode][-1]['seconds']:.3f} s "
                      f"(slowest of {2 * args.gpus_per_node} ranks)", file=sys.stderr)
    median = {mode: statistics.median(r["seconds"] for r in reports[mode]) for mode in MODES}
    for mode in MODES:
        print(f"{mode:>6}: median {median[mode]:.3f} s over {args.rounds} rounds")
    print(f"ratio hpcjax / floor: {median['hpcjax'] / median['floor']:.3f}  (goal <= 1.05)")
    print(f"ratio bare / floor:   {median['bare'] / median['floor']:.3f}")
    print(f"ratio hpcjax / bare:  {median['hpcjax'] / median['bare']:.3f}")
    # The interpreter's start and `import jax` are the same code in every mode and vary by 0.3-0.5 s
    # from job to job here: a median over a few rounds of the whole is mostly that noise. What hpcjax
    # adds is what comes after them: its initialize and first all-reduce against the floor's local op.
    after = {mode: statistics.median(r["seconds"] - r["phases"].get("python", 0.0) - r["phases"].get("import jax", 0.0)
                                     for r in reports[mode]) for mode in MODES}
    print(f"after import jax (median s): floor {after['floor']:.3f}, bare {after['bare']:.3f}, "
          f"hpcjax {after['hpcjax']:.3f}; hpcjax adds {after['hpcjax'] - after['floor']:+.3f} s to the floor's "
          f"{median['floor']:.3f} s: {(median['floor'] + after['hpcjax'] - after['floor']) / median['floor']:.3f}x "
          "with the same start and import")
    for mode in MODES:
        print(f"{mode:>6} phases (median s): " + ", ".join(f"{name} {s:.3f}" for name, s in
                                                           median_of(reports[mode], "phases").items()))
    print("hpcjax's initialize (median s): " + ", ".join(f"{name} {s:.3f}" for name, s in
                                                       median_of(reports["hpcjax"], "inside").items()))


if __name__ == "__main__":
    main()
