"""Exit statuses as a shell says them, on both sides of a job: a process's own code, or 128+N
for one killed by signal N, whatever reported it (Python's returncode -N, srun's words for the
signal, srun's own exit status N). One rule, read by the batch script (hpcjax.slurm.script renders
the words), the outcome of any backend (hpcjax.follow.outcome) and its reports. Standard library
only.
"""

from __future__ import annotations

import re
import signal
from functools import lru_cache

EXITED = re.compile(r"Exited with exit code (\d+)")  # srun's words for a task that exited by itself
KILLED_BY = re.compile(r"Killed by signal (SIG[A-Z0-9]+)")  # the local backend's (exit_words)


def shell_status(code: int | None) -> int:
    """A failed process's status as a shell says it: 128+N for one killed by signal N (Python's
    returncode -N); codes outside 1..255 (None, or an impossible one) become 1, never 0."""
    if code is not None and -64 < code < 0:
        return 128 - code
    return code if code is not None and 0 < code < 256 else 1


@lru_cache(maxsize=1)
def signal_words() -> dict[str, int]:
    """The words srun uses for a task a signal killed (the C library's strsignal: "Interrupt",
    "Killed", "Segmentation fault", ...) and the signal's number."""
    words = {}
    for number in sorted(signal.Signals, reverse=True):  # the lowest number wins a shared name
        text = signal.strsignal(number)
        if text and not text.startswith(("Unknown signal", "Real-time signal")):
            words[text] = int(number)
    return words


def status_of(what: str) -> int | None:
    """The status a shell would give a task that ended as srun's (or exit_words') words say: its
    exit code, or 128+N for signal N; None when the words name no status."""
    if (match := EXITED.fullmatch(what)) and 0 < int(match[1]) < 256:
        return int(match[1])
    if (match := KILLED_BY.fullmatch(what)) and hasattr(signal, match[1]):
        return 128 + int(getattr(signal, match[1]))
    number = signal_words().get(what.removesuffix(" (core dumped)"))
    return 128 + number if number else None


def exit_words(code: int) -> str:
    """A process's end (Python's returncode) in srun's words."""
    if code < 0:
        try:
            return f"Killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"Killed by signal {-code}"
    return f"Exited with exit code {code}"
