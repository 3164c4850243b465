"""TensorBoard scalars of a run, written by process 0 into <run-dir>/tensorboard through
tensorboardX (its event writer runs in a background thread: the caller does not wait).
Used by `hpcjax train` (train.metrics names its tags) and by `hpcjax.report` in the
Python API (every number reported, as report/<name>, one step per report).

A resumed run starts its writer with purge_step = its first step, so TensorBoard drops
what an interrupted run wrote past the point it resumes from: each step is shown once.
Where tensorboardX is not installed (a stock JAX image) the run says so once and goes on
without scalars; its JSON lines stay the record either way.
"""

from __future__ import annotations

from pathlib import Path

from hpcjax.protocol.rundir import RunDir
from hpcjax.values.voice import say



class Scalars:
    def __init__(self, run_dir: Path | None, start_step: int, tags: dict[str, str] | None = None) -> None:
        """`tags`: record names -> TensorBoard tags; None: every number, as report/<name>.
        The writer (and tensorboardX, ~0.1 s to import) comes with the first scalar, not before
        a run's first step."""
        self.writer, self.tags = None, tags
        self.run_dir, self.start_step = run_dir, start_step  # None: not process 0

    def _open(self) -> None:
        run_dir, self.run_dir = self.run_dir, None  # tried once
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            say("TensorBoard scalars off: tensorboardX is not installed here (the JSON lines have every step)")
            return
        self.writer = SummaryWriter(str(RunDir(run_dir).tensorboard), purge_step=self.start_step or None,
                                    flush_secs=10)

    def add(self, step: int, record: dict) -> None:
        if self.run_dir is not None:
            self._open()
        if self.writer is None:
            return
        names = self.tags or {name: f"report/{name}" for name in record}
        for name, tag in names.items():
            value = record.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(tag, value, step)

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
