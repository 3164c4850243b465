"""The local backend: a job's N*G/K processes on this machine, without SLURM.

Each process gets the variables submitit's local executor sets (so the rank
side maps it through the same reader as any submitit-local task), the layout
variables a rendered script exports, and K emulated GPUs as CPU devices; they
meet through real jax.distributed over loopback. Like `srun --kill-on-bad-exit`,
the first rank that fails stops the others. The processes are children of the
submitting process: it follows them (`wait`) and stops them if it is stopped.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from hpcjax import contract
from hpcjax.errors import HpcjaxError, UsageError
from hpcjax.launch import records
from hpcjax.launch.outcome import Outcome, TaskEvent, analyze
from hpcjax.launch.run import Run, say
from hpcjax.launch.spec import JobSpec

STOP_GRACE_S = 5.0
# Variables of an enclosing SLURM job would make the runtime map the SLURM step
# instead of these local processes.
DROPPED_PREFIXES = ("SLURM_", "SLURMD_", "SUBMITIT_", "JAX_COORDINATOR", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES",
                    "JAX_LOCAL_DEVICE_IDS")


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
    if spec.requeue:
        raise UsageError("the local backend does not requeue: --requeue is the SLURM job requeueing itself",
                         "drop --requeue for --backend local (run again to resume from the checkpoint), "
                         "or submit to SLURM")
    if spec.array:
        raise UsageError("the local backend runs one job at a time, not a SLURM job array",
                         "submit each element as its own job (hpcjax's remote .map does this)")
    if spec.modules:
        raise UsageError("the local backend cannot `module load` (that is the cluster's module system)",
                         "drop --module for --backend local, or submit to SLURM")


def rank_environment(spec: JobSpec, job_id: str, rank: int, port: int) -> dict[str, str]:
    layout = spec.layout
    per_node = layout.tasks_per_node
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED_PREFIXES)}
    env.update(dict(spec.env))
    env.update(contract.layout_env(layout.nodes, layout.gpus_per_node, layout.gpus_per_process))
    env.update({contract.PLATFORM_ENV: "cpu", contract.NODE_NAME_ENV: contract.local_node_name(rank, per_node)})
    env.update(
        SUBMITIT_LOCAL_JOB_ID=job_id, SUBMITIT_LOCAL_NTASKS=str(layout.num_processes),
        SUBMITIT_LOCAL_GLOBALID=str(rank), SUBMITIT_LOCAL_LOCALID=str(rank % per_node),
        SUBMITIT_LOCAL_NODEID=str(rank // per_node),
        SUBMITIT_LOCAL_JOB_NUM_NODES=str(layout.nodes), SUBMITIT_EXECUTOR="local",
        JAX_COORDINATOR_PORT=str(port), PYTHONUNBUFFERED="1",
    )
    env.update(plain_jax_environment(spec, job_id, rank, port))
    return env


def plain_jax_environment(spec: JobSpec, job_id: str, rank: int, port: int) -> dict[str, str]:
    """What makes a plain `jax.distributed.initialize()` right on this machine's CPU.
    JAX reads the coordinator and the device ids from its own variables and the device
    count from its configuration, but the process count and id only from a cluster it
    detects: so each rank is also presented as a task of a one-node SLURM step (the five
    variables JAX's SLURM detection reads, nothing else of SLURM's). The coordinator is
    given explicitly, so the node list is never parsed."""
    layout = spec.layout
    return {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_PLATFORMS": "cpu",
            "JAX_LOCAL_DEVICE_IDS": contract.jax_local_device_ids(layout.gpus_per_process),
            "JAX_NUM_CPU_DEVICES": str(layout.gpus_per_process),
            "SLURM_JOB_ID": job_id, "SLURM_STEP_NODELIST": "localhost", "SLURM_NTASKS": str(layout.num_processes),
            "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank % layout.tasks_per_node)}


def submit(spec: JobSpec) -> "LocalRun":
    """Start every rank of spec here; return the Run that follows them."""
    check_local_spec(spec)
    job_id = records.new_local_id(int(time.time() * 1000))
    log_dir = Path(spec.output_dir).resolve()
    log_dir.mkdir(parents=True, exist_ok=True)
    run = LocalRun(job_id, log_dir, spec.layout.num_processes, spec.layout.tasks_per_node, spec.time_seconds)
    port = free_port()
    say(f"local job {job_id}: {spec.layout.num_processes} processes ({spec.layout.name}, "
        f"{spec.layout.gpus_per_process} emulated GPU(s) each) on this machine; logs in {log_dir}/")
    try:
        for rank in range(spec.layout.num_processes):
            with open(contract.rank_log_path(log_dir, job_id, rank), "w") as log:
                run.procs[rank] = subprocess.Popen(list(spec.command), stdout=log, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL,
                                                   env=rank_environment(spec, job_id, rank, port))
    except BaseException:
        run.stop_all()
        raise
    records.save(job_id, {"backend": "local", "output_dir": str(log_dir), "layout": asdict(spec.layout),
                          "state": "RUNNING", "pids": [p.pid for p in run.procs.values()]})
    return run


class LocalRun(Run):
    backend = "local"
    poll_s = 0.2

    def __init__(self, job_id: str, log_dir: Path, num_ranks: int, tasks_per_node: int,
                 limit_s: float | None = None) -> None:
        super().__init__(job_id, log_dir, num_ranks)
        self.tasks_per_node, self.limit_s = tasks_per_node, limit_s
        self.procs: dict[int, subprocess.Popen] = {}
        self.started = time.monotonic()
        self.causes: list[int] = []  # the ranks that failed by themselves, before any were stopped
        self.final = ""  # the state once every rank has ended
        self.record: dict | None = None  # set when attached from another process

    @classmethod
    def attach(cls, job_id: str, record: dict) -> "LocalRun":
        """A local job from its record: followed by the process that started it."""
        layout = record["layout"]
        run = cls(job_id, Path(record["output_dir"]), layout["nodes"] * layout["gpus_per_node"]
                  // layout["gpus_per_process"], layout["gpus_per_node"] // layout["gpus_per_process"])
        run.record = record
        return run

    def poll(self) -> tuple[str, str]:
        if self.record is not None:  # another process follows the job: its record is the news
            self.record = records.load(self.job_id) or self.record
            state = self.record.get("state", "RUNNING")
            return state, state
        if not self.final:
            self.final = self._watch()
        if self.final:
            return self.final, self.final
        running = sum(p.poll() is None for p in self.procs.values())
        return "RUNNING", f"RUNNING: {running} of {len(self.procs)} processes on this machine"

    def _watch(self) -> str:
        """'' while the job runs; its final state once every rank has ended."""
        codes = {rank: proc.poll() for rank, proc in self.procs.items()}  # every rank each round
        failed = [rank for rank, code in codes.items() if code not in (None, 0)]
        if failed:
            self.causes = failed
            if any(code is None for code in codes.values()):
                say(f"rank {failed[0]} exited with code {codes[failed[0]]}: stopping the others")
            return self._end("CANCELLED" if (records.load(self.job_id) or {}).get("cancelled") else "FAILED")
        if all(code is not None for code in codes.values()):
            return self._end("COMPLETED")
        if self.limit_s is not None and time.monotonic() - self.started > self.limit_s:
            say(f"time limit of {self.limit_s:g} s reached: stopping every rank")
            return self._end("TIMEOUT")
        return ""

    def _end(self, state: str) -> str:
        self.stop_all()
        records.update(self.job_id, state=state, causes=self.causes,
                       exit_codes={r: p.returncode for r, p in self.procs.items()})
        return state

    def stop_all(self) -> None:
        """SIGTERM whatever still runs, SIGKILL what ignores it."""
        alive = [p for p in self.procs.values() if p.poll() is None]
        for proc in alive:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in alive:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def cancel(self) -> None:
        if self.record is None:
            records.update(self.job_id, cancelled=True)
            self.stop_all()
            self.final = self._end("CANCELLED")
            return
        if self.record.get("state") != "RUNNING":
            raise HpcjaxError(f"local job {self.job_id} has already ended ({self.record.get('state')}); "
                              "nothing to cancel", f"see `hpcjax status {self.job_id}`")
        records.update(self.job_id, cancelled=True)  # the process that follows the job reports it
        for pid in self.record.get("pids", []):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def hosts(self) -> dict[int, str]:
        return {rank: contract.local_node_name(rank, self.tasks_per_node) for rank in range(self.num_ranks)}

    def _finish(self, state: str) -> Outcome:
        record = self.record or {}
        codes = {int(r): c for r, c in record.get("exit_codes", {}).items()} or \
            {rank: proc.returncode for rank, proc in self.procs.items()}
        causes = self.causes or record.get("causes", [])
        events = [TaskEvent((rank,), contract.local_node_name(rank, self.tasks_per_node), exit_words(code),
                            before_stop=rank in causes)
                  for rank, code in sorted(codes.items()) if code not in (None, 0)]
        note = {"TIMEOUT": f"the time limit ({self.limit_s or '?'} s) was reached: every rank was stopped",
                "CANCELLED": "the job was cancelled: every rank was stopped"}.get(state, "")
        return analyze(self.job_id, state, events, self._rank_log,
                       job_exit_code=codes.get(causes[0], 1) if causes else 1, stopped_by="hpcjax", note=note)

    def _rank_log(self, rank: int) -> Path:
        return contract.rank_log_path(self.log_dir, self.job_id, rank)


def exit_words(code: int) -> str:
    """A process's end in srun's words."""
    if code < 0:
        try:
            return f"Killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"Killed by signal {-code}"
    return f"Exited with exit code {code}"
