"""The house rule for a bad value, written once: what was wrong with the value,
what would be valid, and a hint. Used by the job spec (login side) and the
training configuration (every rank). Standard library only."""

from __future__ import annotations

from hpcjax.values.errors import UsageError


def require_int(name: str, value: object, minimum: int, hint: str, error=UsageError) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise error(f"{name} must be an integer >= {minimum}, got {value!r}", hint, field=name)


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
        raise error(f"{name} must be a number {wanted}, got {value!r}", hint, field=name)


def require_choice(name: str, value: object, choices: tuple[str, ...], error=UsageError) -> None:
    if value not in choices:
        raise error(f"unknown {name} {value!r}", f"valid values: {', '.join(choices)}")


def require_text(name: str, value: object, *, spaces: bool = True, error=UsageError) -> None:
    """A non-empty string that quoting can carry into an #SBATCH line or argv: no control
    characters (newline, tab, ...); with spaces=False, no space either (SLURM names)."""
    if not isinstance(value, str) or not value:
        raise error(f"{name} must be a non-empty string, got {value!r}", f"give {name} a value or leave it out",
                    field=name)
    require_utf8(name, value, error)
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise error(f"{name} contains a control character (newline, tab, ...): {value!r}",
                    f"write {name} on one line without control characters", field=name)
    if not spaces and " " in value:
        raise error(f"{name} contains a space: {value!r}", f"SLURM {name} names never contain spaces; check the "
                    "spelling", field=name)


def require_utf8(name: str, value: str, error=UsageError) -> None:
    """A value from argv or the environment that held bytes which are not UTF-8 (Python keeps them as
    surrogates): no script, record or JSON can carry it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        bad = value[err.start].encode("utf-8", "surrogateescape")
        shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise error(f"{name} '{shown}' is not UTF-8 text (byte {bad.hex(' ')} at {err.start})",
                    "write it in UTF-8: a terminal, file or directory name in another encoding (e.g. Latin-1) "
                    "gives such bytes", field=name) from None


def read_text(path, what: str, error=UsageError) -> str:
    """A file the user named, as text: one that cannot be read or is not UTF-8 is refused."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except UnicodeDecodeError as err:
        bad = err.object[err.start:err.start + 1]
        raise error(f"{what} {str(path)!r} is not UTF-8 text (byte {err.start}: {bad!r})",
                    "save it as UTF-8 text") from None
    except OSError as err:
        raise error(f"cannot read {what} {str(path)!r}: {err.strerror}",
                    f"give the path of a readable {what}") from None


def make_directory(text: str, flag: str, error=UsageError) -> None:
    """mkdir -p of a directory the user named (the log directory), refused with the reason."""
    import os

    try:
        os.makedirs(text, exist_ok=True)
    except OSError as err:
        raise error(f"cannot make the directory {flag} {text!r}: {err.strerror}",
                    f"give {flag} a directory you can create") from None


def resolved_local_path(text: str, what: str, error=UsageError):
    """local_path, its links followed: a loop of symbolic links is refused by name (pathlib raises
    RuntimeError before Python 3.13, OSError after)."""
    try:
        return local_path(text, what, error).resolve()
    except (RuntimeError, OSError) as loop:
        raise error(f"{what} {text!r} cannot be resolved: {getattr(loop, 'strerror', None) or loop}",
                    "point it at the file or directory itself, not at links that lead back to each other "
                    "(`ls -l` shows where each link goes)") from None


def local_path(text: str, what: str, error=UsageError):
    """`text` as a path of this machine, `~` and `~user` expanded: a user that does not exist, or a
    NUL byte, is refused by name (pathlib raises RuntimeError or ValueError from deep inside)."""
    from pathlib import Path

    if "\0" in text:
        raise error(f"{what} {text!r} holds a NUL byte, which no path does", "give the path as it is written")
    try:
        return Path(text).expanduser()
    except RuntimeError:
        raise error(f"{what} {text!r}: {text.split('/')[0]} names no user of this machine",
                    "write the path out, or use ~/ for your own home") from None
