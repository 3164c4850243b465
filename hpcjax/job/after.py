"""A job's dependencies (--after, after=): which jobs it waits for and on what outcome.

SLURM's --dependency=afterok/afterany; a step inside a hold is no job SLURM can wait for.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcjax.values import jobid
from hpcjax.values.errors import SpecError


@dataclass(frozen=True)
class Spelling:
    """How the caller writes a dependency, for the words of a refusal."""

    name: str  # formatted with the value as given (quoted)
    form: str  # the hint: how to write one


OPTION = Spelling("--after {}", "write --after JOBID[:ok|:any], e.g. --after 1234 (when it succeeded) or --after 1234:any")
ARGUMENT = Spelling("after={}", 'pass after="JOBID[:ok|:any]" or a job\'s handle, e.g. after="1234" (when it '
                                'succeeded) or after="1234:any"')


def check_after(job, when: str, spelled: Spelling = OPTION) -> tuple[str, str]:
    """A dependency: a job id (an array element's too) and when the dependent may start."""
    if not isinstance(job, str) or not jobid.is_element(job) or jobid.is_hold_step(job):
        raise SpecError(f"{spelled.name.format(repr(job))} is not a job id" + (
            " SLURM knows (a step inside a hold)" if isinstance(job, str) and jobid.is_hold_step(job) else ""),
            spelled.form, field="after")
    if when not in ("ok", "any"):
        raise SpecError(f"{spelled.name.format(repr(f'{job}:{when}'))} asks for {when!r}, not ok or any",
                        spelled.form, field="after")
    return job, when


def dependencies(after, spelled: Spelling = ARGUMENT) -> tuple[tuple[str, str], ...]:
    """--after's texts, or after= of the Python API, as the spec keeps them: "JOBID[:ok|:any]" texts
    or handles (anything with a job_id), one or a list; refused in the caller's spelling."""
    if after is None:
        return ()
    items = after if isinstance(after, (list, tuple)) else [after]
    found = []
    for item in items:
        job, _, when = (item if isinstance(item, str) else str(getattr(item, "job_id", item))).partition(":")
        found.append(check_after(job, when or "ok", spelled))
    return tuple(found)
