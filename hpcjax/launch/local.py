"""The local backend: a job's N*G/K processes on this machine, without SLURM.

Each process gets the variables submitit's local executor sets (so the rank
side maps it through the same reader as any submitit-local task), the layout
variables a rendered script exports, and K emulated GPUs as CPU devices; they
meet through real jax.distributed over loopback. Like `srun --kill-on-bad-exit`,
the first rank that fails stops the others. The processes are children of the
submitting process: it follows them and stops them if it is stopped; at exit it
waits for the jobs it started (no rank is orphaned, no record left RUNNING).
A job array's elements (launch.localqueue) are jobs named A_i, as SLURM names them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from hpcjax import contract, shellword
from hpcjax.catalog import records
from hpcjax.errors import HpcjaxError, UsageError
from hpcjax.launch import chains, runs
from hpcjax.launch.outcome import Outcome, TaskEvent, analyze, exit_words
from hpcjax.launch.run import Run, say
from hpcjax.launch.spec import JobSpec
from hpcjax.validate import make_directory

STOP_GRACE_S = 5.0
# Variables of an enclosing SLURM job would make the runtime map the SLURM step
# instead of these local processes.
DROPPED_PREFIXES = ("SLURM_", "SLURMD_", "SUBMITIT_", "JAX_COORDINATOR", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES",
                    "JAX_LOCAL_DEVICE_IDS")


def check_local_spec(spec: JobSpec) -> None:
    if spec.container.in_container:
        raise UsageError(f"the local backend runs the command bare, not through {spec.container.runtime}",
                         "drop --image/--runtime for --backend local, or submit to SLURM")
    most = max(64, 8 * (os.cpu_count() or 1))  # more is a typo, not a job for one machine
    if spec.layout.num_processes > most:
        raise UsageError(f"the local backend would start {spec.layout.num_processes} processes on this machine "
                         f"(at most {most} here)", "check --nodes and --gpus-per-node, or submit to SLURM")
    program = spec.command[0]
    if shutil.which(program) is None:
        raise UsageError(f"the command {program!r} is not found on this machine",
                         "give a program on the PATH or a path to an executable file")
    if spec.requeue:
        raise UsageError("the local backend does not requeue: --requeue is the SLURM job requeueing itself",
                         "drop --requeue for --backend local (run again to resume from the checkpoint), "
                         "or submit to SLURM")
    if spec.modules:
        raise UsageError("the local backend cannot `module load` (that is the cluster's module system)",
                         "drop --module for --backend local, or submit to SLURM")


def rank_environment(spec: JobSpec, job_id: str, rank: int, port: int) -> dict[str, str]:
    layout = spec.layout
    array_job, _, index = job_id.partition("_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED_PREFIXES)}
    for key, value in spec.env:  # in order, as the batch script exports them
        env[key] = shellword.expand(value, env)
    env.update(layout.env())
    env.update({contract.PLATFORM_ENV: "cpu", contract.NODE_NAME_ENV: contract.local_node_name(rank, layout),
                contract.LOG_DIR_ENV: str(Path(spec.output_dir).resolve())})
    env.update(
        SUBMITIT_LOCAL_JOB_ID=array_job, SUBMITIT_LOCAL_NTASKS=str(layout.num_processes),
        SUBMITIT_LOCAL_GLOBALID=str(rank), SUBMITIT_LOCAL_LOCALID=str(rank % layout.tasks_per_node),
        SUBMITIT_LOCAL_NODEID=str(layout.node_of(rank)),
        SUBMITIT_LOCAL_JOB_NUM_NODES=str(layout.nodes), SUBMITIT_EXECUTOR="local",
        JAX_COORDINATOR_PORT=str(port), PYTHONUNBUFFERED="1",
    )
    if index:  # an element of a job array, as SLURM tells it
        env.update(SLURM_ARRAY_JOB_ID=array_job, SLURM_ARRAY_TASK_ID=index,
                   SLURM_ARRAY_TASK_COUNT=str(spec.array), SLURM_ARRAY_TASK_MIN="0",
                   SLURM_ARRAY_TASK_MAX=str(spec.array - 1))
    env.update(plain_jax_environment(spec, array_job, rank, port))
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


def submit(spec: JobSpec, announce=None) -> "LocalRun":
    """Start every rank of spec here; return the Run that follows them (`announce(job_id)` first)."""
    check_local_spec(spec)
    if spec.array:
        raise UsageError("a job array has one Run per element", "submit it with launch.submit_array(spec)")
    chains.check_known(spec.after, lambda job: chains.local_state(job, started_here), "this machine")
    make_directory(spec.output_dir, "--output-dir")
    run = LocalRun(records.new_local_id(int(time.time() * 1000)), spec)
    if spec.after:  # as SLURM's --dependency: it waits, then starts or is cancelled
        run.save_record("PENDING")
        _started_here.append(run)
        threading.Thread(target=chains.start_after, args=(run, started_here), name=f"hpcjax-local-after-{run.job_id}",
                         daemon=True).start()
    else:
        run.start()
    if announce is not None:
        announce(run.job_id)
    return run


class LocalRun(Run):
    """A job of the local backend: PENDING until `start` (an array element waits its turn),
    then its processes, followed by `poll`. Safe to poll from several threads."""

    backend = "local"
    poll_s = 0.2

    def __init__(self, job_id: str, spec: JobSpec | None, *, log_dir: Path | None = None,
                 layout: contract.Layout | None = None, record: dict | None = None, element: int | None = None) -> None:
        layout = layout or spec.layout
        super().__init__(job_id, log_dir or Path(spec.output_dir).resolve(), layout.num_processes)
        self.spec, self.layout = spec, layout
        self.limit_s = spec.time_seconds if spec else None
        self.procs: dict[int, subprocess.Popen] = {}
        self.started = None  # monotonic time of start(); None while pending
        self.causes: list[int] = []  # the ranks that failed by themselves, before any were stopped
        self.final = ""  # the state once every rank has ended (or the job was cancelled before starting)
        self.record = record  # set when attached from another process: its record is the news
        self.start_error = ""  # why the processes could not be started, if they could not
        # what the catalog keeps of the submission; a sweep's element runs its own command
        self.submitted = runs.submission(spec, element, job_id.split("_")[0]) if spec else {}
        self.command = tuple(self.submitted["command"]) if spec else ()
        self.started_at = None  # time.time() of start(), for the catalog's attempt
        self.waiting_for = "a free slot of its job array"
        self.lock = threading.RLock()

    @classmethod
    def attach(cls, job_id: str, record: dict) -> "LocalRun":
        """A local job from its record: followed by the process that started it."""
        run = cls(job_id, None, log_dir=Path(record["output_dir"]),
                  layout=contract.Layout.from_dict(record["layout"]), record=record)
        run.run_dir = record.get("run_dir")
        return run

    def save_record(self, state: str) -> None:
        """The job's record and its row in the catalog of runs (launch.runs)."""
        runs.record(self.job_id, {"backend": "local", "output_dir": str(self.log_dir),
                                  "layout": self.layout.as_dict(), "state": state,
                                  "pids": [p.pid for p in self.procs.values()], **self.submitted,
                                  **({"started": self.started_at, "nodelist": f"local[0-{self.layout.nodes - 1}]"}
                                     if self.started_at else {})})

    def start(self) -> None:
        """Start every rank (once); a job cancelled while pending never starts."""
        with self.lock:
            if self.started is not None or self.final:
                return
            if self.cancelled_elsewhere():
                self.end_unstarted("CANCELLED", "cancelled while it waited to start")
                return
            self.log_dir.mkdir(parents=True, exist_ok=True)
            port = contract.free_port()
            say(f"local job {self.job_id}: {self.layout.described} (emulated) on this machine; "
                f"logs in {self.log_dir}/")
            self.started = time.monotonic()
            try:
                for rank in range(self.num_ranks):
                    with open(contract.rank_log_path(self.log_dir, self.job_id, rank), "w") as log:
                        self.procs[rank] = subprocess.Popen(
                            list(self.command), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=rank_environment(self.spec, self.job_id, rank, port))
            except BaseException:
                self.stop_all()
                raise
            self.started_at = time.time()
            self.save_record("RUNNING")
            _started_here.append(self)

    def cancelled_elsewhere(self) -> bool:
        """`hpcjax cancel` from another process marks the record: the process that follows the job acts."""
        return bool((records.load(self.job_id) or {}).get("cancelled"))

    def end_unstarted(self, state: str, why: str) -> None:
        """End a job that did not start (CANCELLED: a dependency did not end as asked; FAILED: its
        processes could not be started), saying why."""
        with self.lock:
            self.start_error = why
            self.stop_all()
            self.final = self._end(state)

    def poll(self) -> tuple[str, str]:
        if self.record is not None:
            self.record = records.load(self.job_id) or self.record
            state = self.record.get("state", "RUNNING")
            return state, state
        with self.lock:
            if self.started is None and not self.final:
                return "PENDING", f"PENDING (waiting for {self.waiting_for})"
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
        runs.update(self.job_id, state=state, causes=self.causes, note=self.start_error, ended=time.time(),
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
        if self.record is not None and self.record.get("state") not in ("RUNNING", "PENDING"):
            raise HpcjaxError(f"local job {self.job_id} has already ended ({self.record.get('state')}); "
                              "nothing to cancel", f"see `hpcjax status {self.job_id}`")
        records.update(self.job_id, cancelled=True)  # another process follows it: that one reports it
        if self.record is None:
            with self.lock:
                self.stop_all()
                self.final = self._end("CANCELLED")
            return
        for pid in self.record.get("pids", []):  # a record names them: only this job's ranks are signalled
            if isinstance(pid, int) and contract.local_job_of(pid) == self.job_id.split("_")[0]:
                os.kill(pid, signal.SIGTERM)

    def hosts(self) -> dict[int, str]:
        return {rank: contract.local_node_name(rank, self.layout) for rank in range(self.num_ranks)}

    def _finish(self, state: str) -> Outcome:
        record = self.record or {}
        codes = {int(r): c for r, c in record.get("exit_codes", {}).items()} or \
            {rank: proc.returncode for rank, proc in self.procs.items()}
        causes = self.causes or record.get("causes", [])
        events = [TaskEvent((rank,), contract.local_node_name(rank, self.layout), exit_words(code),
                            before_stop=rank in causes)
                  for rank, code in sorted(codes.items()) if code not in (None, 0)]
        note = {"TIMEOUT": f"the time limit ({self.limit_s or '?'} s) was reached: every rank was stopped",
                "CANCELLED": "the job was cancelled: every rank was stopped"}.get(state, "")
        note = self.start_error or record.get("note") or note
        return analyze(self.job_id, state, events, self._rank_log,
                       job_exit_code=codes.get(causes[0], 1) if causes else 1, stopped_by="hpcjax", note=note)

    def _rank_log(self, rank: int) -> Path:
        return contract.rank_log_path(self.log_dir, self.job_id, rank)


_started_here: list[LocalRun] = []  # their ranks are this program's children


def started_here(job_id: str) -> "LocalRun | None":
    return next((run for run in _started_here if run.job_id == job_id), None)


@atexit.register
def _wait_for_local_jobs() -> None:
    """A program that started local jobs and did not wait for them waits at exit (as
    concurrent.futures does), so no rank is orphaned and every record gets its end."""
    for run in _started_here:
        if run.poll()[0] in ("RUNNING", "PENDING"):
            say(f"waiting for local job {run.job_id} to end: its ranks are this program's children")
            run.wait(progress=False)
