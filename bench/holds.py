"""What a held allocation saves (needs the dev cluster; --laptop also the sshd and cluster user that
scripts/test.sh sets up).

1. From `hpcjax submit` to the first line of every rank, 2 nodes x 4: `--on HOLD` against a fresh
   `submit --wait` of the same script, alternating in one run (the goal: at most 2 s plus the
   program's own start).
2. The edit-and-rerun loop of `hpcjax train`: a file of the project changed, then the same training
   run again in the hold (the jobs of a hold share one compilation cache), against a fresh
   submission with its own run directory; time to the first step (the goal: at most 0.3x), and
   the losses of both (the same).
3. With --laptop: the same from a laptop over SSH, and the bytes rsync sent for the one-file change.

Prints medians and ratios against the baseline measured in the same run; asserts nothing.
    python3 bench/holds.py [--rounds 3] [--laptop]
"""

from __future__ import annotations

import argparse
import json
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
LAYOUT = ["--nodes", "2", "--gpus-per-node", "4"]
FIRST_LINE = ["python3", "-c", "import os, time; print('first line', os.environ['SLURM_PROCID'], repr(time.time()))"]
TRAIN = ["python3", "-m", "hpcjax", "train", "--steps", "3", "--checkpoint-every", "0", "--seq-len", "32", "--d-model",
         "64", "--heads", "4", "--layers", "1", "--d-ff", "128", "--batch-size", "16", "--corpus-bytes", str(1 << 20)]


class Where:
    """This machine's SLURM, or the cluster over SSH from a laptop (cluster options, environment)."""

    def __init__(self, work: Path, env: dict, cluster: list[str]) -> None:
        self.work, self.env, self.cluster = work, env, cluster
        self.sent: list = []  # rsync's (files, bytes) of the last submission from a laptop

    def hpcjax(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        verb, rest = args[0], list(args[1:])
        done = subprocess.run([sys.executable, "-m", "hpcjax", verb, *self.cluster, *rest], cwd=self.work,
                              env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            sys.exit(f"hpcjax {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return done

    def logs(self, job: str, check: bool = True) -> str:
        return self.hpcjax("logs", job, check=check).stdout  # unchecked: none yet while it waits to start


def to_every_first_line(where: Where, *how: str) -> float:
    started = time.time()
    job = where.hpcjax("submit", *how, "--wait", "--", *FIRST_LINE).stdout.split()[0]
    stamps = [float(m) for m in re.findall(r"first line \d+ ([\d.]+)", where.logs(job))]
    if len(stamps) != 8:
        sys.exit(f"job {job}: {len(stamps)} ranks printed their first line, not 8")
    return max(stamps) - started


def to_first_step(where: Where, run_dir: str, *how: str) -> tuple[float, list[float]]:
    """Seconds from the submit to rank 0's first step line (its log polled every 0.1 s here, through
    `hpcjax logs` from a laptop), and the run's losses (its metrics.jsonl)."""
    started = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "hpcjax", "submit", *where.cluster, *how, "--wait", "--", *TRAIN,
                             "--run-dir", run_dir], cwd=where.work, env=where.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    job = proc.stdout.readline().strip()
    first = None
    while first is None and proc.poll() is None:
        log = where.logs(job, check=False) if where.cluster else next(
            (p.read_text() for p in (where.work / "hpcjax-logs").glob(f"{job}-rank0.log")), "")
        if re.search(r"step \d+/\d+ +loss", log):
            first = time.time() - started
        time.sleep(0.1)
    _, err = proc.communicate()
    where.sent = re.findall(r"sent (\d+) file\(s\), (\d+) bytes", err) or where.sent
    if proc.returncode != 0 or first is None:
        sys.exit(f"job {job} failed or never logged a step:\n{err[-3000:]}")
    if where.cluster:
        where.hpcjax("fetch", job, "--to", str(where.work / f"fetched-{job}"))
        path = next((where.work / f"fetched-{job}").rglob("metrics.jsonl"))
    else:
        path = where.work / run_dir / "metrics.jsonl"
    losses = [r["loss"] for r in map(json.loads, path.read_text().splitlines()) if "loss" in r and "step" in r]
    return first, losses


def bench(where: Where, rounds: int, hold: str) -> None:
    """Fresh submissions first, then the same in a hold (a hold of 2 x 4 takes every GPU of the dev
    cluster: a fresh job beside it would wait for it)."""
    fresh = [to_every_first_line(where, *LAYOUT) for _ in range(rounds)]
    fresh_t, fresh_losses = [], None
    for i in range(rounds):
        (where.work / "model_notes.py").write_text(f"# edit {i}\n")  # the one-file change of the loop
        t, fresh_losses = to_first_step(where, f"run-fresh-{i}", *LAYOUT)
        fresh_t.append(t)
    where.hpcjax("hold", "--name", hold, *LAYOUT, "--time", "00:30:00")
    try:
        held = [to_every_first_line(where, "--on", hold, *LAYOUT) for _ in range(rounds)]
        f, h = statistics.median(fresh), statistics.median(held)
        print(f"submit to every rank's first line (2 x 4): fresh {f:.2f} s, in the hold {h:.2f} s ({h / f:.2f}x)")
        cold, _ = to_first_step(where, "run-hold-0", "--on", hold, *LAYOUT)
        warm_t, same = [], True
        for i in range(rounds):
            (where.work / "model_notes.py").write_text(f"# edit {i}b\n")
            t, hold_losses = to_first_step(where, f"run-hold-{i + 1}", "--on", hold, *LAYOUT)
            warm_t.append(t)
            same = same and hold_losses == fresh_losses
        f, w = statistics.median(fresh_t), statistics.median(warm_t)
        print(f"hpcjax train, submit to the first step: fresh {f:.2f} s, rerun in the hold {w:.2f} s ({w / f:.2f}x); "
              f"the hold's first (cold) run {cold:.2f} s; losses the same as a fresh run's: {same}")
        if where.sent:
            files, sent = where.sent[-1]
            print(f"shipped for the one-file change: {files} file(s), {sent} bytes of file data (rsync)")
    finally:
        where.hpcjax("release", hold)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--laptop", action="store_true", help="from a laptop over the tests' sshd")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=str(DEVCLUSTER / "storage") if (DEVCLUSTER / "storage").is_dir() else None) as tmp:
        work = Path(tmp)
        env = {**os.environ, "HPCJAX_HOME": str(work / "home"), "PYTHONPATH": str(REPO)}
        if not args.laptop:
            bench(Where(work, env, []), args.rounds, f"bench{os.getpid()}")
            return 0
        from sshd import Sshd

        user = subprocess.run(["bash", str(REPO / "slurm/devcluster/cluster-user.sh")], capture_output=True,
                              text=True, check=True).stdout.strip()
        server = Sshd(DEVCLUSTER / "sshd", user, "python3")
        server.start()
        try:
            profiles = server.profiles(work / "profiles.toml")
            env.update(SLURM_CONF=str(work / "none.conf"))
            subprocess.run(["git", "init", "-q", str(work)], check=True)
            (work / ".gitignore").write_text("home/\nprofiles.toml\n")  # hpcjax's own files, not the project's
            where = Where(work, env, ["--cluster", "devcluster", "--profile-file", str(profiles)])
            bench(where, args.rounds, f"lap{os.getpid()}")
        finally:
            server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
