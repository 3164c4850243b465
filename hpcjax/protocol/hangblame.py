"""Which rank(s) held the others in a hang, from what every rank left when the hang watch
ended the job (hpcjax.rank.watch.hangwatch: each rank's last step and stacks). The rank that saw
the hang judges it before it ends the job, so that the batch script's record of the attempt
names the held rank's node, not its own (stop 60's CI: the watch of a rank that waited saw the hang
first); the failure report judges the same evidence again (hpcjax.follow.hangs). Standard
library only.

The rank to blame is the one that did not reach the step the others reached; when every
rank that answered stopped at the same step, the one whose stack differs from the rest
(a rank asleep while the others wait in a collective); failing both, the ranks that did not
answer at all (a process holding Python's lock in native code cannot run its watch).
"""

from __future__ import annotations

import json
from typing import Callable

from hpcjax.protocol.stackgroups import groups, summary
from hpcjax.values.nodelist import ranges


def answers(read_text: Callable[[int], str | None], ranks: int) -> list[dict]:
    """What each of the ranks 0..ranks-1 left (read_text(rank): its file's text, None if absent),
    by rank; a file that is missing, partial or not a rank's answer is left out."""
    entries = []
    for rank in range(ranks):
        entry = read_json(read_text(rank))
        if entry is not None and entry.get("rank") == rank and isinstance(entry.get("threads", []), list):
            entries.append(entry)
    return entries


def blame(entries: list[dict], ranks: int) -> tuple[tuple[int, ...], str]:
    """(the rank(s) the others waited for, possibly none; why those, in words)."""
    silent = silent_ranks(entries, ranks)
    steps = {e["rank"]: e["step"] for e in entries if isinstance(e.get("step"), int)}
    found = groups(entries)
    if len(set(steps.values())) > 1:
        top = max(steps.values())
        held_by = tuple(sorted(r for r, s in steps.items() if s < top))
        behind = ", ".join(f"rank {r} at step {steps[r]}" for r in held_by)
        return held_by, (f"did not reach step {top}, which rank(s) "
                         f"{ranges(sorted(r for r in steps if steps[r] == top))} reached ({behind})")
    if len(found) > 1 and (len(found[0][0]) < len(found[-1][0]) or _outside_jax(found)):
        odd = _outside_jax(found) if len(found[0][0]) == len(found[-1][0]) else [found[0]]
        waiting = next(g for g in reversed(found) if g not in odd)
        return (tuple(sorted(r for ranks_, _ in odd for r in ranks_)),
                f"stuck elsewhere than the others, which wait in "
                f"{summary(waiting[1][0][1]) if waiting[1] else 'the same place'}")
    if silent:
        return silent, "did not answer the hang watch, while the others did"
    if entries and not any(at_module_level(e) and not e.get("program_returned") for e in entries):
        return (), ("every rank had finished its program, then hung at exit, in the interpreter's "
                    "exit handlers (JAX's distributed shutdown runs there): the work was done")
    return (), "every rank stopped at the same place"


def silent_ranks(entries: list[dict], ranks: int) -> tuple[int, ...]:
    """The ranks that left nothing."""
    answered = {e["rank"] for e in entries}
    return tuple(r for r in range(ranks) if r not in answered)


def nodes(entries: list[dict], held_by: tuple[int, ...], node_of: Callable[[int], str | None]) -> list[str]:
    """The held ranks' nodes, each once: the one each answered from, else node_of(rank) (a rank that
    left nothing: where the job's layout placed it, placement.rank_node)."""
    answered = {e["rank"]: e.get("host") for e in entries}
    return sorted({node for rank in held_by if (node := answered.get(rank) or node_of(rank))})


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


def read_json(text: str | None) -> dict | None:
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
