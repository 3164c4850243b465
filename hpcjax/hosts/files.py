"""A host's files, read and written the same way here and on a login node over SSH: the job
followers (logs, attempts, the batch log, results of the Python API, a run's reports) read
through these, never with open() on a path that may be another machine's.

Remote reads are shell one-liners through the shared SSH connection (the login node needs
a POSIX shell and coreutils, nothing else); reads of many files are one round trip.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

# For each (path, offset) pair: its size (-1 when missing), a newline, then its bytes from the
# offset to that size. Size first, so a file that grows meanwhile is cut where it was measured.
READ_NEW = r'''while [ $# -gt 1 ]; do p=$1; o=$2; shift 2
if [ -f "$p" ]; then s=$(wc -c < "$p"); else s=-1; fi
printf '%s\n' "$s"
if [ "$s" -gt "$o" ]; then tail -c +$((o + 1)) "$p" | head -c $((s - o)); fi
done'''


# For each path: its size (-1 when missing), a newline, then its last min(size, N) bytes.
READ_ENDS = r'''n=$1; shift
for p in "$@"; do
if [ -f "$p" ]; then s=$(wc -c < "$p"); else s=-1; fi
printf '%s\n' "$s"
if [ "$s" -gt 0 ]; then tail -c "$n" "$p" | head -c "$s"; fi
done'''
CHUNK = 1 << 20  # what a stream reads at a time
# The first line matching a Perl-style pattern, case-insensitive (GNU grep -P: ~1 GB/s, where
# Python's re takes ~0.3 s a megabyte); exit 1 no line, 2 no such file or no -P here.
GREP_FIRST = ["grep", "-a", "-i", "-m", "1", "-P", "-e"]


def split_sized(out: bytes, paths, cap: int | None = None) -> dict[str, bytes | None]:
    """READ_NEW's and READ_ENDS's answers: per path a size line, then its bytes."""
    found, at = {}, 0
    for path, offset in paths:
        end = out.index(b"\n", at)
        size = int(out[at:end])
        at = end + 1
        if size < 0:
            found[path] = None
            continue
        count = max(0, size - offset) if cap is None else min(size, cap)
        found[path], at = out[at:at + count], at + count
    return found


def grep_answer(code: int, out: bytes) -> str | None:
    return out.decode(errors="replace").rstrip("\n") if code == 0 else "" if code == 1 else None


class LocalFiles:
    """This machine's files."""

    def read_bytes(self, path: str) -> bytes | None:
        try:
            return Path(path).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def read_text(self, path: str) -> str | None:
        data = self.read_bytes(path)
        return None if data is None else data.decode(errors="replace")

    def read_own_bytes(self, path: str) -> bytes | None:
        """The file's bytes if this user owns it (a pickle another user wrote is never loaded), else None."""
        try:
            return self.read_bytes(path) if Path(path).stat().st_uid == os.getuid() else None
        except OSError:
            return None

    def list_names(self, directory: str) -> list[str]:
        try:
            return sorted(os.listdir(directory))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def read_new(self, offsets: dict[str, int]) -> dict[str, bytes | None]:
        """Each file's bytes past its offset (None: the file is not there)."""
        found = {}
        for path, offset in offsets.items():
            try:
                with open(path, "rb") as handle:
                    handle.seek(offset)
                    found[path] = handle.read()
            except (FileNotFoundError, IsADirectoryError):
                found[path] = None
        return found

    def read_ends(self, paths: list[str], size: int) -> dict[str, bytes | None]:
        """Each file's last `size` bytes (None: not there): a log's tail without reading the log."""
        found = {}
        for path in paths:
            try:
                with open(path, "rb") as handle:
                    handle.seek(max(0, handle.seek(0, os.SEEK_END) - size))
                    found[path] = handle.read(size)
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                found[path] = None
        return found

    def first_match(self, path: str, pattern: str) -> str | None:
        """The file's first line matching `pattern` ('' none; None: cannot tell here)."""
        try:
            done = subprocess.run([*GREP_FIRST, pattern, "--", path], capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return grep_answer(done.returncode, done.stdout)

    def read_chunks(self, path: str):
        """The file's bytes in chunks of at most CHUNK: memory stays bounded by one chunk."""
        try:
            with open(path, "rb") as handle:
                while chunk := handle.read(CHUNK):
                    yield chunk
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return

    # os.path's answers: a path that cannot be looked at (a name too long for the file system)
    # is no directory here, where pathlib of 3.11 raises.
    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def remove(self, paths: list[str]) -> None:
        """Files that are no longer needed; one already gone is no error."""
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    def write_text(self, path: str, text: str) -> None:
        """In one step: a reader never sees half of it."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, target)


class RemoteFiles:
    """A login node's files, through its host's `run_bytes`."""

    def __init__(self, host) -> None:
        self.host = host

    def _sh(self, script: str, *args: str, input: bytes | None = None):
        return self.host.run_bytes(["sh", "-c", script, "sh", *args], input=input)

    def read_bytes(self, path: str) -> bytes | None:
        done = self._sh('[ -f "$1" ] && cat -- "$1"', path)
        return done.stdout if done.returncode == 0 else None

    def read_own_bytes(self, path: str) -> bytes | None:
        """The file's bytes if the login's user owns it there (`test -O`), else None."""
        done = self._sh('[ -f "$1" ] && [ -O "$1" ] && cat -- "$1"', path)
        return done.stdout if done.returncode == 0 else None

    def read_text(self, path: str) -> str | None:
        data = self.read_bytes(path)
        return None if data is None else data.decode(errors="replace")

    def list_names(self, directory: str) -> list[str]:
        done = self._sh('[ -d "$1" ] && find "$1" -mindepth 1 -maxdepth 1 -printf "%f\\0"', directory)
        return sorted(n for n in done.stdout.decode(errors="replace").split("\0") if n) if done.returncode == 0 else []

    def read_new(self, offsets: dict[str, int]) -> dict[str, bytes | None]:
        if not offsets:
            return {}
        args = [str(x) for pair in offsets.items() for x in pair]
        return split_sized(self._sh(READ_NEW, *args).stdout, offsets.items())

    def read_ends(self, paths: list[str], size: int) -> dict[str, bytes | None]:
        """Every file's last `size` bytes in one round trip."""
        if not paths:
            return {}
        return split_sized(self._sh(READ_ENDS, str(size), *paths).stdout, [(p, 0) for p in paths], cap=size)

    def first_match(self, path: str, pattern: str) -> str | None:
        """The first line matching `pattern`, searched on the login node ('' none; None: cannot tell)."""
        done = self.host.run_bytes([*GREP_FIRST, pattern, "--", path])
        return grep_answer(done.returncode, done.stdout)

    def read_chunks(self, path: str):
        """The file in chunks of CHUNK bytes, one round trip each (never the whole file at once)."""
        offset = 0
        while True:
            done = self._sh('[ -f "$1" ] && tail -c +"$2" -- "$1" | head -c "$3"', path, str(offset + 1), str(CHUNK))
            if done.returncode != 0 or not done.stdout:
                return
            yield done.stdout
            offset += len(done.stdout)
            if len(done.stdout) < CHUNK:
                return

    def is_dir(self, path: str) -> bool:
        return self._sh('[ -d "$1" ]', path).returncode == 0

    def exists(self, path: str) -> bool:
        return self._sh('[ -e "$1" ]', path).returncode == 0

    def remove(self, paths: list[str]) -> None:
        """Files that are no longer needed, in one round trip; one already gone is no error."""
        if paths:
            self._sh('rm -f -- "$@"', *paths)

    def write_text(self, path: str, text: str) -> None:
        done = self._sh('mkdir -p -- "$(dirname -- "$1")" && cat > "$1.tmp.$$" && mv -f -- "$1.tmp.$$" "$1"',
                        path, input=text.encode())
        if done.returncode != 0:
            from hpcjax.values.errors import HpcjaxError

            raise HpcjaxError(f"cannot write {path} on {self.host.destination}: "
                              f"{done.stderr.decode(errors='replace').strip()}",
                              f"check that the remote directory is writable: ssh {self.host.destination} "
                              f"touch {shlex.quote(path)}")
