"""What the command line does with a job once it has submitted it (submit, relaunch, smoke, hold):
follow it to its end and its exit status, and a Ctrl-C at any moment never leaves the user
guessing what became of the job."""

from __future__ import annotations

from hpcjax.values.errors import HpcjaxError
from hpcjax.values.voice import say


def submit_and_follow(sub, wait: bool) -> int:
    """Submit; follow the job to its end when asked, or when this process runs its ranks (the local
    backend): its exit code, and its failure report. Ctrl-C anywhere from here on, once the job
    exists too (launch.steps), never leaves the user guessing what became of it."""
    from hpcjax.launch import steps

    runs: list = []
    try:
        runs = steps.submit(sub)
        if not wait and not sub.backend.submitter_follows:
            return 0
        return max((ended_as(run) for run in runs), default=0)
    except KeyboardInterrupt as interrupt:
        return interrupted(steps.runs_of(interrupt) or runs)


def ended_as(run) -> int:
    outcome = run.wait()
    if not outcome.ok:
        say(outcome.report())
    return outcome.exit_code


def interrupted(runs: list) -> int:
    """Ctrl-C while a job is submitted or followed: a job its scheduler holds keeps running (say how
    to follow or cancel it); the ranks a backend's submitter follows are this process's children,
    so they stop (every element of an array that has not ended). Before the job had an id: nothing runs."""
    from hpcjax import backends
    from hpcjax.values import jobid

    if not runs:
        say("\ninterrupted before the job was submitted: nothing runs")
        return 130
    job = jobid.base(runs[0].job_id)
    if backends.get(runs[0].backend).submitter_follows:
        from hpcjax.follow.interrupts import uninterrupted

        with uninterrupted():  # a second Ctrl-C must not leave some of them running
            for run in runs:
                try:
                    run.cancel()
                except HpcjaxError:  # an element that has ended keeps its own end
                    pass
        say(f"\ninterrupted: stopped every process of local job {job}")
    else:
        say(f"\ninterrupted: job {job} keeps running on the cluster; follow it with `hpcjax status {job}` and "
            f"`hpcjax logs {job}`, or stop it with `hpcjax cancel {job}`")
    return 130


def interrupted_one(interrupt: KeyboardInterrupt, once_it_exists) -> int:
    """Ctrl-C while a one-run job (smoke, a hold) was submitted: `once_it_exists(run)`, else 'nothing runs'."""
    from hpcjax.launch import steps

    return once_it_exists(runs[0]) if (runs := steps.runs_of(interrupt)) else interrupted(runs)
