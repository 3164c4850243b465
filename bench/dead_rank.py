"""A dead rank, phase by phase (issue 27, part 3): rank 3 of 8 (2 nodes x 4 on the dev cluster)
kills itself with SIGKILL while the others wait, and `hpcjax submit --wait` must end with the
report soon after (the goal: within 2 s of the death). Each round times, on one clock:

    submitted   `hpcjax submit` started -> it printed the job id (sbatch accepted the job)
    started     -> every rank printed its first line (the job ran and the ranks came up)
    death       -> rank 3 died (it prints the time, then kills itself)
    srun        -> the batch log says srun saw the task die (polled every 20 ms here)
    reported    -> `hpcjax submit --wait` exited with the report (the follower's polling and
                   the failure analysis)

for a plain Python program and for one in JAX's distributed runtime (the others wait in a
collective). Needs the dev cluster (SLURM_CONF). Prints medians of each phase; asserts nothing.
    python3 bench/dead_rank.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEVCLUSTER = Path(os.environ.get("HPCJAX_DEVCLUSTER_DIR", "/var/lib/hpcjax-devcluster"))
PLAIN = """
import os, time
rank = int(os.environ["SLURM_PROCID"])
print("up", time.time(), flush=True)
time.sleep(4)
if rank == 3:
    print("dying", time.time(), flush=True)
    os.kill(os.getpid(), 9)
time.sleep(300)
"""
JAX = """
import os, time
from hpcjax.rank import initialize
initialize()
import jax, jax.numpy as jnp
mesh = jax.sharding.Mesh(jax.devices(), ("d",))
x = jax.device_put(jnp.ones(jax.device_count()), jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d")))
float(jnp.sum(x))
print("up", time.time(), flush=True)
time.sleep(4)
if jax.process_index() == 3:
    print("dying", time.time(), flush=True)
    os.kill(os.getpid(), 9)
while True:
    float(jnp.sum(x))
    time.sleep(0.01)
"""


def first_time(log: Path, word: str) -> float | None:
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if line.startswith(word + " "):
            return float(line.split()[1])
    return None


def one_round(work: Path, program: str) -> dict[str, float]:
    (work / "p.py").write_text(program)
    logs = work / "hpcjax-logs"
    env = {**os.environ, "HPCJAX_HOME": str(work / "home")}
    start = time.time()
    job = subprocess.Popen([sys.executable, "-m", "hpcjax", "submit", "--nodes", "2", "--gpus-per-node", "4",
                            "--wait", "--", sys.executable, "p.py"], cwd=work, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
    job_id = job.stdout.readline().strip()
    submitted = time.time()
    batch, srun_saw = logs / f"{job_id}-batch.log", None
    while job.poll() is None:
        if srun_saw is None and batch.exists() and "srun: error" in batch.read_text(errors="replace"):
            srun_saw = time.time()
        time.sleep(0.02)
    reported = time.time()
    ups = [first_time(logs / f"{job_id}-rank{r}.log", "up") for r in range(8)]
    died = first_time(logs / f"{job_id}-rank3.log", "dying")
    if None in ups or died is None or srun_saw is None:
        raise SystemExit(f"job {job_id} did not run as planned (logs in {logs})")
    return {"submitted": submitted - start, "started": max(ups) - submitted, "death": died - max(ups),
            "srun": srun_saw - died, "reported": reported - max(srun_saw, died), "death to report": reported - died}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("SLURM_CONF", str(DEVCLUSTER / "etc" / "slurm.conf"))
    storage = DEVCLUSTER / "storage"
    for name, program in (("plain Python", PLAIN), ("JAX distributed", JAX)):
        rounds = []
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory(dir=storage) as work:
                rounds.append(one_round(Path(work), program))
        print(f"{name}, rank 3 of 8 killed (SIGKILL), median of {args.rounds} rounds:")
        for phase in rounds[0]:
            values = [r[phase] for r in rounds]
            print(f"  {phase:<16} {statistics.median(values):6.2f} s   (rounds: "
                  + ", ".join(f"{v:.2f}" for v in values) + ")")


if __name__ == "__main__":
    main()
