"""The local backend: a job's N*G/K processes on this machine, without SLURM.

Each process gets the variables submitit's local executor sets (so the rank
side maps it through the same reader as any submitit-local task), the layout
variables a rendered script exports, and K emulated GPUs as CPU devices; they
meet through real jax.distributed over loopback. Like `srun --kill-on-bad-exit`,
the first rank that fails stops the others. The processes are children of the
submitting process: it follows them and stops them if it is stopped; at exit it
waits for the jobs it started (no rank is orphaned, no record left RUNNING).
A job array's elements (localjobs.queue) are jobs named A_i, as SLURM names them.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from hpcjax.protocol import contract, placement
from hpcjax.values import jobid
from hpcjax.catalog import keep, records
from hpcjax.values.errors import HpcjaxError
from hpcjax.follow.outcome import Outcome, TaskEvent, analyze
from hpcjax.protocol.statuses import exit_words
from hpcjax.values.voice import say
from hpcjax.follow.run import Run
from hpcjax.hosts import here
from hpcjax.job.spec import JobSpec
from hpcjax.localjobs import TICK_S, chains
from hpcjax.localjobs.environment import free_port, local_job_of, rank_environment

STOP_GRACE_S = 5.0
def make(spec: JobSpec) -> "LocalRun":
    """The job's Run, its id claimed (its record is the record step's, then release starts it)."""
    return LocalRun(records.new_local_id(int(time.time() * 1000)), spec)


def release(run: "LocalRun", find) -> None:
    """Start every rank of the recorded job here, or, with --after, once its dependencies have ended
    as asked (`find(job)`: a dependency's Run)."""
    if run.spec.after:  # as SLURM's --dependency: it waits, then starts or is cancelled
        run.save_record("PENDING")
        _started_here.append(run)
        threading.Thread(target=chains.start_after, args=(run, find), name=f"hpcjax-local-after-{run.job_id}",
                         daemon=True).start()
    else:
        run.start()


class LocalRun(Run):
    """A job of the local backend: PENDING until `start` (an array element waits its turn),
    then its processes, followed by `poll`. Safe to poll from several threads."""

    backend = "local"
    poll_s = TICK_S

    def __init__(self, job_id: str, spec: JobSpec | None, *, log_dir: Path | None = None,
                 layout: contract.Layout | None = None, record: dict | None = None,
                 element: int | None = None) -> None:
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
        self.command = spec.command_of(element) if spec else ()  # a sweep's element runs its own command
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
        """The job's state in its record and its row in the catalog of runs (catalog.keep), beside what
        the record step wrote of its submission."""
        keep.update(self.job_id, backend="local", output_dir=str(self.log_dir), layout=self.layout.as_dict(),
                    state=state, pids=[p.pid for p in self.procs.values()],
                    **({"started": self.started_at, "nodelist": f"local[0-{self.layout.nodes - 1}]"}
                       if self.started_at else {}))

    def start(self) -> None:
        """Start every rank (once); a job cancelled while pending never starts."""
        with self.lock:
            if self.started is not None or self.final:
                return
            if self.cancelled_elsewhere():
                self.end_unstarted("CANCELLED", "cancelled while it waited to start")
                return
            self.log_dir.mkdir(parents=True, exist_ok=True)
            port = free_port()
            say(f"local job {self.job_id}: {self.layout.described} (emulated) on this machine; "
                f"logs in {self.log_dir}/")
            self.started = time.monotonic()
            try:
                # SIGINT as a program has it: a submission holds it (launch.steps.interrupts_held), and a
                # rank started meanwhile would never see a Ctrl-C or run its own handler of it. A Ctrl-C
                # to this process meanwhile lands once every rank has started (the job is recorded and
                # announced by then: its caller stops it); one that cannot wait interrupts the start,
                # which stops what started.
                with here.ctrl_c_for_children():
                    for rank in range(self.num_ranks):
                        with open(contract.rank_log_path(self.log_dir, self.job_id, rank), "w") as log:
                            self.procs[rank] = subprocess.Popen(
                                list(self.command), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=rank_environment(self.spec, self.job_id, rank, port))
            except BaseException as error:  # Ctrl-C, or a process that could not start: none is left running
                interrupted = isinstance(error, KeyboardInterrupt)
                self.save_record("PENDING")  # the pids that started, then its end
                self.end_unstarted("CANCELLED" if interrupted else "FAILED",
                                   "interrupted while its processes were started" if interrupted
                                   else f"its processes could not be started: {error}")
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
        keep.update(self.job_id, state=state, causes=self.causes, note=self.start_error, ended=time.time(),
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
        with self.lock:
            ended = self._ended_as()
            if ended:
                raise HpcjaxError(f"local job {self.job_id} has already ended ({ended}); nothing to cancel",
                                  f"see `hpcjax status {self.job_id}`")
            records.update(self.job_id, cancelled=True)  # another process that follows it reports it
            if self.record is None:
                self.stop_all()
                self.final = self._end("CANCELLED")
                return
        for pid in self.record.get("pids", []):  # a record names them: only this job's ranks are signalled
            if isinstance(pid, int) and local_job_of(pid) == jobid.base(self.job_id):
                os.kill(pid, signal.SIGTERM)

    def _ended_as(self) -> str:
        """The state a job that has ended ended in, else "": one this process follows is looked at
        now (one that ended by itself keeps its own end); another's, as its record says."""
        if self.record is not None:
            state = self.record.get("state")  # a record without one is not taken to run (as before)
            return "" if state in ("RUNNING", "PENDING") else str(state)
        if self.started is not None and not self.final:
            self.final = self._watch()
        return self.final

    def hosts(self) -> dict[int, str]:
        return {rank: placement.local_node_name(rank, self.layout) for rank in range(self.num_ranks)}

    def _finish(self, state: str) -> Outcome:
        record = self.record or {}
        codes = {int(r): c for r, c in record.get("exit_codes", {}).items()} or \
            {rank: proc.returncode for rank, proc in self.procs.items()}
        causes = self.causes or record.get("causes", [])
        events = [TaskEvent((rank,), placement.local_node_name(rank, self.layout), exit_words(code),
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
    concurrent.futures does), so no rank is orphaned and every record gets its end; one that
    ends on a Ctrl-C stops them instead, as the CLI does (the interpreter keeps what ended it in
    sys.last_type before it runs this)."""
    interrupted = isinstance(getattr(sys, "last_type", None), type) and issubclass(sys.last_type, KeyboardInterrupt)
    for run in _started_here:
        if run.poll()[0] not in ("RUNNING", "PENDING"):
            continue
        if interrupted:
            run.cancel()
            say(f"interrupted: stopped every process of local job {run.job_id}")
        else:
            say(f"waiting for local job {run.job_id} to end: its ranks are this program's children")
            run.wait(progress=False)
