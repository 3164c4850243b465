"""A job's rank logs read as streams, for the failure analysis and `hpcjax logs`: tails from
the files' ends in one batch (one round trip over SSH), the first failure by a scan a chunk
at a time, sizes from the filesystem. Never a whole log in memory, nor the logs of every
rank of a 512-rank job: the analysis reads the tails of the ranks it blames and of a few of
the ranks srun stopped (their logs show the consequences, all alike).
"""

from __future__ import annotations

import re
from collections import deque

from hpcjax.hosts.files import LocalFiles
from hpcjax.follow.triage import ANY_CAUSE, classify, first_cause

TAIL_BYTES = 64 << 10  # of each log read for its tail: 200 lines of up to ~320 characters
SCAN_LIMIT = 16 << 20  # without grep -P, a log is scanned for its first failure up to this many bytes
# XLA's fatal errors print a C++ stack of addresses: noise in a report.
STACK_NOISE = re.compile(r"^\s+@\s+0x[0-9a-f]+|^\*\*\* Check failure stack trace")
LOCAL = LocalFiles()


def tail_lines(text: str, count: int | None) -> str:
    if count is None:
        return text
    lines = text.splitlines(keepends=True)
    return "".join(lines[-count:]) if count > 0 else ""


def cut_start(data: bytes | None, size: int) -> bytes:
    """A file's last `size` bytes without the line the read began inside of (when it began mid-file)."""
    if not data:
        return b""
    return data[data.find(b"\n") + 1:] if len(data) >= size else data


def without_noise(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not STACK_NOISE.match(line))


class RankLogs:
    """The logs of one job's ranks: `rank_log(rank)` is a path, read through `files` (this
    machine's, or a login node's). `clean`: C++ stack addresses left out (for a report)."""

    def __init__(self, rank_log, files=LOCAL, clean: bool = True) -> None:
        self.rank_log, self.files, self.clean = rank_log, files, clean
        self.ends: dict[int, tuple[bytes, bool]] = {}  # rank -> (last bytes, whether the log is longer)

    def fetch(self, ranks) -> None:
        """Read the tails of these ranks' logs, all at once."""
        missing = [r for r in dict.fromkeys(ranks) if r not in self.ends]
        if not missing:
            return
        paths = {r: str(self.rank_log(r)) for r in missing}
        found = self.files.read_ends(list(paths.values()), TAIL_BYTES)
        for rank, path in paths.items():
            data = found.get(path) or b""
            self.ends[rank] = (cut_start(data, TAIL_BYTES), len(data) >= TAIL_BYTES)

    def tail(self, rank: int, count: int | None) -> str:
        """The last `count` lines (None: all) of the rank's log; from its end when they are in
        the last TAIL_BYTES, else by one pass over the log that keeps only `count` lines."""
        self.fetch([rank])
        data, longer = self.ends[rank]
        text = data.decode(errors="replace")
        text = without_noise(text) if self.clean else text
        if not longer or (count is not None and text.count("\n") >= count):
            return tail_lines(text, count)
        kept: deque[str] = deque(maxlen=count)
        for line in self.lines(rank):
            if not (self.clean and STACK_NOISE.match(line)):
                kept.append(line)
        return "".join(kept)

    def lines(self, rank: int):
        """The rank's log line by line (the last may lack its newline), read a chunk at a time."""
        carry = b""
        for chunk in self.files.read_chunks(str(self.rank_log(rank))):
            data = carry + chunk
            cut = data.rfind(b"\n") + 1
            data, carry = data[:cut], data[cut:]
            yield from data.decode(errors="replace").splitlines(keepends=True)
        if carry:
            yield carry.decode(errors="replace")

    def first_failure(self, rank: int) -> str:
        """The first line of the rank's log that shows a known cause ('' when none does): by the
        host's grep where it has -P, else scanned here a chunk at a time (at most SCAN_LIMIT bytes)."""
        path = str(self.rank_log(rank))
        line = self.files.first_match(path, ANY_CAUSE.pattern)
        if line is not None:
            return line.strip() if line and classify(line) else ""  # Python's reading of the line decides
        carry, seen = b"", 0
        for chunk in self.files.read_chunks(path):
            data = carry + chunk
            cut = data.rfind(b"\n") + 1
            data, carry = data[:cut], data[cut:]
            line = first_cause(data.decode(errors="replace"))
            if line:
                return line
            seen += len(chunk)
            if seen >= SCAN_LIMIT:
                return ""
        return first_cause(carry.decode(errors="replace"))


def triaged(logs: RankLogs, ranks, lines: int, scan: bool) -> dict[str, str]:
    """{"rank R log": the last `lines` of its log} for each rank; with `scan` (the blamed ranks),
    a log whose tail shows no known cause also gives the first line that shows one."""
    logs.fetch(ranks)
    texts = {}
    for rank in ranks:
        text = logs.tail(rank, lines)
        if scan and not classify(text):
            first = logs.first_failure(rank)
            text = f"{first}\n{text}" if first else text
        texts[f"rank {rank} log"] = text
    return texts
