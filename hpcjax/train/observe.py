"""What a run shows about its own cost: the time to the first step, phase by phase
(initialized, model, data, restore, compile, first step; each warm or cold), and
profiler traces of chosen steps.

The first step is compiled ahead of time (or its executable loaded), so compilation and
execution are timed apart; it is the only step the host waits for on purpose.
"""

from __future__ import annotations

import time
from pathlib import Path

import jax

from hpcjax.rank.start import runtime
from hpcjax.protocol.rundir import RunDir
from hpcjax.train.stage import Stage
from hpcjax.values.voice import say


class StartClock:
    """This attempt's start, phase by phase on one clock from the process's start: each phase
    ends where the next begins, so they add up to the time to the first step. A phase says
    whether it came warm (reused what an earlier attempt or run left) or cold."""

    def __init__(self) -> None:
        age = runtime.process_age_s()
        self.started = time.monotonic() - age if age is not None else None
        self.phases: list[dict] = []
        self.mark = runtime.initialized_at or time.monotonic()
        if self.started is not None and runtime.initialized_at is not None:
            self.phases.append({"phase": "initialized", "s": runtime.initialized_at - self.started,
                                "how": "imports and JAX's distributed runtime"})
        self.done: float | None = None

    def phase(self, name: str, how: str = "") -> None:
        """End the phase begun at the last mark; `how`: "warm: ..." / "cold: ..." / words."""
        now = time.monotonic()
        self.phases.append({"phase": name, "s": now - self.mark, "how": how})
        self.mark = now

    def ran(self, outputs) -> None:
        jax.block_until_ready(outputs)
        self.phase("first step")
        self.done = self.mark

    def seconds(self, name: str) -> float | None:
        return next((p["s"] for p in self.phases if p["phase"] == name), None)

    def as_dict(self) -> dict:
        total = (self.done - self.started) if self.started is not None and self.done is not None else None
        compile_how = next((p["how"] for p in self.phases if p["phase"] == "compile"), "")
        return {"total_s": total, "phases": self.phases, "start_to_initialized_s": self.seconds("initialized"),
                "compile_s": self.seconds("compile"), "first_step_s": self.seconds("first step"),
                "compile_cache": compile_how, "warm": [p["phase"] for p in self.phases if p["how"].startswith("warm")],
                "cold": [p["phase"] for p in self.phases if p["how"].startswith("cold")]}

    def describe(self) -> str:
        d = self.as_dict()
        head = f"time to first step: {d['total_s']:.1f} s" if d["total_s"] else "time to first step"
        temper = "; ".join(f"{w}: {', '.join(d[w])}" for w in ("warm", "cold") if d[w])
        parts = [f"{p['phase']} {p['s']:.2f} s" + (f" ({p['how']})" if p["how"] else "") for p in self.phases]
        return head + (f" ({temper})" if temper else "") + " = " + ", ".join(parts)


class StepProfiler(Stage):
    """A JAX profiler trace of steps first..last (inclusive) on process 0, or on every
    process, into <run_dir>/profile, where TensorBoard's profile plugin looks."""

    def __init__(self, steps: tuple[int, int] | None, run_dir: Path, all_ranks: bool) -> None:
        self.first, self.last = steps if steps else (None, None)
        self.directory = RunDir(run_dir).profile
        self.active = steps is not None and (all_ranks or jax.process_index() == 0)
        self.tracing = False
        self.annotation = None  # the traced step's annotation, open around its dispatch

    def before_step(self, step: int) -> None:
        """Starts the trace at the first step, and annotates each traced one."""
        if self.active and step == self.first:
            jax.profiler.start_trace(str(self.directory))
            self.tracing = True
        if self.tracing:
            self.annotation = jax.profiler.StepTraceAnnotation("train", step_num=step)
            self.annotation.__enter__()

    def after_step(self, step: int, learning_rate: float, metrics) -> None:
        if self.annotation is not None:
            self.annotation.__exit__(None, None, None)
            self.annotation = None
        if self.tracing and step == self.last:
            jax.block_until_ready(metrics)  # the traced steps' device work belongs in the trace
            jax.profiler.stop_trace()
            self.tracing = False
            say(f"hpcjax: process {jax.process_index()}: profile of steps {self.first}..{self.last} in "
                f"{self.directory}; open it with `tensorboard --logdir {self.directory}` (profile tab) or "
                f"load the .xplane.pb into https://ui.perfetto.dev")

    def close(self) -> None:
        if self.tracing:  # the run stopped inside the range: keep what was traced
            jax.profiler.stop_trace()
            self.tracing = False

