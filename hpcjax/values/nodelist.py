"""Expand SLURM hostlists ("node[1-2]-ib", "rack[1-2]-n[01-02]", "a,b[3,5-6]") into host names.

Written here rather than borrowed: JAX's own parser misreads `node[5]` and
suffixes after a bracket, SLURM 22.05's `scontrol show hostnames` rejects
`node[1-2]-ib`, and inside a container neither scontrol nor a hostlist library
can be assumed. Expansion follows SLURM's order: the leftmost bracket varies
slowest; a range keeps the zero padding of its first number. The one expander of the
package: the ranks (the coordinator's host), and the login side (the hosts of a job's ranks,
its nodes for `hpcjax stacks` and `tunnel`). Standard library only.
"""

from __future__ import annotations

import itertools
import re

from hpcjax.values.errors import LayoutError

_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


class HostlistError(LayoutError):
    """A hostlist SLURM could not have produced."""


def _bad(hostlist: str, why: str) -> HostlistError:
    return HostlistError(f"cannot read hostlist {hostlist!r}: {why}",
                         "SLURM writes hostlists like node[1-4], gpu[01-08]-ib or a1,b[2,5-7]")


def _split_top_level(hostlist: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(hostlist):
        if char == "[":
            depth += 1
            if depth > 1:
                raise _bad(hostlist, "nested brackets")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise _bad(hostlist, "']' without '['")
        elif char == "," and depth == 0:
            parts.append(hostlist[start:i])
            start = i + 1
    if depth:
        raise _bad(hostlist, "'[' without ']'")
    parts.append(hostlist[start:])
    return parts


def _expand_bracket(body: str, hostlist: str) -> list[str]:
    values = []
    for item in body.split(","):
        match = _RANGE.fullmatch(item.strip())
        if not match:
            raise _bad(hostlist, f"[{body}] is not a list of numbers and ranges")
        first, last = match.group(1), match.group(2) or match.group(1)
        if int(last) < int(first):
            raise _bad(hostlist, f"range {item} runs backwards")
        width = len(first)
        values.extend(str(n).zfill(width) for n in range(int(first), int(last) + 1))
    return values


def _expand_pattern(pattern: str, hostlist: str) -> list[str]:
    pieces = re.split(r"\[([^\]]*)\]", pattern)  # text, bracket, text, bracket, ..., text
    choices = [[piece] if i % 2 == 0 else _expand_bracket(piece, hostlist)
               for i, piece in enumerate(pieces)]
    return ["".join(combo) for combo in itertools.product(*choices)]


def expand_hostlist(hostlist: str) -> list[str]:
    """All hosts of a SLURM hostlist, in SLURM's order."""
    text = hostlist.strip()
    if not text:
        raise _bad(hostlist, "it is empty")
    hosts = []
    for pattern in _split_top_level(text):
        if not pattern:
            raise _bad(hostlist, "an empty entry between commas")
        hosts.extend(_expand_pattern(pattern, hostlist))
    return hosts


def ranges(numbers: list[int], separator: str = ",") -> str:
    """Sorted numbers in the range notation SLURM's lists use: [0, 1, 2, 4, 5, 7] -> '0-2,4-5,7'
    (ranks, task ids, node indices; `separator` ", " for a sentence)."""
    out, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            out.append(f"{start}-{n}" if n != start else str(n))
            start = None
    return separator.join(out)
