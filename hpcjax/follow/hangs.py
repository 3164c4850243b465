"""A hung job's evidence, for the failure report: what the hang watch (hpcjax.rank.watch.hangwatch)
left in the log directory (the marker, and each rank's last step and stacks) turned into the
rank(s) that held the others, or, when every rank had finished its program and hung in
the interpreter's exit handlers, that.

Which rank(s) to blame is hpcjax.protocol.hangblame's rule, the one the rank that saw the hang
applied before it ended the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hpcjax.follow import stacks
from hpcjax.protocol import contract, hangblame
from hpcjax.protocol.stackgroups import signature, summary
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
        where = f"; its stack: {summary(signature(entry, False)[0][1])}" if entry and \
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
    marker = hangblame.read_json(read_text(str(contract.hang_marker_path(log_dir, job_id))))
    if marker is None:
        return None
    ranks = marker.get("ranks") if isinstance(marker.get("ranks"), int) else 0
    entries = hangblame.answers(lambda rank: read_text(str(contract.rank_hang_path(log_dir, job_id, rank))), ranks)
    return judge(entries, ranks, marker)


def judge(entries: list[dict], ranks: int, marker: dict) -> Hang:
    silent = hangblame.silent_ranks(entries, ranks)
    held_by, why = hangblame.blame(entries, ranks)
    seen = next((e for e in entries if e["rank"] == marker.get("rank")), {})
    seen_by = (f"rank {marker.get('rank')} on {marker.get('host', '?')} saw no progress for "
               f"{seen.get('idle_s', '?')} s (timeout {seen.get('timeout_s', '?')} s)")
    return Hang(tuple(sorted(entries, key=lambda e: e["rank"])), silent, held_by, why, seen_by)
