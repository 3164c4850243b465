"""Chains on the local backend: a job submitted with --after waits, as SLURM's --dependency
makes a job wait, then starts, or is cancelled without starting when a dependency did not end
as asked (ok: it completed; any: it ended). SLURM's own side is two #SBATCH lines in the
script (--dependency, --kill-on-invalid-dep=yes) and the note of a job that never started
(launch.slurm)."""

from __future__ import annotations

import time

from hpcjax.launch.outcome import FINISHED_STATES


def start_after(run, started_here) -> None:
    """Start a LocalRun once every --after job has ended as asked; else end it CANCELLED, saying why.
    `started_here(job_id)`: the Run of a job this process started (which polls its own ranks)."""
    from hpcjax.launch import attach

    for job, when in run.spec.after:
        run.waiting_for = f"job {job} (--after {job}:{when})"
        dependency = started_here(job) or attach(job)  # another process's job: by its record
        while (state := dependency.state()) not in FINISHED_STATES:
            time.sleep(run.poll_s)
        if when == "ok" and state != "COMPLETED":
            with run.lock:
                run.start_error = f"not started: job {job} {state.lower()} (--after {job}:{when})"
                run.final = run._end("CANCELLED")
            return
    try:
        run.start()
    except Exception as error:  # the caller's wait sees a failed job that says why
        run.fail_to_start(error)
