"""The hang watch: a job whose ranks are alive but stop making progress ends by itself, and
leaves every rank's last step and stacks for the failure report.

Progress is what a rank says it made: `hpcjax train` at the start of every step, the
Trainer's `hpcjax.report`, or a plain script's own `hpcjax.rank.progress()`. The watch starts
with the first call, or when the program's exit begins (hpcjax.rank.watch.exitguard: the exit is
watched with the floor, an unmodified script's too, unless close() said the steps were over).
A thread of the process compares the time since the last one with the adaptive timeout
(hpcjax.protocol.timeouts). A pause on purpose (a checkpoint save, a final
evaluation) goes inside `hold()`, which the watch does not count.

When a rank sees no progress for its timeout it creates the job's hang marker in the log
directory; every rank's watch looks for that marker at each poll, so all of them (the one
stuck elsewhere too, while Python can still run a thread) write their last step and the
stacks of all their threads (`RANK_HANG`, the shape py-spy gives `hpcjax stacks`) and print
them to their log. The rank that created the marker waits until every rank has written (at
most GRACE_S), judges which rank(s) held the others (hpcjax.protocol.hangblame: their nodes,
`HANG_NODES`, are the attempt's failed node) and exits with STUCK_EXIT_CODE, so srun (or the
local backend) ends the others;
each of the others exits by itself after twice that, should that not happen. A rank that
holds Python's lock in native code cannot answer: the report says it did not.

Standard library only: the watch runs in any image, whatever the program imports.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path

from hpcjax.protocol import contract, hangblame, placement
from hpcjax.protocol.timeouts import GRACE_S, HangSettings
from hpcjax.values.voice import say


def thread_stacks(skip: int | None = None) -> list[dict]:
    """Every thread's Python frames, innermost first, as py-spy's JSON names them."""
    names = {t.ident: t.name for t in threading.enumerate()}
    roots = sorted((p for p in sys.path if p), key=len, reverse=True)
    out = []
    for ident, frame in sys._current_frames().items():
        if ident == skip:
            continue
        frames = []
        while frame is not None:
            path = frame.f_code.co_filename
            short = next((os.path.relpath(path, r) for r in roots if path.startswith(r.rstrip("/") + "/")),
                         os.path.basename(path))
            frames.append({"name": frame.f_code.co_name, "filename": path, "short_filename": short,
                           "line": frame.f_lineno})
            frame = frame.f_back
        out.append({"thread_id": ident, "thread_name": names.get(ident, "?"), "frames": frames})
    return sorted(out, key=lambda t: t["thread_name"] != "MainThread")


class Watch:
    """One process's progress and the thread that watches it."""

    def __init__(self, settings: HangSettings, environ=os.environ) -> None:
        self.settings = settings
        self.rank = int(environ.get("SLURM_PROCID", "0") or 0)
        self.ranks = int(environ.get("SLURM_NTASKS", "1") or 1)
        self.host = placement.node_name(environ)
        self.environ = environ  # where the layout places the other ranks, for the verdict
        self.job = contract.job_key(environ)
        log_dir = environ.get(contract.LOG_DIR_ENV, "")
        self.log_dir = Path(log_dir) if log_dir and self.job else None
        self.attempt = int(environ.get(contract.RESTART_COUNT, "0") or 0) + 1
        self.step: int | None = None
        self.count = self.intervals = 0
        self.longest = 0.0
        self.last: float | None = None
        self.last_wall = 0.0  # the same moment by the clock, for the report
        self.held = 0
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self.exiting = False  # the program has returned: what is left is the interpreter's exit

    def program_returned(self) -> None:
        """From hpcjax.rank.watch.exitguard, once the program's exit begins (it returned, its threads are
        joined): the exit is watched too (an unmodified script's first watch), with the floor as
        its timeout, since an exit is no step.
        Not after close(): the program said its steps were over, and what follows (an async
        checkpoint's wait) is its own."""
        if self.settings.off or self._stopped.is_set():
            return
        self.exiting, self.last, self.last_wall = True, time.monotonic(), time.time()
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="hpcjax-hang-watch", daemon=True)
            self._thread.start()

    def progress(self, step: int | None = None) -> None:
        now = time.monotonic()
        if self.last is not None and not self.held:
            self.intervals += 1
            if self.intervals > 1:  # the first holds the compilation
                self.longest = max(self.longest, now - self.last)
        self.last, self.count, self.last_wall = now, self.count + 1, time.time()
        self.step = step if step is not None else self.count
        if self._thread is None and not self.settings.off:
            self._thread = threading.Thread(target=self._watch, name="hpcjax-hang-watch", daemon=True)
            self._thread.start()

    @contextlib.contextmanager
    def hold(self):
        """A pause on purpose: not watched, and not an interval."""
        self.held += 1
        try:
            yield
        finally:
            self.held -= 1
            if self.last is not None:
                self.last = time.monotonic()

    def close(self) -> None:
        self._stopped.set()

    def timeout(self) -> float:
        return self.settings.floor_s if self.exiting else self.settings.timeout(self.intervals, self.longest)

    def _path(self, template: str, rank: int | None = None) -> Path | None:
        if self.log_dir is None:
            return None
        return self.log_dir / template.replace("%j", self.job).replace("%t", str(self.rank if rank is None else rank))

    def _watch(self) -> None:
        marker = self._path(contract.HANG_MARKER)
        while not self._stopped.wait(min(5.0, max(0.5, self.timeout() / 20))):
            if self.held or self.last is None:
                continue
            idle = time.monotonic() - self.last
            if idle >= self.timeout():
                self._hang(idle, seen_here=True)
            elif marker is not None and marker.exists():
                self._hang(idle, seen_here=False)

    def _hang(self, idle: float, seen_here: bool) -> None:
        first = seen_here and self._create_marker()
        step = "none yet" if self.step is None else self.step
        if seen_here and self.exiting:
            said = (f"hpcjax: process {self.rank} on {self.host}: its program returned {idle:.0f} s ago and the "
                    f"process has not ended: it hangs at exit (timeout: the floor, {self.settings.floor_s:.0f} s); "
                    "ending the job so it does not hang until its time limit. The stacks of every thread:")
        elif seen_here:
            said = (f"hpcjax: process {self.rank} on {self.host}: no progress for {idle:.0f} s at step {step} "
                    f"(timeout {self.settings.explain(self.intervals, self.longest)}); ending the job so it does "
                    "not hang until its time limit. The stacks of every thread:")
        else:
            said = (f"hpcjax: process {self.rank} on {self.host}: another rank saw the job hang; here the last "
                    f"progress was step {step}, {idle:.0f} s ago. The stacks of every thread:")
        threads = thread_stacks(skip=threading.get_ident())
        say(said)
        for thread in threads:
            say(f"Thread {thread['thread_name']} (most recent call first):")
            for frame in thread["frames"]:
                say(f'  File "{frame["filename"]}", line {frame["line"]} in {frame["name"]}')
        self._write_state(idle, seen_here, threads)
        if self.log_dir is None:
            os._exit(contract.STUCK_EXIT_CODE)
        if not first:  # the first one's end ends the job; this one ends by itself, should that not happen
            time.sleep(2 * GRACE_S)
            os._exit(contract.STUCK_EXIT_CODE)
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline and not self._everyone_wrote():
            time.sleep(0.2)
        self._write_blame()  # before its end, which may tear down the others' collective (CI 39)
        os._exit(contract.STUCK_EXIT_CODE)

    def _create_marker(self) -> bool:
        marker = self._path(contract.HANG_MARKER)
        if marker is None:
            return True
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        except OSError:  # the log directory is gone or read-only: end this process alone
            return True
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps({"rank": self.rank, "host": self.host, "attempt": self.attempt,
                                  "ranks": self.ranks}) + "\n")
        return True

    def _write_state(self, idle: float, seen_here: bool, threads: list[dict]) -> None:
        path = self._path(contract.RANK_HANG)
        if path is None:
            return
        state = {"rank": self.rank, "host": self.host, "pid": os.getpid(), "attempt": self.attempt,
                 "step": self.step, "progress_calls": self.count, "idle_s": round(idle, 1),
                 "last_progress_at": round(self.last_wall, 3),
                 "timeout_s": round(self.timeout(), 1), "saw_hang": seen_here, "program_returned": self.exiting,
                 "threads": threads}
        partial = path.with_name(path.name + f".{os.getpid()}.tmp")
        try:
            partial.write_text(json.dumps(state) + "\n")
            os.replace(partial, path)
        except OSError as error:
            say(f"hpcjax: process {self.rank}: could not write {path}: {error}")

    def _write_blame(self) -> None:
        """The held rank(s)' nodes, for the batch script's record of the attempt (contract.HANG_NODES),
        judged from what every rank that answered left."""
        path = self._path(contract.HANG_NODES)
        entries = hangblame.answers(lambda rank: _text(self._path(contract.RANK_HANG, rank)), self.ranks)
        held_by, _why = hangblame.blame(entries, self.ranks)
        nodes = hangblame.nodes(entries, held_by, lambda rank: placement.rank_node(rank, self.environ))
        partial = path.with_name(path.name + f".{os.getpid()}.tmp")
        try:
            partial.write_text(",".join(nodes) + "\n")
            os.replace(partial, path)
        except OSError as error:
            say(f"hpcjax: process {self.rank}: could not write {path}: {error}")

    def _everyone_wrote(self) -> bool:
        return all(self._path(contract.RANK_HANG, rank).exists() for rank in range(self.ranks))


_watch: Watch | None = None
_lock = threading.Lock()


def watch() -> Watch:
    """This process's watch, made on first use from the job's variables (hpcjax.protocol.timeouts)."""
    global _watch
    if _watch is None:  # progress() is called every step: the lock only for the first
        with _lock:
            if _watch is None:
                _watch = Watch(HangSettings.from_env())
    return _watch


def progress(step: int | None = None) -> None:
    """Tell the hang watch this rank made progress (call it once per step, on every rank; the
    step number makes the report say which step a stuck rank did not reach)."""
    watch().progress(step)


def program_returned() -> None:
    """The program's exit has begun (hpcjax.rank.watch.exitguard): watch it, with the floor."""
    watch().program_returned()


def close() -> None:
    """Stop watching this process (its steps are over)."""
    if _watch is not None:
        _watch.close()


def hold():
    """`with hold():` around a pause on purpose (a save, an evaluation): the watch waits."""
    return watch().hold()


def _text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None
