"""A job array on the local backend: every element is a job of its own (named A_i, as SLURM
names array elements), started in order by a scheduler thread, at most `array_parallel` at
once (default: this machine's CPUs over the processes of one element). An element waits
PENDING for its slot; one cancelled before its turn never starts.

The scheduler is not a daemon: like concurrent.futures, the program waits for its array
at exit, so no element is left unstarted and no rank is orphaned.
"""

from __future__ import annotations

import os
import threading
import time

from hpcjax.catalog import records
from hpcjax.values import jobid
from hpcjax.localjobs import TICK_S, chains
from hpcjax.localjobs.processes import LocalRun
from hpcjax.protocol.contract import FINISHED_STATES
from hpcjax.job.spec import JobSpec


def default_slots(spec: JobSpec) -> int:
    return max(1, (os.cpu_count() or 1) // spec.layout.num_processes)


def make(spec: JobSpec) -> tuple[str, list[LocalRun]]:
    """The array's id (claimed) and one LocalRun per element, in order, none started (their records
    are the record step's, then release starts them)."""
    array_id = records.new_local_id(int(time.time() * 1000))
    return array_id, [LocalRun(f"{array_id}_{index}", spec, element=index) for index in range(spec.array)]


def release(runs: list[LocalRun], find) -> None:
    """The recorded elements, the first ones started at once (after the array's dependencies, if it
    has any, as SLURM starts an array's elements: `find(job)`, a dependency's Run)."""
    for run in runs:
        run.save_record("PENDING")
    spec = runs[0].spec
    slots = spec.array_parallel or default_slots(spec)
    threading.Thread(target=schedule, args=(runs, slots, find), name=f"hpcjax-local-array-{jobid.base(runs[0].job_id)}").start()


def schedule(runs: list[LocalRun], slots: int, find) -> None:
    """Start the elements in order, keeping at most `slots` running; follow them to their end.
    With --after, none starts before the dependencies have ended as asked, and none ever when one did not."""
    why = chains.unmet(runs[0].spec.after, find, lambda text: [setattr(r, "waiting_for", text) for r in runs],
                       lambda: all(r.cancelled_elsewhere() for r in runs))
    if why:
        for run in runs:
            run.end_unstarted("CANCELLED", why)
        return
    waiting, running = list(runs), []
    while waiting or running:
        while waiting and len(running) < slots:
            run = waiting.pop(0)
            try:  # one cancelled by `hpcjax cancel` from another process ends without starting
                run.start()
            except Exception as error:  # the caller's wait sees a failed element that says why
                run.end_unstarted("FAILED", f"the job's processes could not be started: {error}")
                continue
            running.append(run)
        for run in list(running):
            if run.poll()[0] in FINISHED_STATES:
                running.remove(run)
        time.sleep(TICK_S)
