"""The job's timeouts: one rule each, read from the job's variables on both sides (the hang
watch's adaptive timeout, the start-up and heartbeat bounds).

The rank side (hpcjax.rank.watch.hangwatch) ends a job whose ranks stop making progress; the
login side checks the variables before anything is submitted and renders XLA's NCCL
timeout to match. Standard library only (imported in every room).

The timeout adapts to the job, as NVIDIA's resiliency extension computes its own from
observed intervals: until WARMUP intervals have been seen after the first (which holds the
compilation), it is the ceiling; then FACTOR times the longest interval seen so far, never
below the floor nor above the ceiling, except that an interval the job has already taken in
health (twice the longest seen) is never called a hang, whatever the ceiling. A slow
evaluation every 20 steps raises the longest interval once it has been seen: the floor must
exceed any pause the job makes before that, and the ceiling the first intervals (a Trainer
that reports once per epoch: the epoch).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from hpcjax.values.errors import ConfigError

FLOOR_ENV = "HPCJAX_HANG_FLOOR"
CEILING_ENV = "HPCJAX_HANG_CEILING"
FACTOR_ENV = "HPCJAX_HANG_FACTOR"
FIXED_ENV = "HPCJAX_STEP_TIMEOUT"  # the older fixed timeout: floor = ceiling = its value, 0 is off
DEFAULT_FLOOR_S, DEFAULT_CEILING_S, DEFAULT_FACTOR = 300.0, 3600.0, 5.0
SEEN_MARGIN = 2.0  # an interval this job has already taken in health is never a hang: at least this x it
WARMUP = 3  # intervals after the first before the timeout follows them
GRACE_S = 15.0  # how long the first rank to see a hang waits for every rank's stacks
# XLA's own bound on a collective that a rank never enters (GPU only); the hang watch fires first.
NCCL_TIMEOUT_FLAG = "xla_gpu_nccl_termination_timeout_seconds"
KNOBS_HINT = (f"{FLOOR_ENV} (default {DEFAULT_FLOOR_S:.0f} s), {CEILING_ENV} (default {DEFAULT_CEILING_S:.0f} s; "
              f"0 turns the watch off), {FACTOR_ENV} (default {DEFAULT_FACTOR:g})")


INIT_TIMEOUT_ENV = "HPCJAX_INIT_TIMEOUT"  # seconds every rank waits for all the others at the start
# Cold starts on a big cluster (container pull, imports from a shared filesystem) take minutes;
# a rank that never arrives still ends in an error, not a hang.
DEFAULT_INIT_TIMEOUT_S = 600
HEARTBEAT_TIMEOUT_ENV = "HPCJAX_HEARTBEAT_TIMEOUT"  # a rank unheard this long (frozen, node lost) ends the job
# JAX's own default is 100 s. 30 s is safe because JAX's heartbeats are sent by the coordination
# agent's own C++ thread, not by Python: a rank busy in a long compile, a long step, a checkpoint
# or holding the GIL still beats; only a frozen process, a lost node, or a coordinator unreachable
# for the whole bound goes unheard. A SIGSTOPped rank ended its job 25 s after the stop at 30 (27 s
# at 20, 69 s at 60) on the dev cluster: the service checks periodically. Nodes that swap or stall longer raise
# it (--env HPCJAX_HEARTBEAT_TIMEOUT=300).
DEFAULT_HEARTBEAT_TIMEOUT_S = 30
EXIT_GUARD_ENV = "HPCJAX_EXIT_GUARD"  # 0 turns off the exit guard (hpcjax.rank.watch.exitguard); 1, the default, keeps it
# The guard's first form bounded JAX's distributed shutdown and then ended the process itself, with
# an exit status it could only guess (issue 48): the variable that set that bound is refused, with
# what replaced it.
RETIRED_EXIT_BOUND_ENV = "HPCJAX_EXIT_BOUND"
# The guard's sitecustomize, relative to hpcjax's package directory: put on the ranks' PYTHONPATH
# so that an unmodified script is guarded too (hpcjax's own programs arm it themselves).
EXIT_HOOK_DIR = "rank/watch/exithook"


def init_timeout_s(environ=os.environ) -> int:
    return _whole_seconds(environ, INIT_TIMEOUT_ENV, DEFAULT_INIT_TIMEOUT_S, minimum=1)


def heartbeat_timeout_s(environ=os.environ) -> int:
    """How long a silent rank (frozen, stopped, its node gone) may go unheard before JAX's
    coordination service ends the job, naming it."""
    return _whole_seconds(environ, HEARTBEAT_TIMEOUT_ENV, DEFAULT_HEARTBEAT_TIMEOUT_S, minimum=2)


def exit_guard_on(environ=os.environ) -> bool:
    """Whether a job's ranks get the exit guard (HPCJAX_EXIT_GUARD: 1, the default, or 0)."""
    if environ.get(RETIRED_EXIT_BOUND_ENV):
        raise ConfigError(f"{RETIRED_EXIT_BOUND_ENV} is no longer read: the exit guard no longer bounds JAX's "
                          "shutdown, it waits for the program's work in flight before it, and the process ends "
                          "with the status Python gives it",
                          f"leave {RETIRED_EXIT_BOUND_ENV} out; {EXIT_GUARD_ENV}=0 turns the guard off")
    text = environ.get(EXIT_GUARD_ENV, "1")
    if text not in ("0", "1"):
        raise ConfigError(f"{EXIT_GUARD_ENV}={text!r} is neither 1 nor 0",
                          f"{EXIT_GUARD_ENV}=1 (the default) guards the exit, {EXIT_GUARD_ENV}=0 turns it off")
    return text == "1"


