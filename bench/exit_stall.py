"""How long a finished program holds its job at exit: the demo's shape (a plain
`jax.distributed.initialize()`, a sharded sum, a line printed; tests/data/exit_stall_program.py),
2 nodes x 4 ranks on the dev cluster, under plain `sbatch` + `srun` (no hpcjax at all) and under
`hpcjax submit`, in alternating rounds; then the same with a stand-in for the stall (JAX's own
shutdown delayed by --stall seconds in the program: the natural stall did not happen here).
Prints, per setting, the median seconds from the last rank's last line to the job's end
(sacct's End, whole seconds) and hpcjax's over bare's.

    bash slurm/devcluster/up.sh && python bench/exit_stall.py [--rounds 3] [--stall 60]
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

PROGRAM = Path(__file__).resolve().parent.parent / "tests" / "data" / "exit_stall_program.py"
LAST_LINE = re.compile(r"last line at ([0-9.]+): process \d+")
BARE = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --time=00:10:00
#SBATCH --output={out}/bare-%j.log
export JAX_PLATFORMS=cpu STALL_S={stall}
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


def bare(out: Path, stall: int) -> float:
    script = out / "bare.sbatch"
    script.write_text(BARE.format(out=out, stall=stall, program=PROGRAM))
    job = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True,
                         check=True).stdout.strip()
    end = ended(job)
    return end - last_line([(out / f"bare-{job}.log").read_text()])


def hpcjax(out: Path, stall: int) -> float:
    result = subprocess.run([sys.executable, "-m", "hpcjax", "submit", "--nodes", "2", "--gpus-per-node", "4",
                             "--time", "00:10:00", "--env", f"STALL_S={stall}", "--wait", "--",
                             "python3", str(PROGRAM)], capture_output=True, text=True, cwd=out)
    job = result.stdout.strip().splitlines()[0]
    end = ended(job)
    return end - last_line([log.read_text() for log in (out / "hpcjax-logs").glob(f"{job}-rank*.log")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stall", type=int, default=60, help="the stand-in's delay of JAX's shutdown (s)")
    args = parser.parse_args()
    os.environ.setdefault("SLURM_CONF", "/var/lib/hpcjax-devcluster/etc/slurm.conf")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        out = Path(tmp)
        out.chmod(0o755)
        for stall, rounds in ((0, args.rounds), (args.stall, max(1, args.rounds - 1))):
            seconds: dict[str, list[float]] = {"bare": [], "hpcjax": []}
            for i in range(rounds):
                for name, run in ((("bare", bare), ("hpcjax", hpcjax)) if i % 2 == 0
                                  else (("hpcjax", hpcjax), ("bare", bare))):
                    seconds[name].append(run(out, stall))
                    print(f"stall {stall:>3} s, round {i + 1}, {name:>6}: {seconds[name][-1]:.1f} s from the last "
                          "line to the job's end", file=sys.stderr)
            b, h = statistics.median(seconds["bare"]), statistics.median(seconds["hpcjax"])
            what = "the demo as is" if not stall else f"JAX's shutdown delayed {stall} s (stand-in)"
            print(f"{what}: last line to the job's end, median of {rounds}: bare srun {b:.1f} s, "
                  f"hpcjax {h:.1f} s, ratio {h / b:.2f}")


if __name__ == "__main__":
    main()
