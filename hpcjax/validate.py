"""The house rule for a bad value, written once: what was wrong with the value,
what would be valid, and a hint. Used by the job spec (login side) and the
training configuration (every rank). Standard library only."""

from __future__ import annotations

from hpcjax.errors import UsageError


def require_int(name: str, value: object, minimum: int, hint: str, error=UsageError) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise error(f"{name} must be an integer >= {minimum}, got {value!r}", hint)


def require_number(name: str, value: object, hint: str, *, above: float | None = None,
                   at_least: float | None = None, at_most: float | None = None, error=UsageError) -> None:
    """A float (or int) within bounds: `above` is exclusive, `at_least`/`at_most` inclusive."""
    bounds = [f"> {above:g}" if above is not None else "", f">= {at_least:g}" if at_least is not None else "",
              f"<= {at_most:g}" if at_most is not None else ""]
    wanted = " and ".join(b for b in bounds if b)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # not NaN
    ok = ok and (above is None or value > above) and (at_least is None or value >= at_least) \
        and (at_most is None or value <= at_most)
    if not ok:
        raise error(f"{name} must be a number {wanted}, got {value!r}", hint)


def require_choice(name: str, value: object, choices: tuple[str, ...], error=UsageError) -> None:
    if value not in choices:
        raise error(f"unknown {name} {value!r}", f"valid values: {', '.join(choices)}")


def require_text(name: str, value: object, *, spaces: bool = True, error=UsageError) -> None:
    """A non-empty string that quoting can carry into an #SBATCH line or argv: no control
    characters (newline, tab, ...); with spaces=False, no space either (SLURM names)."""
    if not isinstance(value, str) or not value:
        raise error(f"{name} must be a non-empty string, got {value!r}", f"give {name} a value or leave it out")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise error(f"{name} contains a control character (newline, tab, ...): {value!r}",
                    f"write {name} on one line without control characters")
    if not spaces and " " in value:
        raise error(f"{name} contains a space: {value!r}", f"SLURM {name} names never contain spaces; check the spelling")
