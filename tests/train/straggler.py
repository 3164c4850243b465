"""Make one rank of a running job slow from outside, as a throttled node would: its
processes are stopped and continued (SIGSTOP/SIGCONT) at a fixed duty cycle."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path


def rank_pids(job_id: str, rank: int, marker: str) -> list[int]:
    """The processes of `rank` of job `job_id` (SLURM's or the local backend's: both set
    SLURM_JOB_ID and SLURM_PROCID) whose command line holds `marker`."""
    wanted = {f"SLURM_JOB_ID={job_id}".encode(), f"SLURM_PROCID={rank}".encode()}
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = set((proc / "environ").read_bytes().split(b"\0"))
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if wanted <= environ and marker in command:
            found.append(int(proc.name))
    return found


class DutyCycle(threading.Thread):
    """Stops the processes for `stopped_s`, lets them run for `running_s`, again and
    again until `finish()`; they are always left running."""

    def __init__(self, pids: list[int], stopped_s: float, running_s: float) -> None:
        super().__init__(daemon=True)
        self.pids, self.stopped_s, self.running_s = pids, stopped_s, running_s
        self.done, self.cycles = threading.Event(), 0

    def _signal(self, signum: int) -> None:
        for pid in self.pids:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def run(self) -> None:
        try:
            while not self.done.is_set():
                self._signal(signal.SIGSTOP)
                time.sleep(self.stopped_s)
                self._signal(signal.SIGCONT)
                self.cycles += 1
                self.done.wait(self.running_s)
        finally:
            self._signal(signal.SIGCONT)

    def finish(self) -> None:
        self.done.set()
        self.join()


def slow_rank_while(job_id: str, rank: int, marker: str, until, stopped_s=0.03, running_s=0.05,
                    timeout_s: float = 300) -> DutyCycle:
    """Wait for the rank's processes to appear, then slow them until `until()` is true."""
    deadline = time.monotonic() + timeout_s
    pids: list[int] = []
    while not pids and time.monotonic() < deadline and not until():
        pids = rank_pids(job_id, rank, marker)
        time.sleep(0.2)
    assert pids, f"no process of rank {rank} of job {job_id} with {marker!r} in its command line"
    cycle = DutyCycle(pids, stopped_s, running_s)
    cycle.start()
    while not until() and time.monotonic() < deadline:
        time.sleep(0.2)
    cycle.finish()
    return cycle
