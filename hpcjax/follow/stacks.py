"""`hpcjax stacks JOBID`: the Python stack of every thread of every rank of a running job,
taken where the ranks run (hpcjax.rank.watch.stacks, with py-spy) and grouped: ranks whose stacks
are the same are shown once, the odd ones first, so the rank that holds the others stands out.

Where the node side runs is the backend's (SLURM: one task per node of the job, `srun
--overlap`, from a laptop through the cluster's login node with the hpcjax shipped there; the
local backend: this machine). A job that is not running, py-spy missing on a node, or ptrace
refused: an error with a hint, and the job is not touched. This is the login side of the two;
hpcjax.rank.watch.stacks is the node side.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from hpcjax.protocol.stackgroups import groups, summary
from hpcjax.values import jsonlines
from hpcjax.values.errors import HpcjaxError
from hpcjax.values.nodelist import ranges

PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent.parent)  # what puts hpcjax on a node's path


def take(run, backend, native: bool = False) -> tuple[list[dict], float]:
    """(one entry per rank, or per node that could not answer; seconds it took). The backend
    runs the node side where the ranks are (`backend.stacks`)."""
    state = run.poll()[0]
    if state != "RUNNING":
        raise HpcjaxError(f"job {run.job_id} is {state}, not running: there are no stacks to take",
                          f"`hpcjax status {run.job_id}` shows how it ended" if state not in ("PENDING", "REQUEUED")
                          else "wait until it runs")
    started = time.monotonic()
    python, package = sys.executable, PACKAGE_PARENT
    if run.host.remote:  # from a laptop: the nodes run the hpcjax shipped to the cluster, with its Python
        from hpcjax.hosts import ship

        python, package = run.cluster.python, ship.ship_hpcjax(run.host, run.cluster.home())[0]

    def node_side(job: str) -> list[str]:
        return [python, "-m", "hpcjax.rank.watch.stacks", job] + (["--native"] if native else [])

    out, err = backend.stacks(run, f"PYTHONPATH={package}", node_side)
    entries, broken = jsonlines.unframe(out)
    entries += [{"host": node, "error": f"the stacks from {node} arrived incomplete",
                 "hint": "take them again: `hpcjax stacks` reads each node's answer whole or not at all"}
                for node in broken]
    if not entries:
        said = err.strip().splitlines()
        raise HpcjaxError(f"could not take the stacks of job {run.job_id}: {said[-1] if said else 'no answer'}",
                          "hpcjax and py-spy must be installed where the job's nodes see them")
    return entries, time.monotonic() - started


def report(job_id: str, entries: list[dict], seconds: float | None, all_threads: bool = False) -> str:
    """The grouped stacks as text, the odd groups first, then what could not be read."""
    found = groups(entries, all_threads)
    answered = sum(len(r) for r, _ in found)
    hosts = {e["rank"]: e.get("host", "?") for e in entries if "rank" in e}
    taken = f", taken in {seconds:.1f} s" if seconds is not None else ""
    lines = [f"job {job_id}: stacks of {answered} rank(s) in {len(found)} group(s){taken}"]
    for ranks, sig in found:
        where = ", ".join(sorted({hosts[r] for r in ranks}))
        lines.append(f"\nranks {ranges(ranks)} ({where}): {summary(sig[0][1]) if sig else ''}")
        for name, frames in sig:
            lines.append(f"  thread {name or '?'}:")
            lines += [f"    {f[0]} ({f[1]}:{f[2]})" for f in frames]
    for entry in entries:
        if "error" in entry:
            who = f"rank {entry['rank']} on {entry['host']}" if "rank" in entry else entry["host"]
            lines.append(f"\n{who}: {entry['error']}\n  hint: {entry['hint']}")
    return "\n".join(lines) + "\n"
