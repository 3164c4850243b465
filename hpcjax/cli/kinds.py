"""The kinds of value an option takes, as argparse types: a bad value is refused while the
command line is read, with the value, what is valid and an example (the house error format
comes from cli.options.Parser)."""

from __future__ import annotations

import argparse


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
