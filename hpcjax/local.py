"""The local backend: a job's N*G/K processes on this machine, without SLURM.

Each process gets the variables submitit's local executor sets (so the runtime
maps it through the same code as any submitit-local task), the layout
variables a rendered script exports, and K emulated GPUs as CPU devices; they
meet through real jax.distributed over loopback. Like `srun --kill-on-bad-exit`,
the first rank that fails stops the others.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpcjax.errors import UsageError
from hpcjax.jobs import rank_log_path
from hpcjax.spec import JobSpec

POLL_S = 0.2
STOP_GRACE_S = 5.0
# Variables of an enclosing SLURM job would make the runtime map the SLURM step
# instead of these local processes.
DROPPED_PREFIXES = ("SLURM_", "SLURMD_", "SUBMITIT_", "JAX_COORDINATOR", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES")


@dataclass
class LocalRun:
    job_id: str
    log_dir: Path
    exit_codes: dict[int, int | None] = field(default_factory=dict)
    first_failure: int | None = None  # the rank that failed by itself, before any were stopped
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(code == 0 for code in self.exit_codes.values())

    def log_path(self, rank: int) -> Path:
        return rank_log_path(self.log_dir, self.job_id, rank)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def check_local_spec(spec: JobSpec) -> None:
    if spec.container.runtime != "none":
        raise UsageError(f"the local backend runs the command bare, not through {spec.container.runtime}",
                         "drop --image/--runtime for --backend local, or submit to SLURM")
    program = spec.command[0]
    if shutil.which(program) is None:
        raise UsageError(f"the command {program!r} is not found on this machine",
                         "give a program on the PATH or a path to an executable file")
    if spec.modules:
        raise UsageError("the local backend cannot `module load` (that is the cluster's module system)",
                         "drop --module for --backend local, or submit to SLURM")


def rank_environment(spec: JobSpec, job_id: str, rank: int, port: int) -> dict[str, str]:
    layout = spec.layout
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED_PREFIXES)}
    env.update(dict(spec.env))
    env.update(
        HPCJAX_NODES=str(layout.nodes), HPCJAX_GPUS_PER_NODE=str(layout.gpus_per_node),
        HPCJAX_GPUS_PER_PROCESS=str(layout.gpus_per_process), HPCJAX_PLATFORM="cpu",
        HPCJAX_NODE_NAME=f"local{rank // layout.tasks_per_node}",
        SUBMITIT_LOCAL_JOB_ID=job_id, SUBMITIT_LOCAL_NTASKS=str(layout.num_processes),
        SUBMITIT_LOCAL_GLOBALID=str(rank), SUBMITIT_LOCAL_LOCALID=str(rank % layout.tasks_per_node),
        SUBMITIT_LOCAL_NODEID=str(rank // layout.tasks_per_node),
        SUBMITIT_LOCAL_JOB_NUM_NODES=str(layout.nodes), SUBMITIT_EXECUTOR="local",
        JAX_COORDINATOR_PORT=str(port), PYTHONUNBUFFERED="1",
    )
    return env


def run_local(spec: JobSpec, *, quiet: bool = False) -> LocalRun:
    """Run every rank of spec here; return when all ended (or one failed and the rest were stopped)."""
    check_local_spec(spec)
    run = LocalRun(job_id=str(os.getpid()), log_dir=Path(spec.output_dir).resolve())
    run.log_dir.mkdir(parents=True, exist_ok=True)
    port, procs = free_port(), {}
    say = (lambda text: None) if quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    say(f"local job {run.job_id}: {spec.layout.num_processes} processes ({spec.layout.name}, "
        f"{spec.layout.gpus_per_process} emulated GPU(s) each) on this machine; logs in {run.log_dir}/")
    try:
        for rank in range(spec.layout.num_processes):
            with open(run.log_path(rank), "w") as log:
                procs[rank] = subprocess.Popen(list(spec.command), stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL,
                                               env=rank_environment(spec, run.job_id, rank, port))
        _watch(run, procs, spec.time_seconds, say)
    finally:
        _stop(procs)
        run.exit_codes.update({rank: proc.returncode for rank, proc in procs.items()})
    say(f"local job {run.job_id}: " + ("COMPLETED" if run.ok else "TIMEOUT" if run.timed_out else "FAILED"))
    return run


def _watch(run: LocalRun, procs: dict[int, subprocess.Popen], limit_s: int, say) -> None:
    started = last_shown = time.monotonic()
    while True:
        codes = {rank: proc.poll() for rank, proc in procs.items()}  # poll every rank each round
        failed = [rank for rank, code in codes.items() if code not in (None, 0)]
        if failed:
            run.first_failure = failed[0]
            if any(code is None for code in codes.values()):
                say(f"rank {failed[0]} exited with code {codes[failed[0]]}: stopping the others")
            return
        if all(code is not None for code in codes.values()):
            return
        if time.monotonic() - started > limit_s:
            run.timed_out = True
            say(f"time limit of {limit_s} s reached: stopping every rank")
            return
        if time.monotonic() - last_shown >= 10:
            running = sum(code is None for code in codes.values())
            say(f"  {running} of {len(procs)} processes running [{time.monotonic() - started:.0f}s]")
            last_shown = time.monotonic()
        time.sleep(POLL_S)


def _stop(procs: dict[int, subprocess.Popen]) -> None:
    """SIGTERM whatever still runs, SIGKILL what ignores it."""
    alive = [p for p in procs.values() if p.poll() is None]
    for proc in alive:
        proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for proc in alive:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
