"""A job's dependencies (--after, after=): which jobs it waits for and on what outcome.

SLURM's --dependency=afterok/afterany; a step inside a hold is no job SLURM can wait for.
"""

from __future__ import annotations

from hpcjax.values import jobid
from hpcjax.values.errors import SpecError

AFTER_FORM = "write --after JOBID[:ok|:any], e.g. --after 1234 (when it succeeded) or --after 1234:any"


def check_after(job, when: str) -> tuple[str, str]:
    """A dependency: a job id (an array element's too) and when the dependent may start."""
    if not isinstance(job, str) or not jobid.is_element(job) or jobid.is_hold_step(job):
        raise SpecError(f"--after {job!r} is not a job id" + (" SLURM knows (a step inside a hold)" if isinstance(
            job, str) and jobid.is_hold_step(job) else ""), AFTER_FORM, field="after")
    if when not in ("ok", "any"):
        raise SpecError(f"--after {job}:{when} asks for {when!r}, not ok or any", AFTER_FORM, field="after")
    return job, when


def parse_after(text: str) -> tuple[str, str]:
    job, _, when = text.partition(":")
    return check_after(job, when or "ok")


def dependencies(after) -> tuple[tuple[str, str], ...]:
    """after= of the Python API as the spec keeps it: handles (anything with a job_id) or
    "JOBID[:ok|:any]" texts, one or a list."""
    if after is None:
        return ()
    items = after if isinstance(after, (list, tuple)) else [after]
    return tuple(parse_after(item if isinstance(item, str) else str(getattr(item, "job_id", item)))
                 for item in items)
