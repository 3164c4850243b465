"""Chains on the local backend: a job submitted with --after waits, as SLURM's --dependency makes
a job wait, then starts, or is cancelled without starting when a dependency did not end as asked
(ok: it completed; any: it ended): `start_after`, and a sweep's elements together in
localjobs.queue. (SLURM's side is two #SBATCH lines in its script and the note of a job that never
started, hpcjax.slurm.job; that every dependency is a job the target knows is checked before
anything is submitted, hpcjax.launch.refusals.)"""

from __future__ import annotations

import time

from hpcjax.localjobs import TICK_S
from hpcjax.protocol.contract import FINISHED_STATES


def unmet(after, find, waiting=lambda text: None, cancelled=lambda: False) -> str:
    """Wait until every dependency has ended; '' when each ended as asked, else why not (or
    when `cancelled()` says the waiting job was cancelled meanwhile). `find(job)`: its Run (one
    this process started polls its own ranks; another process's job is followed by its record)."""
    for job, when in after:
        waiting(f"job {job} (--after {job}:{when})")
        dependency = find(job)
        while (state := dependency.state()) not in FINISHED_STATES:
            if cancelled():
                return "cancelled while it waited to start"
            time.sleep(TICK_S)
        if when == "ok" and state != "COMPLETED":
            return f"not started: job {job} {state.lower()} (--after {job}:{when})"
    return ""


def start_after(run, find) -> None:
    """Start a LocalRun once every --after job has ended as asked; else end it CANCELLED, saying why."""
    why = unmet(run.spec.after, find, lambda text: setattr(run, "waiting_for", text), run.cancelled_elsewhere)
    if why:
        run.end_unstarted("CANCELLED", why)
        return
    try:
        run.start()
    except Exception as error:  # the caller's wait sees a failed job that says why
        run.end_unstarted("FAILED", f"the job's processes could not be started: {error}")
