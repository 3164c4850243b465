"""JSON lines, read one way everywhere: files hpcjax appends to (metrics, reports, attempts)
and output that crossed srun.

A file appended by a process that may be killed mid-write ends with a torn line; a line
another program wrote may not be an object. `objects(text)` keeps the lines that are JSON
objects and skips the rest, so a reader never fails on what it cannot use.

srun merges the output of many tasks and may cut a long line into pieces, interleaved with
other tasks' lines (measured: a 2 kB line arrived in pieces). What a node-side program sends
back through srun therefore goes as frames: `frame(obj, sender)` cuts the JSON text into
short lines, each tagged with its sender, number and count; `unframe(text)` puts every
sender's frames back together and says which senders' messages arrived incomplete.
Standard library only (imported on every rank and on the login side).
"""

from __future__ import annotations

import base64
import json
import re
import zlib

FRAME = "@hpcjax-frame"
FRAME_BYTES = 400  # of encoded payload per line: far under any cut srun makes
FRAME_LINE = re.compile(rf"{FRAME} (?P<sender>[A-Za-z0-9_.:-]+) (?P<message>\d+) (?P<part>\d+)/(?P<parts>\d+) "
                        r"(?P<data>[A-Za-z0-9+/=]*)$")


def lines(text: str | None) -> list[str]:
    """The lines of JSON-lines text: cut at \\n only (str.splitlines would also cut at \\x85 or
    \\u2028 inside a JSON string), the empty end of the last line dropped."""
    found = (text or "").split("\n")
    return found[:-1] if found and found[-1] == "" else found


def parse(line: str) -> tuple[dict | None, str]:
    """(the JSON object a line holds, '') or (None, why it holds none)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None, "is cut short (a killed writer?) or not JSON"
    if not isinstance(value, dict):
        return None, f"is a JSON {type(value).__name__}, not an object"
    return value, ""


def object_of(line: str) -> dict | None:
    """The JSON object on a line (any other output: None)."""
    line = line.strip()
    return parse(line)[0] if line.startswith("{") else None


def objects(text: str | None) -> list[dict]:
    """The lines of `text` that are JSON objects, in order; torn or foreign lines skipped."""
    return [value for line in lines(text) if (value := object_of(line)) is not None]


def frame(obj, sender: str, message: int = 0) -> list[str]:
    """`obj` as lines of at most ~460 characters (the sender: a name of letters, digits and ._:-)."""
    if not re.fullmatch(r"[A-Za-z0-9_.:-]+", sender):
        raise ValueError(f"a frame's sender is a plain name, not {sender!r}")
    data = base64.b64encode(zlib.compress(json.dumps(obj).encode(), 6)).decode()
    pieces = [data[i:i + FRAME_BYTES] for i in range(0, len(data), FRAME_BYTES)] or [""]
    return [f"{FRAME} {sender} {message} {i + 1}/{len(pieces)} {piece}" for i, piece in enumerate(pieces)]


def unframe(text: str) -> tuple[list, list[str]]:
    """(every whole message, in the order of its first frame; the senders whose messages are
    incomplete or damaged). Lines that are not frames are ignored."""
    parts: dict[tuple[str, str], dict[int, str]] = {}
    counts: dict[tuple[str, str], int] = {}
    for line in text.splitlines():
        start = line.find(FRAME)
        match = FRAME_LINE.match(line[start:].rstrip()) if start >= 0 else None
        if match is None:
            continue
        key = (match["sender"], match["message"])
        parts.setdefault(key, {})[int(match["part"])] = match["data"]
        counts[key] = int(match["parts"])
    whole, broken = [], []
    for key, pieces in parts.items():
        if set(pieces) != set(range(1, counts[key] + 1)):
            broken.append(key[0])
            continue
        try:
            whole.append(json.loads(zlib.decompress(base64.b64decode("".join(pieces[i] for i in sorted(pieces))))))
        except (ValueError, zlib.error):
            broken.append(key[0])
    return whole, sorted(set(broken))
