"""Files the verbs write for the user: a name checked before any work, and written in one step."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hpcjax.values.errors import UsageError


def output_file(text: str | None, flag: str = "-o") -> Path:
    """The file an `-o` names, refused before any work when it cannot be one: empty, a
    directory, or in a directory that cannot be made or written."""
    if text is None or not text.strip():
        raise UsageError(f"{flag} names no file", f"give a file name: {flag} job.sh")
    path = Path(text)
    if path.is_dir() or text.endswith("/"):
        raise UsageError(f"{flag} {text!r} is a directory", f"give a file name in it: {flag} {text.rstrip('/')}/NAME")
    existing = next(p for p in [path.parent, *path.parent.parents] if p.exists() or p == Path(p.anchor or "."))
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        why = "is not a directory" if not existing.is_dir() else "is not writable by you"
        raise UsageError(f"cannot write {text!r}: {str(existing) or '.'} {why}",
                         f"give {flag} a path in a directory you can write")
    return path


def write_atomically(path: Path, text: str | bytes, mode: int = 0o755) -> None:
    """Write text to path in one step: a reader never sees half a script."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as err:
        raise UsageError(f"cannot write {str(path)!r}: {err.strerror}", "give a path in a directory you can write")
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise UsageError(f"cannot write {str(path)!r}: {err.strerror}", "give a path you can write "
                             "(a file, not a directory), on a file system with room") from None
        raise
