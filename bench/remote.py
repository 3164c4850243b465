"""From a laptop, over SSH (needs the dev cluster, sshd and the cluster user that
scripts/test.sh sets up): what the SSH transport costs.

1. `hpcjax status JOBID` over SSH with the shared connection open, against the same command
   run on the login node itself (here: the dev cluster's login node is this machine); the
   issue's goal is at most 1.5x.
2. A resubmission with unchanged code: bytes rsync sent against the tree's size (the goal is
   under 1 %), and with one file changed.

Prints ratios against the baseline measured in the same run; asserts nothing.
    python3 bench/remote.py [--rounds 10]
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
DEVCLUSTER = Path(os.environ.get("HPCJAX_DEVCLUSTER_DIR", "/var/lib/hpcjax-devcluster"))


def hpcjax(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcjax", *args], cwd=cwd, env=env, capture_output=True, text=True)


def timed(run, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        done = run()
        samples.append(time.perf_counter() - started)
        assert done.returncode == 0, done.stderr
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    rounds = parser.parse_args().rounds
    from sshd import Sshd

    user = subprocess.run(["bash", str(REPO / "slurm/devcluster/cluster-user.sh")], capture_output=True, text=True,
                          check=True).stdout.strip()
    server = Sshd(DEVCLUSTER / "sshd", user, "python3")
    server.start()
    try:
        with tempfile.TemporaryDirectory() as laptop:
            laptop = Path(laptop)
            env = {**os.environ, "HPCJAX_HOME": str(laptop / "home"), "SLURM_CONF": str(laptop / "none.conf"),
                   "PYTHONPATH": str(REPO)}
            profiles = server.profiles(laptop / "profiles.toml")
            where = ["--profile-file", str(profiles)]
            tree = laptop / "project"
            tree.mkdir()
            for i in range(200):  # a modest project: 200 files, 2 MB
                (tree / f"module_{i}.py").write_bytes(os.urandom(10_000))
            first = hpcjax("submit", "--profile", "devcluster", *where, "--", "true", cwd=tree, env=env)
            assert first.returncode == 0, first.stderr
            job = first.stdout.strip()
            hpcjax("status", job, cwd=tree, env=env)  # the connection is open from here on
            over_ssh = timed(lambda: hpcjax("status", job, cwd=tree, env=env), rounds)
            # The login node is this machine: the same command next to SLURM, no record (plain sbatch's path).
            here = {**env, "SLURM_CONF": str(DEVCLUSTER / "etc/slurm.conf"), "HPCJAX_HOME": str(laptop / "login")}
            login = timed(lambda: hpcjax("status", job, cwd=laptop, env=here), rounds)
            print(f"hpcjax status over SSH (shared connection): {over_ssh * 1000:.0f} ms; on the login node: "
                  f"{login * 1000:.0f} ms; ratio {over_ssh / login:.2f}x (goal <= 1.5x), median of {rounds}")
            size = sum(p.stat().st_size for p in tree.iterdir())
            for label, change in (("unchanged", None), ("one file changed", "module_7.py")):
                if change:
                    (tree / change).write_bytes(os.urandom(10_000))
                again = hpcjax("submit", "--profile", "devcluster", *where, "--", "true", cwd=tree, env=env)
                assert again.returncode == 0, again.stderr
                sent = int(re.search(r"sent \d+ file\(s\), (\d+) bytes", again.stderr)[1])
                print(f"resubmission, {label}: {sent} bytes sent of a {size / 1e6:.1f} MB tree "
                      f"({sent / size:.2%}; goal under 1 % unchanged)")
    finally:
        server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
