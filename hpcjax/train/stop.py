"""Stop at any step: SLURM's warning (USR2, the script's --signal) reaches some
ranks; every rank must stop after the same step, save, and exit well inside the
grace period, whatever the checkpoint interval.

The agreement is one barrier of JAX's coordination service per step (a gRPC
round trip between hosts; the devices are not waited for, so asynchronous
dispatch keeps running ahead): a warned rank writes a vote under this step's
key before the barrier, and after it every rank reads the same votes. All
ranks therefore decide the same thing at the same step. A device all-gather
would do the same but would make every host wait for the step to finish.

A rank that stopped on the warning leaves a marker file (contract.stop_marker)
so the batch script can requeue the job (`--requeue N`).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from pathlib import Path

import jax

from hpcjax.contract import STOP_MARKER_ENV
from hpcjax.errors import ConfigError
from hpcjax.train.stage import Stage

STEP_TIMEOUT_ENV = "HPCJAX_STEP_TIMEOUT"
DEFAULT_STEP_TIMEOUT_S = 1800  # longer than any compile, save or evaluation should take
STUCK_EXIT_CODE = 124  # what `timeout` returns: the process ended itself for taking too long

BARRIER_TIMEOUT_MS = 10 * 60 * 1000  # a rank that never comes is ended by srun long before


def coordination_client():
    """JAX's coordination-service client, or None when this process is not distributed."""
    from jax._src import distributed

    return distributed.global_state.client


class StopRequest:
    """Caught USR2, and the per-step agreement to stop."""

    def __init__(self, namespace: str = "hpcjax/stop") -> None:
        self.requested = False
        self.namespace = namespace
        if hasattr(signal, "SIGUSR2"):
            signal.signal(signal.SIGUSR2, self._handle)

    def _handle(self, signum, frame) -> None:
        self.requested = True

    def agreed(self, step: int, pace=None) -> bool:
        """Whether any process was warned by the time it finished `step`; every process
        calls this after the same steps and gets the same answer. `pace` (train.pace)
        shares its measurements through the same barrier: set before, read after."""
        client = coordination_client() if jax.process_count() > 1 else None
        if client is None:
            return self.requested
        if self.requested:
            client.key_value_set(f"{self.namespace}/{step}/{jax.process_index()}", "1")
        shared = pace is not None and pace.publish(step)
        client.wait_at_barrier(f"{self.namespace}-{step}", BARRIER_TIMEOUT_MS)
        if shared:
            pace.collect(step)
        return bool(client.key_value_dir_get(f"{self.namespace}/{step}/"))

    def leave_marker(self, step: int) -> None:
        """Process 0 tells the batch script the run stopped on a warning, not by itself."""
        path = os.environ.get(STOP_MARKER_ENV)
        if path and jax.process_index() == 0:
            Path(path).write_text(f"stopped after step {step}\n")


def step_timeout_s(environ=os.environ) -> int:
    value = environ.get(STEP_TIMEOUT_ENV, "")
    if not value:
        return DEFAULT_STEP_TIMEOUT_S
    if not value.isdigit():
        raise ConfigError(f"{STEP_TIMEOUT_ENV}={value!r} is not a whole number of seconds",
                          f"e.g. {STEP_TIMEOUT_ENV}=900; 0 turns the watchdog off")
    return int(value)


class StepWatchdog(Stage):
    """Ends this process when no step finishes for `timeout_s`: a rank stuck in a collective
    whose peers still send heartbeats would otherwise hold the job until its time limit.
    It prints what every thread was doing, then exits with STUCK_EXIT_CODE, so srun ends
    the other ranks and the report shows why."""

    def __init__(self, timeout_s: int, process: int) -> None:
        self.timeout_s, self.process = timeout_s, process
        self.last, self.step = time.monotonic(), None
        self._done = threading.Event()
        if timeout_s > 0:
            threading.Thread(target=self._watch, name="hpcjax-step-watchdog", daemon=True).start()

    def beat(self, step: int | None = None) -> None:
        """A step (or a long pause on purpose: compile, save, evaluation) has finished."""
        self.last, self.step = time.monotonic(), step if step is not None else self.step

    def after_step(self, step: int, learning_rate: float, metrics) -> None:
        self.beat(step)

    def close(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        while not self._done.wait(min(10.0, self.timeout_s / 4)):
            idle = time.monotonic() - self.last
            if idle >= self.timeout_s:
                print(f"hpcjax: process {self.process}: no training step finished for {idle:.0f} s "
                      f"(the last step begun: {self.step}); ending this process so the job does not hang "
                      f"({STEP_TIMEOUT_ENV}={self.timeout_s}). Every thread's stack:", file=sys.stderr, flush=True)
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                sys.stderr.flush()
                os._exit(STUCK_EXIT_CODE)
