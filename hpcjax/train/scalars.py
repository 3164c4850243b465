"""TensorBoard scalars of a run, written by process 0 into <run-dir>/tensorboard through
tensorboardX (its event writer runs in a background thread: the loop does not wait).

A resumed run starts its writer with purge_step = its first step, so TensorBoard drops
what an interrupted run wrote past the checkpoint it resumes from: each step is shown
once. Where tensorboardX is not installed (a stock JAX image) the run says so once and
trains without scalars; metrics.jsonl stays the record either way.
"""

from __future__ import annotations

import sys
from pathlib import Path

DIRECTORY = "tensorboard"
# metrics.jsonl's names -> TensorBoard's tags (grouped into sections by the prefix)
TAGS = {"loss": "train/loss", "grad_norm": "train/grad_norm", "learning_rate": "train/learning_rate",
        "step_time_s": "perf/step_time_s", "tokens_per_s": "perf/tokens_per_s", "mfu": "perf/mfu",
        "others_wait": "perf/others_wait", "val_loss": "eval/val_loss"}  # others_wait: train.pace


class Scalars:
    def __init__(self, run_dir: Path | None, start_step: int) -> None:
        self.writer = None
        if run_dir is None:  # not process 0
            return
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            print("TensorBoard scalars off: tensorboardX is not installed here (metrics.jsonl has every step)",
                  file=sys.stderr, flush=True)
            return
        self.writer = SummaryWriter(str(Path(run_dir) / DIRECTORY), purge_step=start_step or None, flush_secs=10)

    def add(self, step: int, record: dict) -> None:
        if self.writer is None:
            return
        for name, tag in TAGS.items():
            if isinstance(record.get(name), (int, float)):
                self.writer.add_scalar(tag, record[name], step)

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
