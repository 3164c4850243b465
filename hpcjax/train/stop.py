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

import os
import signal
from pathlib import Path

import jax

from hpcjax.protocol.contract import STOP_MARKER_ENV
from hpcjax.rank.watch import hangwatch
from hpcjax.rank.start.barriers import coordination_client
from hpcjax.train.stage import Stage

BARRIER_TIMEOUT_MS = 10 * 60 * 1000  # a rank that never comes is ended by srun long before


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


class StepProgress(Stage):
    """The start of every step is progress for the hang watch (hpcjax.rank.watch.hangwatch): a job
    whose ranks stop starting steps ends by itself, naming the rank that held it. Checkpoint
    saves go inside `hold()`; after the last step the watch is closed."""

    def __init__(self) -> None:
        self.watch = hangwatch.watch()

    def before_step(self, step: int) -> None:
        self.watch.progress(step)

    def hold(self):
        return self.watch.hold()

    def close(self) -> None:
        self.watch.close()
