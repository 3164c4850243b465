"""How long a finished program holds its job at exit (issue 48): the usual multi-host script's
shape, unmodified (tests/data/exit_stall_program.py: its last collective still in flight when it
returns), 2 nodes x 4 ranks per node on the dev cluster, under plain `sbatch` + `srun` (no hpcjax
at all) and under `hpcjax submit`, in alternating rounds. Prints each job's seconds from the last
rank's last line to the job's end (sacct's End, whole seconds), how many of them stalled (over
60 s), the medians and hpcjax's over bare's.

    bash slurm/devcluster/up.sh && python bench/exit_stall.py [--rounds 4]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
PROGRAM = DATA / "exit_stall_program.py"
LAST_LINE = re.compile(r"last line at ([0-9.]+): process \d+")
STALLED_S = 60  # a job that ends this long after its last line stalled (the stall seen is ~155 s)
BARE = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gres=gpu:4
#SBATCH --time=00:10:00
#SBATCH --output={out}/bare-%j.log
export JAX_PLATFORMS=cpu
srun python3 {program}
"""


def ended(job: str) -> float:
    while True:
        row = subprocess.run(["sacct", "-X", "-n", "-P", "-j", job, "-o", "State,End"], capture_output=True,
                             text=True).stdout.strip()
        state, _, end = row.partition("|")
        if end and end != "Unknown" and state not in ("RUNNING", "PENDING", "COMPLETING"):
            return datetime.fromisoformat(end).timestamp() + 1  # the end of that second
        time.sleep(1)


def last_line(texts: list[str]) -> float:
    found = [float(m.group(1)) for text in texts for m in LAST_LINE.finditer(text)]
    assert len(found) == 8, found
    return max(found)


def bare(out: Path) -> float:
    script = out / "bare.sbatch"
    script.write_text(BARE.format(out=out, program=PROGRAM))
    job = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True,
                         check=True).stdout.strip()
    end = ended(job)
    return end - last_line([(out / f"bare-{job}.log").read_text()])


def hpcjax(out: Path) -> float:
    result = subprocess.run([sys.executable, "-m", "hpcjax", "submit", "--nodes", "2", "--gpus-per-node", "4",
                             "--time", "00:10:00", "--wait", "--", "python3", str(PROGRAM)],
                            capture_output=True, text=True, cwd=out)
    job = result.stdout.strip().splitlines()[0]
    end = ended(job)
    return end - last_line([log.read_text() for log in (out / "hpcjax-logs").glob(f"{job}-rank*.log")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    os.environ.setdefault("SLURM_CONF", "/var/lib/hpcjax-devcluster/etc/slurm.conf")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        out = Path(tmp)
        out.chmod(0o755)
        seconds: dict[str, list[float]] = {"bare": [], "hpcjax": []}
        for i in range(args.rounds):
            for name, run in ((("bare", bare), ("hpcjax", hpcjax)) if i % 2 == 0
                              else (("hpcjax", hpcjax), ("bare", bare))):
                seconds[name].append(run(out))
                print(f"round {i + 1}, {name:>6}: {seconds[name][-1]:.1f} s from the last line to the job's end",
                      file=sys.stderr)
        for name, figures in seconds.items():
            stalled = sum(s > STALLED_S for s in figures)
            print(f"{name:>6}: {stalled} of {len(figures)} jobs stalled (> {STALLED_S} s); last line to the job's "
                  f"end: {', '.join(f'{s:.0f}' for s in figures)} s, median {statistics.median(figures):.1f} s")
        b, h = statistics.median(seconds["bare"]), statistics.median(seconds["hpcjax"])
        print(f"median, hpcjax over bare: {h / b:.2f}")


if __name__ == "__main__":
    main()
