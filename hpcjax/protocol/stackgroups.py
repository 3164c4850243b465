"""Ranks whose Python stacks are the same, in the shape py-spy gives (each rank's threads, each
thread's frames innermost first). The rank side's hang watch writes that shape and judges its
hang with these groups (hpcjax.protocol.hangblame); `hpcjax stacks` shows them (hpcjax.follow.stacks).
Standard library only."""

from __future__ import annotations


def signature(entry: dict, all_threads: bool) -> tuple:
    """What makes two ranks' stacks the same: each thread's frames (function, file, line);
    without all_threads only the main thread's."""
    threads = [t for t in entry.get("threads", []) if all_threads or t.get("thread_name") == "MainThread"] or \
        entry.get("threads", [])[:1]
    return tuple((t.get("thread_name") or "", tuple((f["name"], f["short_filename"], f["line"]) for f in t["frames"]))
                 for t in threads)


def groups(entries: list[dict], all_threads: bool = False) -> list[tuple[list[int], tuple]]:
    """[(ranks, signature)] of the ranks that answered, the smallest groups first."""
    found: dict[tuple, list[int]] = {}
    for entry in entries:
        if "threads" in entry:
            found.setdefault(signature(entry, all_threads), []).append(entry["rank"])
    return sorted(((sorted(ranks), sig) for sig, ranks in found.items()), key=lambda g: (len(g[0]), g[0]))


def summary(frames: tuple) -> str:
    """The innermost frames in one line: `all_reduce <- train_step (train.py:88)`."""
    if not frames:
        return "(no Python frames)"
    own = [f for f in frames if not f[1].startswith("<frozen")] or list(frames)
    first, caller = own[0], next((f for f in own[1:] if f[1] != own[0][1]), own[1] if len(own) > 1 else None)
    return f"{first[0]} ({first[1]}:{first[2]})" + (f" <- {caller[0]} ({caller[1]}:{caller[2]})" if caller else "")
