"""The cookbook's record writer: a step's metrics are read only after the next
step has been dispatched, so the host never waits for the devices inside the
training loop. Writes JSON lines into the run directory, TensorBoard scalars (train.scalars)
and a progress line on stderr, all on process 0 only.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import jax

from hpcjax.train.scalars import Scalars
from hpcjax.train.stage import Stage
from hpcjax.values.voice import say

# metrics.jsonl's names -> TensorBoard's tags (grouped into sections by the prefix)
TAGS = {"loss": "train/loss", "grad_norm": "train/grad_norm", "learning_rate": "train/learning_rate",
        "step_time_s": "perf/step_time_s", "tokens_per_s": "perf/tokens_per_s", "mfu": "perf/mfu",
        "others_wait": "perf/others_wait", "val_loss": "eval/val_loss"}  # others_wait: train.pace


class RecordWriter(Stage):
    def __init__(self, path: Path | None, *, tokens_per_step: int, flops_per_step: float, peak_flops: float,
                 total_steps: int, log_every: int, start_step: int = 0) -> None:
        self.file = open(path, "a") if path is not None else None  # None: not process 0
        self.scalars = Scalars(path.parent if path is not None else None, start_step, TAGS)
        self.tokens_per_step, self.flops_per_step = tokens_per_step, flops_per_step
        self.peak_flops, self.total_steps, self.log_every = peak_flops, total_steps, max(1, log_every)
        self.pending: tuple[int, float, dict] | None = None
        self.last_time = time.perf_counter()
        self.history: list[dict] = []
        self.slow = ""  # train.pace's verdict, said on every progress line while it holds

    def __call__(self, step: int, learning_rate: float, metrics: dict) -> None:
        """Queue this step's metrics; write the previous step's (now surely computed)."""
        previous, self.pending = self.pending, (step, learning_rate, metrics)
        if previous is not None:
            self._write(*previous)

    def after_step(self, step: int, learning_rate: float, metrics) -> None:
        self(step, learning_rate, metrics)

    def flush(self) -> None:
        if self.pending is not None:
            self._write(*self.pending)
            self.pending = None
        self.scalars.flush()  # at checkpoints too: what a resumed run keeps is on disk

    def restart_clock(self) -> None:
        """After a pause the loop caused on purpose (evaluation, checkpoint), so step time stays honest."""
        self.last_time = time.perf_counter()

    def _write(self, step: int, learning_rate: float, metrics: dict) -> None:
        values = {k: float(v) for k, v in jax.device_get(metrics).items()}
        now = time.perf_counter()
        seconds, self.last_time = now - self.last_time, now
        record = {"step": step, **values, "learning_rate": learning_rate, "step_time_s": seconds,
                  "tokens_per_s": self.tokens_per_step / seconds,
                  "mfu": self.flops_per_step / seconds / self.peak_flops}
        self.history.append(record)
        if self.file is None:
            return
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        self.scalars.add(step, record)
        if step % self.log_every == 0 or step == self.total_steps - 1:
            say(f"step {step + 1}/{self.total_steps}  loss {record['loss']:.4f}  "
                f"gnorm {record['grad_norm']:.3f}  lr {learning_rate:.2e}  {seconds * 1000:.1f} ms/step  "
                f"{record['tokens_per_s'] / 1000:.1f}k tok/s  mfu {100 * record['mfu']:.3f}%"
                + (f"  {self.slow}" if self.slow else ""))

    def pace(self, record: dict | None) -> None:
        """A window's record of who waited for whom (train.pace), on process 0."""
        if record is None or self.file is None:
            return
        self.file.write(json.dumps(record) + "\n")
        self.scalars.add(record["step"], {"others_wait": record["pace"]["others_wait"]})
        self.slow = record["pace"]["slow"]

    def write_event(self, record: dict) -> None:
        if self.file is not None:
            self.file.write(json.dumps(record) + "\n")
            self.file.flush()
            self.scalars.add(record.get("step", 0), record)

    def close(self) -> None:
        self.flush()
        self.scalars.close()
        if self.file is not None:
            self.file.close()
