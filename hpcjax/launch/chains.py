"""Chains: a job submitted with --after waits, as SLURM's --dependency makes a job wait, then
starts, or is cancelled without starting when a dependency did not end as asked (ok: it
completed; any: it ended).

Every dependency must be a job the target knows before anything is submitted: SLURM drops a
dependency on a job id it does not know and starts the job at once, so the order the user
asked for would be lost without a word (`check_known`). SLURM's own side is two #SBATCH
lines in the script (--dependency, --kill-on-invalid-dep=yes) and the note of a job that never
started (launch.slurm); the local backend waits here (`start_after`, and a sweep's elements
together in launch.localqueue)."""

from __future__ import annotations

import time

from hpcjax.errors import HpcjaxError, UsageError
from hpcjax.launch.outcome import FINISHED_STATES

POLL_S = 0.2


def check_known(after, state_of, where: str) -> None:
    """Refuse a dependency the target does not know. `state_of(job)` raises HpcjaxError for one."""
    for job, when in after:
        try:
            state_of(job)
        except HpcjaxError as error:
            raise UsageError(f"--after {job}:{when}: {where} knows no job {job} ({error.message.splitlines()[0]})",
                             "give the id `hpcjax submit` printed (`hpcjax runs` lists them); SLURM would drop a "
                             "dependency on an unknown job and start this one at once") from None


def local_state(job: str, started_here) -> str:
    """A dependency's state as the local backend sees it: a job this process started, or one with
    a record (another process's local job, or a SLURM job hpcjax knows)."""
    from hpcjax.catalog import records
    from hpcjax.launch import attach

    run = started_here(job)
    if run is None and records.load(job) is None:
        raise HpcjaxError(f"no record of job {job} in {records.records_dir()}")
    return (run or attach(job)).state()


def unmet(after, started_here, waiting=lambda text: None, cancelled=lambda: False) -> str:
    """Wait until every dependency has ended; '' when each ended as asked, else why not (or
    when `cancelled()` says the waiting job was cancelled meanwhile)."""
    from hpcjax.launch import attach

    for job, when in after:
        waiting(f"job {job} (--after {job}:{when})")
        dependency = started_here(job) or attach(job)  # another process's job: by its record
        while (state := dependency.state()) not in FINISHED_STATES:
            if cancelled():
                return "cancelled while it waited to start"
            time.sleep(POLL_S)
        if when == "ok" and state != "COMPLETED":
            return f"not started: job {job} {state.lower()} (--after {job}:{when})"
    return ""


def start_after(run, started_here) -> None:
    """Start a LocalRun once every --after job has ended as asked; else end it CANCELLED, saying why.
    `started_here(job_id)`: the Run of a job this process started (which polls its own ranks)."""
    why = unmet(run.spec.after, started_here, lambda text: setattr(run, "waiting_for", text), run.cancelled_elsewhere)
    if why:
        run.end_unstarted("CANCELLED", why)
        return
    try:
        run.start()
    except Exception as error:  # the caller's wait sees a failed job that says why
        run.end_unstarted("FAILED", f"the job's processes could not be started: {error}")
