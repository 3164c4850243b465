"""This machine as a host: commands run as child processes, files are read in place; and what
this machine's paths are (node_local_reason: on one node's own disk or memory)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from hpcjax.hosts.files import LocalFiles

NOT_FOUND = 127  # a shell's exit code for a command it cannot find
# Paths that are on each node's own disk or memory, not on the cluster's shared storage.
NODE_LOCAL_PREFIXES = ("/tmp", "/var/tmp", "/dev/shm", "/run")
NODE_LOCAL_FILESYSTEMS = {"tmpfs", "ramfs"}
# A query started early (start_early) answers the run() of the same argv within this long of its start;
# an older answer is dropped and the query asked again.
EARLY_FRESH_S = 2.0
_early: dict[tuple[str, ...], tuple[float, subprocess.Popen]] = {}


class LocalHost:
    name = "this machine"
    key = "local"  # what job records say for jobs of this host
    remote = False

    def __init__(self) -> None:
        self.files = LocalFiles()

    def connect(self) -> None:
        """Nothing to connect to."""

    def run(self, argv: list[str], *, input: str | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess:
        """Run argv here; text in and out, never raises for a non-zero exit (a missing program
        exits 127, as in a shell)."""
        return self._run(argv, input, timeout, True)

    def run_bytes(self, argv: list[str], *, input: bytes | None = None,
                  timeout: float | None = None) -> subprocess.CompletedProcess:
        return self._run(argv, input, timeout, False)

    @staticmethod
    def _run(argv, input, timeout, text: bool) -> subprocess.CompletedProcess:
        early = _early.pop(tuple(argv), None) if input is None and text else None
        if early is not None:
            answered = _answer_of(argv, *early, timeout)
            if answered is not None:
                return answered
        try:
            return subprocess.run(argv, input=input, capture_output=True, text=text, timeout=timeout)
        except FileNotFoundError:
            said = f"{argv[0]}: command not found"
            return subprocess.CompletedProcess(argv, NOT_FOUND, "" if text else b"", said if text else said.encode())

    def __repr__(self) -> str:
        return "LocalHost()"


def start_early(*argvs: list[str]) -> None:
    """Start read-only queries now, beside the imports and lookups that come before they are asked:
    the first run() here of the same argv takes the answer instead of starting it again (`hpcjax
    status`: sacct's ~90 ms beside the verb's own start, not after it). A query that cannot start is
    left for run() to start and say why; one never asked for is reaped at exit with this process."""
    for argv in argvs:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
        except OSError:
            continue
        _early[tuple(argv)] = (time.monotonic(), proc)


def _answer_of(argv, started: float, proc: subprocess.Popen, timeout) -> subprocess.CompletedProcess | None:
    """The early query's answer, as subprocess.run would give it; None when it is too old to stand for
    one asked now (it is stopped)."""
    if time.monotonic() - started > EARLY_FRESH_S:
        proc.kill()
        proc.communicate()
        return None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


@contextlib.contextmanager
def ctrl_c_mask(how: int):
    """SIGINT blocked (signal.SIG_BLOCK) or unblocked (signal.SIG_UNBLOCK) in this thread meanwhile,
    and so in every process it starts then (a child keeps the signal mask it starts with); as it
    was afterwards, when a blocked one that came meanwhile lands."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(how, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def ctrl_c_for_children():
    """SIGINT unblocked in the processes started meanwhile (a child keeps the signal mask it starts
    with), while a Ctrl-C to this process waits for the end of the block and lands then: a job's
    ranks are all started before the interrupt is seen, never half of them. Only the main thread
    runs Python's signal handlers, so only there is the Ctrl-C put off; elsewhere it never lands."""
    previous = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    caught: list[int] = []
    if previous is not None:  # None: a handler not set from Python, left alone
        signal.signal(signal.SIGINT, lambda number, frame: caught.append(number))
    try:
        with ctrl_c_mask(signal.SIG_UNBLOCK):
            yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
            if caught:  # again, as it came: held by the caller's mask, else it lands now
                signal.raise_signal(signal.SIGINT)


def node_local_reason(path: str | Path) -> str:
    """Why `path` is on one node's own disk or memory (invisible to the other nodes), or ''."""
    path = Path(path).resolve()
    tmpdir = os.environ.get("TMPDIR")
    for prefix in NODE_LOCAL_PREFIXES + ((tmpdir,) if tmpdir else ()):
        if path == Path(prefix) or Path(prefix) in path.parents:
            return f"it is under {prefix}, which is each node's own"
    kind = filesystem_type(path)
    return f"it is on a {kind} filesystem (memory of one node)" if kind in NODE_LOCAL_FILESYSTEMS else ""


def filesystem_type(path: Path) -> str:
    """The type of the mount holding path (from /proc/mounts; '' where unknown)."""
    best, kind = "", ""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return ""
    for line in mounts:
        parts = line.split()
        if len(parts) > 2 and (str(path) == parts[1] or str(path).startswith(parts[1].rstrip("/") + "/")):
            if len(parts[1]) > len(best):
                best, kind = parts[1], parts[2]
    return kind
