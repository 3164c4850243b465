"""A hung job's evidence, for the failure report: what the hang watch (hpcjax.rank.watch.hangwatch)
left in the log directory (the marker, and each rank's last step and stacks) turned into the
rank(s) that held the others, or, when every rank had finished its program and hung in
the interpreter's exit handlers, that.

The rank to blame is the one that did not reach the step the others reached; when every
rank that answered stopped at the same step, the one whose stack differs from the rest
(a rank asleep while the others wait in a collective); failing both, the ranks that did not
answer at all (a process holding Python's lock in native code cannot run its watch).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from hpcjax.protocol import contract
from hpcjax.follow import stacks
from hpcjax.values.nodelist import ranges


@dataclass(frozen=True)
class Hang:
    entries: tuple[dict, ...]  # the ranks that answered, by rank
    silent: tuple[int, ...]  # the ranks that wrote nothing
    held_by: tuple[int, ...]  # the rank(s) the others waited for
    why: str  # why those: "did not reach step 12, which ranks 0-2,4-7 reached"
    seen_by: str  # the rank that saw the hang, with its words on the timeout

    def reason(self, rank: int) -> str:
        entry = next((e for e in self.entries if e["rank"] == rank), None)
        where = f"; its stack: {stacks.summary(stacks.signature(entry, False)[0][1])}" if entry and \
            entry.get("threads") else ""
        return f"hung: {self.why}{where}"

    def stacks_text(self, job_id: str) -> str:
        text = stacks.report(job_id, list(self.entries), None)
        if self.silent:
            text += (f"\nranks {ranges(list(self.silent))} left no stacks (ended before the others "
                     "had written theirs, or stuck in native code holding Python's lock)\n")
        return text


def read(log_dir: Path, job_id: str, read_text) -> Hang | None:
    """The hang of job_id's last attempt, or None when its watch saw none."""
    marker = _json(read_text(str(contract.hang_marker_path(log_dir, job_id))))
    if marker is None:
        return None
    ranks = marker.get("ranks") if isinstance(marker.get("ranks"), int) else 0
    entries = []
    for rank in range(ranks):
        entry = _json(read_text(str(contract.rank_hang_path(log_dir, job_id, rank))))
        if entry is not None and entry.get("rank") == rank and isinstance(entry.get("threads", []), list):
            entries.append(entry)
    return judge(entries, ranks, marker)


def judge(entries: list[dict], ranks: int, marker: dict) -> Hang:
    answered = {e["rank"] for e in entries}
    silent = tuple(r for r in range(ranks) if r not in answered)
    steps = {e["rank"]: e["step"] for e in entries if isinstance(e.get("step"), int)}
    found = stacks.groups(entries)
    if len(set(steps.values())) > 1:
        top = max(steps.values())
        held_by = tuple(sorted(r for r, s in steps.items() if s < top))
        behind = ", ".join(f"rank {r} at step {steps[r]}" for r in held_by)
        why = (f"did not reach step {top}, which rank(s) {ranges(sorted(r for r in steps if steps[r] == top))} "
               f"reached ({behind})")
    elif len(found) > 1 and (len(found[0][0]) < len(found[-1][0]) or _outside_jax(found)):
        odd = _outside_jax(found) if len(found[0][0]) == len(found[-1][0]) else [found[0]]
        held_by = tuple(sorted(r for ranks, _ in odd for r in ranks))
        waiting = next(g for g in reversed(found) if g not in odd)
        why = (f"stuck elsewhere than the others, which wait in "
               f"{stacks.summary(waiting[1][0][1]) if waiting[1] else 'the same place'}")
    elif silent:
        held_by, why = silent, "did not answer the hang watch, while the others did"
    elif entries and not any(at_module_level(e) and not e.get("program_returned") for e in entries):
        held_by, why = (), ("every rank had finished its program, then hung at exit, in the interpreter's "
                            "exit handlers (JAX's distributed shutdown runs there): the work was done")
    else:
        held_by, why = (), "every rank stopped at the same place"
    seen = next((e for e in entries if e["rank"] == marker.get("rank")), {})
    seen_by = (f"rank {marker.get('rank')} on {marker.get('host', '?')} saw no progress for "
               f"{seen.get('idle_s', '?')} s (timeout {seen.get('timeout_s', '?')} s)")
    return Hang(tuple(sorted(entries, key=lambda e: e["rank"])), silent, held_by, why, seen_by)


def _outside_jax(found: list) -> list:
    """The stack groups not inside JAX, when the others all are: as many ranks wait in a collective
    (in JAX) as hold them up (two ranks: one each), the ones elsewhere are the holders."""
    def in_jax(signature) -> bool:
        return any(part in ("jax", "jaxlib") for _, frames in signature for frame in frames
                   for part in frame[1].split("/")[:-1])

    outside = [g for g in found if not in_jax(g[1])]
    return outside if outside and len(outside) < len(found) else []


def at_module_level(entry: dict) -> bool:
    """Whether a rank's main thread was still inside its program (a `<module>` frame: a script,
    `python -m`, `python -c`) rather than in the exit handlers that run after it."""
    main = next((t for t in entry.get("threads", []) if t.get("thread_name") == "MainThread"), None)
    return main is None or any(f.get("name") == "<module>" for f in main.get("frames", []))


def _json(text: str | None) -> dict | None:
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
