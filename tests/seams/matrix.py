"""The seam matrix (issue 34, part 1): which entry point, on which target, followed up how.

Three factors. Every pair of their values that can meet appears in at least one cell (a
pairwise covering set, chosen greedily here, cheapest cells first), so every verb meets every
entry point and every target without running the full product. What every cell checks besides
its follow-up (status, status --json, logs, runs, runs show, fetch, report) is in
test_seam_matrix.py.
"""

from __future__ import annotations

import itertools

ENTRIES = ("submit", "train", "smoke", "relaunch", "sweep", "chain", "trainer", "remote_submit", "remote_map")
TARGETS = ("local", "slurm", "hold", "ssh")  # hold: SLURM here, inside a held allocation (--on)
# How each cell is followed up while it runs (the observations after it ends are in every cell):
#   watch         wait for it, as `submit --wait` or the API does
#   follow        `hpcjax logs --follow` from its start to its end
#   stacks        `hpcjax stacks` while every rank waits in a known place, then let it finish
#   hang_short    a rank stops; the hang watch with HPCJAX_HANG_FLOOR=10 ends the job and names it
#   hang_default  the same with every knob at its default (the floor is 300 s)
#   requeue       SLURM requeues it while it runs (`scontrol requeue`, as a preemption does)
#   cancel        `hpcjax cancel` while it runs (a chain's link: while it waits for the first)
FOLLOW_UPS = ("watch", "follow", "stacks", "hang_short", "hang_default", "requeue", "cancel")
FACTORS = {"entry": ENTRIES, "target": TARGETS, "follow_up": FOLLOW_UPS}

# Seconds a cell takes on the 2-core dev cluster, roughly: the greedy choice prefers cheap cells.
ENTRY_COST = {"submit": 8, "train": 40, "smoke": 15, "relaunch": 14, "sweep": 10, "chain": 12, "trainer": 20,
              "remote_submit": 18, "remote_map": 22}
TARGET_COST = {"local": 0, "slurm": 3, "hold": 6, "ssh": 10}
FOLLOW_UP_COST = {"watch": 0, "follow": 2, "stacks": 6, "hang_short": 25, "hang_default": 330, "requeue": 25,
                  "cancel": 4}


def allowed(cell: dict) -> bool:
    """Whether a cell means something (a smoke test runs only hpcjax's checks; only SLURM requeues)."""
    entry, target, follow_up = cell["entry"], cell["target"], cell["follow_up"]
    if entry == "smoke" and follow_up not in ("watch", "follow", "cancel"):
        return False  # its program is hpcjax's own checks: nothing to hold, hang or requeue
    if follow_up == "requeue" and target in ("local", "hold"):
        return False  # the local backend does not requeue (it refuses --requeue), nor does a job in a hold
    if target == "hold" and (entry in ("sweep", "chain") or (entry, follow_up) == ("smoke", "cancel")):
        return False  # a hold runs one job at a time (no array, no --after), at once (nothing pending)
    if follow_up == "hang_default" and (entry not in ("submit", "trainer") or target != "slurm"):
        # 5 minutes each: the two ways a program reports progress (a plain script's progress(), a
        # Trainer's reports), where the defect was met (the watch's rule is the same on every target)
        return False
    return True


def cost(cell: dict) -> int:
    return ENTRY_COST[cell["entry"]] + TARGET_COST[cell["target"]] + FOLLOW_UP_COST[cell["follow_up"]]


def pairs(cell: dict) -> set:
    return {((a, cell[a]), (b, cell[b])) for a, b in itertools.combinations(cell, 2)}


def pairwise(factors: dict = FACTORS, allowed=allowed, cost=cost) -> list[dict]:
    """A covering set: every pair of values that some allowed cell holds is in a chosen cell.
    Greedy: the cell covering the most pairs not covered yet, the cheapest among those."""
    candidates = [dict(zip(factors, values)) for values in itertools.product(*factors.values())]
    candidates = sorted((c for c in candidates if allowed(c)), key=cost)
    needed = set().union(*(pairs(c) for c in candidates))
    chosen = []
    while needed:
        best = max(candidates, key=lambda c: len(pairs(c) & needed))  # the first (cheapest) of the best
        chosen.append(best)
        needed -= pairs(best)
    return chosen


def name(cell: dict) -> str:
    return f"{cell['entry']}-{cell['target']}-{cell['follow_up']}"


CELLS = pairwise()
