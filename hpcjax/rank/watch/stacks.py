"""The Python stacks of a job's ranks on one node, for `hpcjax stacks` (hpcjax.follow.stacks).

Run where the ranks run: on every node of a SLURM job through `srun --overlap --jobid`, or
on this machine for the local backend (`python -m hpcjax.rank.watch.stacks JOBID [--native]`).
A rank is found by what SLURM (or the local backend) put in its environment: SLURM_JOB_ID
and SLURM_PROCID, in a task of a step other than this one; of a rank's processes (a shell
that started Python, Python's own children) the topmost that py-spy can read is dumped.
A rank in a container is reached the same way: Apptainer and Charliecloud start it as a
process of this node (in its own namespaces), owned by the same user, which py-spy reads
through /proc (it needs ptrace permission: the same user, and a Yama ptrace_scope of 0, or
CAP_SYS_PTRACE). py-spy pauses each process for the moment it reads it (measured in
bench/stacks.py); nothing else is done to the ranks.

Prints one JSON object per rank on stdout: {"rank", "host", "pid", "threads": py-spy's} or
{"rank", "host", "error", "hint"}; {"host", "error", "hint"} when no rank runs here. Each
goes as short frames (hpcjax.values.jsonlines): srun merges every node's output and cuts long lines,
and a deep stack is a long line. Standard library only, plus the py-spy binary.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from hpcjax.protocol import contract, placement
from hpcjax.values import jsonlines
from hpcjax.values.voice import say

PY_SPY_ENV = "HPCJAX_PY_SPY"  # the py-spy binary, when it is not on PATH nor beside this Python
PTRACE_HINT = ("py-spy reads a process with ptrace: run `hpcjax stacks` as the job's user; where "
               "/proc/sys/kernel/yama/ptrace_scope is above 0 ask the site (or run the job with "
               "CAP_SYS_PTRACE); in a container started by Docker/enroot add --cap-add SYS_PTRACE")


def py_spy() -> str | None:
    given = os.environ.get(PY_SPY_ENV)
    if given:
        return given if os.access(given, os.X_OK) else None
    beside = Path(sys.executable).parent / "py-spy"  # pip installs it beside the interpreter
    return shutil.which("py-spy") or (str(beside) if beside.exists() else None)


def environ_of(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or another user's
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def parent_of(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def rank_processes(job_id: str, own_step: str | None) -> dict[int, list[int]]:
    """rank -> its processes on this node, topmost first. Where several slurmd share one host
    (a test cluster) a node's ranks are those SLURM started as this node."""
    node = placement.slurm_node_name()
    found: dict[int, dict[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        env = environ_of(int(entry.name))
        if job_id not in (env.get("SLURM_JOB_ID"), contract.job_key(env)) or not env.get("SLURM_PROCID", "").isdigit():
            continue  # not a rank of this job (an array element is named A_i, as its logs are)
        if node and placement.slurm_node_name(env) not in (None, node):
            continue
        step = env.get("SLURM_STEP_ID")
        if own_step is not None and (step is None or step == own_step or not step.isdigit()):
            continue  # the batch script, srun itself, or this very step
        found.setdefault(int(env["SLURM_PROCID"]), {})[int(entry.name)] = parent_of(int(entry.name))
    ordered = {}
    for rank, pids in found.items():
        depth = {pid: _depth(pid, pids) for pid in pids}
        ordered[rank] = sorted(pids, key=lambda pid: (depth[pid], pid))
    return ordered


def _depth(pid: int, family: dict[int, int]) -> int:
    depth = 0
    while family.get(pid) in family:
        pid, depth = family[pid], depth + 1
    return depth


def dump(pid: int, native: bool) -> tuple[list | None, str]:
    """(py-spy's threads, '') or (None, why not)."""
    argv = [py_spy() or "py-spy", "dump", "--pid", str(pid), "--json"] + (["--native"] if native else [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if done.returncode == 0:
        try:
            return json.loads(done.stdout), ""
        except ValueError:
            return None, f"py-spy printed no stacks for pid {pid}"
    said = (done.stderr.strip() or done.stdout.strip()).splitlines()
    return None, f"pid {pid}: {said[-1] if said else f'py-spy exited {done.returncode}'}"


def node_stacks(job_id: str, own_step: str | None, native: bool = False) -> list[dict]:
    host = placement.node_name()
    if py_spy() is None:
        return [{"host": host, "error": f"py-spy is not installed on {host}",
                 "hint": f"pip install py-spy into the Python the nodes use (or set {PY_SPY_ENV})"}]
    ranks = rank_processes(job_id, own_step)
    if not ranks:
        return [{"host": host, "error": f"no rank of job {job_id} runs on {host}",
                 "hint": "the job may have ended, or run its ranks as another user"}]
    out = []
    for rank, pids in sorted(ranks.items()):
        why = ""
        for pid in pids:
            threads, why = dump(pid, native)
            if threads is not None:
                out.append({"rank": rank, "host": host, "pid": pid, "threads": threads})
                break
        else:
            denied = "ermission" in why or "ptrace" in why.lower()
            out.append({"rank": rank, "host": host, "error": why,
                        "hint": PTRACE_HINT if denied else "is the rank a Python process? py-spy reads Python only"})
    return out


def main(argv: list[str]) -> int:
    if not argv or not argv[0]:
        say("usage: python -m hpcjax.rank.watch.stacks JOBID [--native]")
        return 2
    own_step = os.environ.get("SLURM_STEP_ID") if os.environ.get("SLURM_JOB_ID") == argv[0] else None
    sender = re.sub(r"[^A-Za-z0-9_.:-]", "_", placement.node_name())
    for number, entry in enumerate(node_stacks(argv[0], own_step, native="--native" in argv)):
        for line in jsonlines.frame(entry, sender, number):
            sys.stdout.write(line + "\n")  # one write per line: srun passes whole short lines
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