def check_job_environment(environ) -> None:
    """Every timeout a job's variables set, as the ranks will read them: ConfigError for a bad one."""
    HangSettings.from_env(environ)
    init_timeout_s(environ)
    heartbeat_timeout_s(environ)
    exit_guard_on(environ)


def _whole_seconds(environ, name: str, default: int, *, minimum: int) -> int:
    text = environ.get(name, "")
    if not text:
        return default
    if not text.isdigit() or int(text) < minimum:
        raise ConfigError(f"{name}={text!r} is not a whole number of seconds of at least {minimum}",
                          f"e.g. {name}={default} (the default)")
    return int(text)


@dataclass(frozen=True)
class HangSettings:
    floor_s: float = DEFAULT_FLOOR_S
    ceiling_s: float = DEFAULT_CEILING_S
    factor: float = DEFAULT_FACTOR

    @property
    def off(self) -> bool:
        return self.ceiling_s <= 0

    def timeout(self, intervals: int, longest: float) -> float:
        """Seconds without progress that make a hang, after `intervals` intervals between progress
        calls of which the longest after the first took `longest` seconds."""
        if self.off:
            return math.inf
        if intervals <= WARMUP:
            return max(self.ceiling_s, SEEN_MARGIN * longest)
        return max(min(self.ceiling_s, max(self.floor_s, self.factor * longest)), SEEN_MARGIN * longest)

    def explain(self, intervals: int, longest: float) -> str:
        """How timeout() came to its value, for the message that ends a job."""
        value = self.timeout(intervals, longest)
        if intervals <= WARMUP:
            return f"{value:.0f} s: the ceiling ({CEILING_ENV}), as fewer than {WARMUP + 1} intervals were seen"
        return (f"{value:.0f} s = {self.factor:g} x the longest interval {longest:.1f} s, within floor "
                f"{self.floor_s:.0f} s and ceiling {self.ceiling_s:.0f} s")

    @property
    def nccl_timeout_s(self) -> int | None:
        """XLA's NCCL termination timeout to render on GPU nodes: after the watch would have ended the job."""
        return None if self.off else int(self.ceiling_s + 4 * GRACE_S)

    @classmethod
    def from_env(cls, environ=os.environ) -> "HangSettings":
        fixed = environ.get(FIXED_ENV, "")
        if fixed:
            seconds = _number(FIXED_ENV, fixed, DEFAULT_CEILING_S, minimum=0)
            return cls(floor_s=seconds, ceiling_s=seconds)
        floor = _number(FLOOR_ENV, environ.get(FLOOR_ENV, ""), DEFAULT_FLOOR_S, minimum=1)
        ceiling = _number(CEILING_ENV, environ.get(CEILING_ENV, ""), DEFAULT_CEILING_S, minimum=0)
        factor = _number(FACTOR_ENV, environ.get(FACTOR_ENV, ""), DEFAULT_FACTOR, minimum=1)
        if 0 < ceiling < floor:
            raise ConfigError(f"{CEILING_ENV}={ceiling:g} is below {FLOOR_ENV}={floor:g}",
                              f"the ceiling bounds the timeout from above: give it at least the floor ({KNOBS_HINT})")
        return cls(floor_s=floor, ceiling_s=ceiling, factor=factor)


def _number(name: str, text: str, default: float = 0.0, *, minimum: float) -> float:
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < minimum:
        raise ConfigError(f"{name}={text!r} is not a number of at least {minimum:g}",
                          f"e.g. {name}={default:g}; the hang watch reads {KNOBS_HINT}")
    return value
