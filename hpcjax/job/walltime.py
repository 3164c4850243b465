"""SLURM's time limits as text and as seconds: the forms sbatch takes for --time (and sinfo and
sacctmgr print for a partition's or a QOS's limit), read and written back in one normal form."""

from __future__ import annotations

import re

from hpcjax.values.errors import SpecError

# SLURM's accepted walltime forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S.
WALLTIME = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")
UNLIMITED = "UNLIMITED"  # sbatch's --time=0, UNLIMITED or INFINITE: no limit beyond the partition's
# The longest limit SLURM keeps as given: past 2**31 - 1 seconds it wraps into another (measured on
# 20.11, 22.05, 24.11 and 26.05: 596523:00:00 is kept as 24855-03:00:00, 596524:00:00 becomes
# 2957761-01:49:00, and 99999999:00:00 2,973,620 days: issue 63). In whole minutes, as SLURM keeps it.
MOST_MINUTES = (2**31 - 1) // 60


def parse_walltime(text: str) -> int | None:
    """SLURM walltime text as seconds (None: no limit); SpecError if SLURM would not accept it."""
    hint = ("use SLURM's forms: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. 02:00:00), "
            "or 0 / UNLIMITED for no limit but the partition's")
    if isinstance(text, str) and (text.strip().upper() in (UNLIMITED, "INFINITE") or text.strip() == "0"):
        return None
    match = WALLTIME.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise SpecError(f"malformed walltime {text!r}", hint, field="time")
    days, first, second, third = match.groups()
    numbers = [int(x) for x in (first, second, third) if x is not None]
    if days is not None:  # D-H[:M[:S]]
        hours, minutes, seconds = (numbers + [0, 0])[:3]
        total = ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
        in_range = hours < 24 and minutes < 60 and seconds < 60
    elif len(numbers) == 3:  # H:M:S
        hours, minutes, seconds = numbers
        total, in_range = (hours * 60 + minutes) * 60 + seconds, minutes < 60 and seconds < 60
    elif len(numbers) == 2:  # M:S
        total, in_range = numbers[0] * 60 + numbers[1], numbers[1] < 60
    else:  # M
        total, in_range = numbers[0] * 60, True
    if not in_range or total <= 0:
        raise SpecError(f"walltime {text!r} is out of range", hint, field="time")
    if total > MOST_MINUTES * 60:
        raise SpecError(f"walltime {text!r} is longer than SLURM can keep (at most {MOST_MINUTES:,} minutes, about "
                        f"{MOST_MINUTES // 525960:,} years): SLURM would wrap it into another limit",
                        "give the time the job needs, or 0 / UNLIMITED for no limit but the partition's", field="time")
    return total


def format_walltime(seconds: int | None) -> str:
    if seconds is None:
        return UNLIMITED
    days, rest = divmod(seconds, 86400)
    clock = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{clock}" if days else clock
