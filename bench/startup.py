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

    bash slurm/devcluster/up.sh && python bench/startup.py [--rounds 4] [--gpus-per-node 1]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--gpus-per-node", type=int, default=1,
                        help="ranks per node (1: one rank per core of this 2-core machine, as issue 64 measures)")
    args = parser.parse_args()
    reports: dict[str, list[dict]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp:
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
    for mode in MODES:
        print(f"{mode:>6} phases (median s): " + ", ".join(f"{name} {s:.3f}" for name, s in
                                                           median_of(reports[mode], "phases").items()))
    print("hpcjax's initialize (median s): " + ", ".join(f"{name} {s:.3f}" for name, s in
                                                       median_of(reports["hpcjax"], "inside").items()))


if __name__ == "__main__":
    main()
