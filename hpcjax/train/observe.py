"""What a run shows about its own cost: the time to the first step (start, JAX
initialized, compiled or loaded from the cache, first step done) and profiler
traces of chosen steps.

The first step is compiled ahead of time (`lower(...).compile()`), so compilation
and execution are timed apart; it is the only step the host waits for on purpose.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import jax

from hpcjax.rank import compile_cache, runtime
from hpcjax.rundir import RunDir
from hpcjax.train.stage import Stage


class FirstStep:
    def __init__(self) -> None:
        age = runtime.process_age_s()
        self.started = time.monotonic() - age if age is not None else None
        self.initialized = runtime.initialized_at
        self.compile_s = self.step_s = None
        self.cache = ""

    def compile(self, step_fn, state, batch, lr):
        """The jitted step compiled ahead of time for these arguments (timed)."""
        stats = compile_cache.stats()
        before = (stats.hits, stats.misses) if stats else (0, 0)
        begun = time.monotonic()
        compiled = step_fn.lower(state, batch, lr).compile()
        self.compile_s = time.monotonic() - begun
        self.cache = stats.describe(before) if stats else "compiled (no persistent compilation cache)"
        return compiled

    def ran(self, outputs) -> None:
        begun = time.monotonic()
        jax.block_until_ready(outputs)
        self.done = time.monotonic()
        self.step_s = self.done - begun

    def as_dict(self) -> dict:
        init_s = (self.initialized - self.started) if self.started and self.initialized else None
        total = (self.done - self.started) if self.started and self.step_s is not None else None
        return {"total_s": total, "start_to_initialized_s": init_s, "compile_s": self.compile_s,
                "first_step_s": self.step_s, "compile_cache": self.cache}

    def describe(self) -> str:
        d = self.as_dict()
        known = [d[k] for k in ("start_to_initialized_s", "compile_s", "first_step_s") if d[k] is not None]
        setup = d["total_s"] - sum(known) if d["total_s"] and len(known) == 3 else None
        parts = [f"to JAX initialized {d['start_to_initialized_s']:.1f} s" if d["start_to_initialized_s"] else "",
                 f"data, model and checkpoint setup {setup:.1f} s" if setup is not None else "",
                 f"compile {d['compile_s']:.1f} s ({d['compile_cache']})" if d["compile_s"] is not None else "",
                 f"first step {d['first_step_s']:.2f} s" if d["first_step_s"] is not None else ""]
        head = f"time to first step: {d['total_s']:.1f} s" if d["total_s"] else "time to first step"
        return head + " = " + ", ".join(p for p in parts if p)


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
            print(f"hpcjax: process {jax.process_index()}: profile of steps {self.first}..{self.last} in "
                  f"{self.directory}; open it with `tensorboard --logdir {self.directory}` (profile tab) or "
                  f"load the .xplane.pb into https://ui.perfetto.dev", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.tracing:  # the run stopped inside the range: keep what was traced
            jax.profiler.stop_trace()
            self.tracing = False

