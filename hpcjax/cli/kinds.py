"""The kinds of value an option takes, as argparse types: a bad value is refused while the
command line is read, with the value, what is valid and an example (the house error format
comes from cli.parsing.Parser)."""

from __future__ import annotations

import argparse
import re

from hpcjax.values.errors import UsageError

SIZE = re.compile(r"(\d+)([KMG]?)", re.IGNORECASE)


def _integer(text: str, low: int, high: int | None, what: str, example: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < low or (high is not None and value > high):
        valid = f"{low}..{high}" if high is not None else f"at least {low}"
        raise argparse.ArgumentTypeError(f"{text!r} is not {what} ({valid}), e.g. {example}")
    return value


def positive(text: str) -> int:
    """A count of at least 1."""
    return _integer(text, 1, None, "a whole number", "5")


def count(text: str) -> int:
    """A count of at least 0."""
    return _integer(text, 0, None, "a whole number", "20")


def port(text: str) -> int:
    """A TCP port a program can listen on or be reached at."""
    return _integer(text, 1, 65535, "a TCP port", "6006")


def parse_size(text: str) -> int:
    match = SIZE.fullmatch(text.strip())
    if not match or int(match[1]) <= 0:
        raise UsageError(f"malformed size {text!r}", "sizes are bytes with an optional K, M or G: 4K, 64M")
    return int(match[1]) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match[2].upper()]


def parse_sizes(text: str) -> tuple[int, ...]:
    """'4K:64M' = every power of 4 from 4 KiB to 64 MiB; '4K,1M' = exactly those."""
    if ":" in text:
        low, high = (parse_size(part) for part in text.split(":", 1))
        if high < low:
            raise UsageError(f"size range {text!r} runs backwards", "write MIN:MAX, e.g. 4K:64M")
        sizes = [low]
        while sizes[-1] * 4 <= high:
            sizes.append(sizes[-1] * 4)
        return tuple(sizes)
    return tuple(parse_size(part) for part in text.split(","))
