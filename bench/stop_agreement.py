"""The cost of stopping at any step: the training loop's step time with hpcjax's
per-step stop agreement, over the same loop without any check, measured in the
same job (and, for comparison, a device all-gather of the flag each step).

    python bench/stop_agreement.py [--backend local|slurm] [--steps 20] [--rounds 3]

4 processes x 1 emulated GPU (the local backend: this machine's CPU; slurm: the
dev cluster's 2 nodes). Prints ms/step per variant and the ratio to no check.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from hpcjax import launch
from hpcjax.job.spec import JobSpec, Layout

RANK = Path(__file__).resolve().parent / "_stop_rank.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="local")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as logs:
        spec = JobSpec(command=(sys.executable, str(RANK), str(args.steps), str(args.rounds)),
                       layout=Layout(nodes=2, gpus_per_node=2), output_dir=logs, time="00:20:00")
        run = launch.submit(spec, args.backend)
        run.wait().raise_if_failed()
        result = json.loads(run.logs(rank=0).strip().splitlines()[-1])
    base = result["none"]
    print(f"{'check each step':<20} {'ms/step':>8} {'ratio':>7}")
    for name, seconds in result.items():
        print(f"{name:<20} {seconds * 1000:8.2f} {seconds / base:7.3f}")


if __name__ == "__main__":
    main()
