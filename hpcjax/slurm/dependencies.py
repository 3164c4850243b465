"""Whether SLURM can still honour a job's --after: each job it names is one SLURM knows, and one
that can still end as asked. SLURM drops a dependency on an unknown job (the job would start at once)
and, with --kill-on-invalid-dep (hpcjax sets it), cancels at once a job whose :ok dependency failed.

The controller's view comes first: it knows an ending before accounting does (slurmdbd's record can
lag seconds behind under load, and a chain's link may end between the check and the submission).
"""

from __future__ import annotations

from hpcjax.protocol.contract import FINISHED_STATES
from hpcjax.slurm import commands
from hpcjax.values.errors import UsageError

STILL_ENDING = "COMPLETING"  # squeue's state of a job that ended and whose nodes are still cleaning up


def asks(after) -> dict:
    """The probe's questions for the jobs after names: accounting's states and the controller's."""
    jobs = [job for job, _ in after]
    return {"after_accounting": commands.states(jobs), "after_queue": commands.queue_states(jobs)}


def check(after, probe, where: str) -> None:
    """UsageError for a dependency on a job SLURM does not know, or on an :ok ending already missed.
    A job array's id stands for its elements (squeue and sacct list those, not the array, once it runs).
    SLURM's afterok on an array waits for every element, then fails if one did not complete: one that
    has already failed is refused here, though others still run (the job could only be cancelled)."""
    rows = {name: _states(probe.answer(name)[1]) for name in ("after_accounting", "after_queue")}
    for job, when in after:
        queue, accounting = _of(job, rows["after_queue"]), _of(job, rows["after_accounting"])
        if not queue and not accounting:
            raise UsageError(f"--after {job}:{when}: SLURM on {where} knows no job {job}",
                             "give the id `hpcjax submit` printed (`hpcjax runs` lists them); SLURM would drop a "
                             "dependency on an unknown job and start this one at once")
        states = {**accounting, **{key: state for key, state in queue.items() if state != STILL_ENDING}}
        missed = _missed(job, states)
        if when == "ok" and missed:
            raise UsageError(*_refusal(job, missed))


def _of(job: str, states: dict[str, str]) -> dict[str, str]:
    """The rows of job: its own, or, for a job array's id, its elements' (`ID_N`, `ID_[N-M]`)."""
    return {key: state for key, state in states.items() if key == job or key.startswith(f"{job}_")}


def _missed(job: str, states: dict[str, str]) -> str:
    """How job (or the first of its elements) ended otherwise than COMPLETED; "" if none did. An element's
    row comes before the array's own: accounting, seconds behind, can still list the last element started
    under the array's id while the controller already names it."""
    missed = sorted((key == job, key, state) for key, state in states.items()
                    if state in FINISHED_STATES and state != "COMPLETED")
    if not missed:
        return ""
    _, key, state = missed[0]
    return state if key == job else f"{state} (its element {key})"


def check_refusal(after, said: str, host) -> None:
    """sbatch --test-only's "Requested operation is presently disabled" (ESLURM_DISABLED) is SLURM
    cancelling the test job at once: an :ok dependency ended otherwise after check() asked. Named here
    with the job and how it ended; any other refusal is left to the caller."""
    waits_ok = [job for job, when in after if when == "ok"]
    if not waits_ok or "presently disabled" not in said:
        return
    now = _states(host.run(commands.queue_states(waits_ok), timeout=10).stdout)
    for job in waits_ok:
        missed = _missed(job, _of(job, now))
        if missed:
            raise UsageError(*_refusal(job, missed, said))
    raise UsageError(*_refusal(" or ".join(waits_ok), "otherwise than COMPLETED", said))


def _states(text: str) -> dict[str, str]:
    """`ID|STATE` lines (squeue's or sacct's) as {id: state}; sacct's "CANCELLED by 0" is CANCELLED."""
    return {parts[0].strip(): (parts[1].split() or [""])[0]
            for line in text.splitlines() if len(parts := line.split("|")) > 1}


def _refusal(job: str, state: str, said: str = "") -> tuple[str, str]:
    return (f"--after {job}:ok: job {job} has already ended {state}, so this job could never start (SLURM would "
            "cancel it at once)" + (f"; sbatch --test-only: {said.splitlines()[-1]}" if said else ""),
            f"see why with `hpcjax status {job}`; run it after any ending with --after {job}:any, fix and rerun job "
            f"{job} first, or drop --after")
