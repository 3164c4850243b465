"""A job's id, read one way everywhere: `1234` (a job), `1234_3` (an element of a job array, as
squeue, sacct and scancel name it), `1234+1` (a component of a heterogeneous job), each with an
optional step after a dot (`1234.0`, `1234.batch`, `1234_3.extern`). The local backend names its
jobs and array elements the same way. A job hpcjax ran inside a held allocation (`hpcjax hold`,
`--on NAME`) is named by the hold's id and its place in the hold's queue: `1234.s2`, a step that
is not SLURM's (its sruns are SLURM's steps 1234.0, 1234.1, ...). Standard library only.
"""

from __future__ import annotations

import re
from collections import namedtuple

from hpcjax.values.errors import UsageError

# SLURM's ids are 32-bit (10 digits); the local backend's are 13; a longer number is no job's.
PATTERN = re.compile(r"(?P<job>\d{1,19})(?:_(?P<task>\d{1,10}))?(?:\+(?P<component>\d{1,10}))?"
                     r"(?:\.(?P<step>[A-Za-z0-9_]{1,32}))?")
FORM = "a job id is a number, e.g. 1234, an array element's, e.g. 1234_3, or a held allocation's step, e.g. 1234.s2"
HOLD_STEP = re.compile(r"s[1-9]\d*")  # the step part of a job run inside a hold


# A named tuple, not a dataclass: `hpcjax status` reads its job id before it asks SLURM, and the
# dataclasses module (with inspect) is 7 ms of that on its own (hpcjax.cli.submitted).
class JobId(namedtuple("JobId", ("job", "task", "component", "step"), defaults=(None, None, None))):
    """job: the job's number (an array's, or a heterogeneous job's, own); task: the array element's
    index; component: the heterogeneous job's component; step: a number, batch, extern."""

    __slots__ = ()

    @property
    def element(self) -> str:
        """The id without its step: what squeue and the records call the job."""
        return self.job + (f"_{self.task}" if self.task is not None else "") + \
            (f"+{self.component}" if self.component is not None else "")

    def __str__(self) -> str:
        return self.element + (f".{self.step}" if self.step is not None else "")


def parse(text) -> JobId | None:
    """The parts of a job id, or None when `text` is not one."""
    match = PATTERN.fullmatch(str(text).strip()) if isinstance(text, (str, int)) else None
    if match is None:
        return None
    return JobId(match["job"], match["task"], match["component"], match["step"])


def check(text, what: str = "job id") -> str:
    """A job or an array element, as a user names one (no step, no component): else UsageError."""
    if not is_element(text):
        shown = repr(text) if len(str(text)) <= 60 else f"{str(text)[:40]!r}... ({len(str(text))} characters)"
        raise UsageError(f"invalid {what} {shown}", FORM)
    return str(text)


def is_element(text) -> bool:
    """Whether `text` names a job, an array element or a hold's step (what `hpcjax status` takes),
    not one of SLURM's steps."""
    found = parse(text)
    return found is not None and found.component is None and (
        (found.step is None and str(text) == found.element) or (is_hold_step(text)))


def is_hold_step(text) -> bool:
    """Whether `text` names a job run inside a held allocation (1234.s2)."""
    found = parse(text)
    return (found is not None and found.task is None and found.component is None and found.step is not None
            and HOLD_STEP.fullmatch(found.step) is not None)


def in_hold(hold_job: str, place) -> str:
    """The id of the job at `place` (1, 2, ...) in the queue of the hold that is SLURM job `hold_job`."""
    return f"{hold_job}.s{int(place)}"


def place_in_hold(text: str) -> int:
    """Where a job run inside a hold is in its queue: 2 for 1234.s2 (ValueError for any other id)."""
    if not is_hold_step(text):
        raise ValueError(f"{text!r} is not a job in a hold")
    return int(parse(text).step[1:])


def base(text: str) -> str:
    """The job an id belongs to: an array element's array, a step's job."""
    found = parse(text)
    return found.job if found else str(text)


def bases(ids) -> list[str]:
    """The distinct jobs of some ids, in numerical order (what one squeue or sacct asks about)."""
    return sorted({base(i) for i in ids}, key=int)


def is_step_of(text: str, job: str) -> bool:
    """Whether `text` (sacct's JobID) is a step of `job` (a job or an array element)."""
    found = parse(text)
    return found is not None and found.step is not None and found.element == job
