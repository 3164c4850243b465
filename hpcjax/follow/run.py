"""The handle of a submitted job, the same for every backend.

    run = hpcjax.launch.submit(spec)      # SLURM, or this machine's CPU
    run.job_id; run.state(); run.logs(rank=3, tail=20); run.cancel()
    outcome = run.wait()                  # progress on stderr; an Outcome at the end
    outcome.ok, outcome.exit_code, outcome.failed[0].rank, outcome.failed[0].host

A backend implements `poll` (state now, and a line to show), `cancel`,
`_finish` (its Outcome) and `hosts`; waiting, logs and the progress lines are
written here once.
"""

from __future__ import annotations

import time
from pathlib import Path, PurePosixPath

from hpcjax.values import jsonlines
from hpcjax.protocol.contract import attempts_log_path, rank_of_log
from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.hosts import this_machine
from hpcjax.hosts.ssh import ConnectionLost
from hpcjax.catalog import keep as runs
from hpcjax.protocol.contract import FINISHED_STATES
from hpcjax.follow.outcome import Outcome
from hpcjax.values.voice import say
from hpcjax.follow.ranklogs import RankLogs

STILL_EVERY_S = 30.0  # while nothing changes, say so this often
# The waits before the polls that follow the batch script's line for an attempt that ended (its
# state changes once the script exits, within a second), then poll_s: a 2 s poll added a second on
# average to each end seen (a job of `true`: 3.7 s from submission to COMPLETED, the job itself 1.4 s).
# Only then: each poll is a squeue and a sacct (slurmdbd and its database); quick polls after every
# change of state would add several per job for every user of a shared controller.
SOON_S = (0.25, 0.5, 1.0)
WATCH_S = 0.1  # how often the attempts log (a stat of a file on this machine) is looked at between polls
RECONNECT_S = (2, 4, 8, 15, 30)  # waits between tries after a lost connection (then every 30 s)


class Run:
    backend = "?"
    poll_s = 2.0

    def __init__(self, job_id: str, log_dir, num_ranks: int, host=None) -> None:
        self.host = host or this_machine()  # where the job's files are (a login node over SSH, or here)
        # A path of the machine that has the files: a login node's is never opened here.
        self.log_dir = PurePosixPath(log_dir) if self.host.remote else Path(log_dir)
        self.job_id, self.num_ranks = str(job_id), num_ranks
        self.files = self.host.files
        self._outcome: Outcome | None = None
        self.run_dir: str | None = None  # the run directory it keeps its run in, where known (fetch, report)

    # --- what each backend provides -------------------------------------------------
    def poll(self) -> tuple[str, str]:
        """(state, a line describing it) as of now."""
        raise NotImplementedError

    def cancel(self) -> None:
        raise NotImplementedError

    def hosts(self) -> dict[int, str]:
        """rank -> the node it ran on, where known."""
        raise NotImplementedError

    def _finish(self, state: str) -> Outcome:
        raise NotImplementedError

    def ensure_can_start(self) -> None:
        """The follow step's first look (a backend whose scheduler may hold a job it can never
        start says so here)."""

    def describe(self) -> str:
        """The state for `hpcjax status`; for a job that failed, its report too."""
        return self._with_ending(f"job {self.job_id} ({self.backend}): {self.state()}")

    def as_dict(self) -> dict:
        return self._with_outcome({"job_id": self.job_id, "backend": self.backend, "state": self.state()})

    def _with_ending(self, text: str) -> str:
        outcome = self.outcome
        return "\n".join(filter(None, [text, self.describe_attempts(outcome.state if outcome else ""),
                                        outcome.report() if outcome and not outcome.ok else ""]))

    def _with_outcome(self, data: dict) -> dict:
        outcome = self.outcome
        return {**data, "attempts": self.attempts(), "outcome": outcome.as_dict() if outcome else None}

    # --- the same for every backend ---------------------------------------------------
    def state(self) -> str:
        return self.poll()[0]

    @property
    def outcome(self) -> Outcome | None:
        """How the job ended (None while it runs)."""
        if self._outcome is None:
            state = self.state()
            if state in FINISHED_STATES:
                self._outcome = self._ended(state)
        return self._outcome

    def _ended(self, state: str) -> Outcome:
        """The outcome, which the catalog of runs keeps: SLURM's accounting may say it later, and forget it."""
        outcome = self._finish(state)
        runs.ended(self.catalog_key(), outcome)
        return outcome

    def catalog_key(self) -> str:
        return self.job_id

    def wait(self, *, progress: bool = True, detail=None) -> Outcome:
        """Follow the job to its end, a line on stderr for each change of state (and every
        30 s while nothing changes); return its Outcome. `detail()`, if given, adds what the
        job itself says (its latest report) to each line."""
        last, last_print, started, soon = None, 0.0, time.monotonic(), 0
        while True:
            state, shown = self.poll_surviving()
            now = time.monotonic()
            if progress and (shown != last or now - last_print >= STILL_EVERY_S):
                still = "still " if shown == last else ""
                more = detail() if detail and state == "RUNNING" else ""
                say(f"job {self.job_id}: {still}{shown}{'; ' + more if more else ''}  [{now - started:.0f}s]")
                last, last_print = shown, now
            if state in FINISHED_STATES:
                self._outcome = self._outcome or self._ended(state)
                return self._outcome
            if self.pause(soon):
                soon = len(SOON_S)  # the attempt ended: its state changes in a moment, look soon
            else:
                soon = max(0, soon - 1)

    def pause(self, soon: int = 0) -> bool:
        """Wait before the next poll: poll_s, or with `soon` quick polls left, SOON_S's next. Where
        the job's files are on this machine, the batch script's line for an attempt that ended cuts
        the wait short (True): its state changes as soon as the script exits."""
        wait = min(SOON_S[len(SOON_S) - soon] if soon else self.poll_s, self.poll_s)
        if self.host.remote or wait <= WATCH_S:
            time.sleep(wait)
            return False
        attempts, end = Path(attempts_log_path(self.log_dir, self.job_id)), time.monotonic() + wait
        size = _size(attempts)
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(WATCH_S, left))
            if _size(attempts) != size:
                return True
        return False

    def poll_surviving(self) -> tuple[str, str]:
        """poll(), riding out a lost connection to the cluster: say so, try again with backoff,
        say when it is back. The job never depends on this process; only following it does."""
        failures = 0
        while True:
            try:
                answer = self.poll()
            except ConnectionLost as lost:
                wait = RECONNECT_S[min(failures, len(RECONNECT_S) - 1)]
                say(f"job {self.job_id}: {lost.message}; the job goes on without us. Trying again in {wait} s "
                    "(Ctrl-C stops following, not the job)")
                failures += 1
                time.sleep(wait)
                continue
            if failures:
                say(f"job {self.job_id}: connected again to {self.host.name}")
            return answer

    def attempts(self) -> list[dict]:
        """How each attempt of the job ended (the batch script's lines; a requeued job has
        several): attempt, ended (completed, stopped, failed), exit_code, nodes, failed_node."""
        # a line cut short by a kill: the others still count
        return jsonlines.objects(self.files.read_text(str(attempts_log_path(self.log_dir, self.job_id))))

    def describe_attempts(self, state: str = "") -> str:
        """The attempts line; `state` the job's final state: the last attempt of a job cancelled or
        timed out ended that way (its script saw only the signal's exit code, 143)."""
        attempts = self.attempts()
        if not attempts:
            return ""
        if state in ("CANCELLED", "TIMEOUT") and attempts[-1].get("ended") == "failed":
            attempts[-1] = {**attempts[-1], "ended": state.lower().replace("timeout", "timed out")}
        return f"  attempts: {len(attempts)} ended: " + "; ".join(
            f"{a.get('attempt')} {a.get('ended')}"
            + (f" (exit {a['exit_code']})" if a.get("ended") == "failed" and a.get("exit_code") else "")
            + f" on {a.get('nodes')}"
            + (f" (failed on {a['failed_node']})" if a.get("failed_node") and a.get("ended") == "failed" else "")
            + (f", not retried: {a['not_retried']}" if a.get("not_retried") else "")
            + (f"; {a['preflight']}" if a.get("preflight") else "") for a in attempts)

    def rank_logs(self) -> dict[int, PurePosixPath]:
        """Every rank's log file that exists, by rank."""
        found = {}
        for name in self.files.list_names(str(self.log_dir)):
            rank = rank_of_log(name, self.job_id)
            if rank is not None:
                found[rank] = self.log_dir / name
        return dict(sorted(found.items()))

    def read_log(self, path) -> str:
        return self.files.read_text(str(path)) or ""

    def logs(self, rank: int | None = None, tail: int | None = None) -> str:
        """One rank's log as it is, or every rank's with lines prefixed `[rank R host] `."""
        parts: list[str] = []
        self.write_logs(parts.append, rank, tail)
        return "".join(parts)

    def write_logs(self, write, rank: int | None = None, tail: int | None = None) -> None:
        """`logs`, through write(text) a piece at a time: the tails of all ranks' logs read in one
        batch from their ends, a whole log a chunk at a time (never every log in memory at once)."""
        logs = self.rank_logs()
        if not logs:
            raise HpcjaxError(f"no rank logs of job {self.job_id} in {self.log_dir}",
                              f"the job may not have started yet: see `hpcjax status {self.job_id}`")
        if rank is not None and rank not in logs:
            raise UsageError(f"job {self.job_id} has no log for rank {rank}",
                             f"ranks with logs: {', '.join(map(str, logs))}")
        chosen = {rank: logs[rank]} if rank is not None else logs
        hosts = self.hosts() if rank is None else {}
        reader = RankLogs(lambda r: chosen[r], self.files, clean=False)
        if tail is not None:
            reader.fetch(chosen)
        for r in chosen:
            if rank is not None:  # one log, as it is
                if tail is not None:
                    write(reader.tail(r, tail))
                else:  # a chunk at a time
                    for chunk in self.files.read_chunks(str(chosen[r])):
                        write(chunk.decode(errors="replace"))
                continue
            prefix, batch = f"[rank {r} {hosts.get(r, '?')}] ", []
            lines = reader.tail(r, tail).splitlines() if tail is not None else \
                (line.rstrip("\n") for line in reader.lines(r))
            for line in lines:
                batch.append(prefix + line + "\n")
                if len(batch) >= 4096:
                    write("".join(batch))
                    batch = []
            write("".join(batch))

    def follow_logs(self, write, rank: int | None = None) -> str:
        """Stream every rank's new lines (or one rank's) through write(text) as the job runs,
        prefixed `[rank R host] `, until it ends; return its final state. Requeued attempts
        append to the same logs, so they stream on."""
        offsets: dict[int, int] = {}
        partial: dict[int, bytes] = {}
        hosts: dict[int, str] = {}
        while True:
            try:
                state, _ = self.poll_surviving()
                ended = state in FINISHED_STATES
                logs = {r: p for r, p in self.rank_logs().items() if rank is None or r == rank}
                if logs and any(r not in hosts for r in logs) and state != "PENDING":
                    hosts = self.hosts()
                # Only ranks whose node is known (accounting lags): read the others once it is.
                ready = {r: p for r, p in logs.items() if rank is not None or r in hosts or ended}
                new = self.files.read_new({str(p): offsets.get(r, 0) for r, p in ready.items()})
            except ConnectionLost:
                time.sleep(1.0)
                continue  # poll_surviving says so, and waits, at its next call
            for r, path in ready.items():
                data = new.get(str(path)) or b""
                offsets[r] = offsets.get(r, 0) + len(data)
                data = partial.pop(r, b"") + data
                if not ended and data and not data.endswith(b"\n"):  # the rest of the line is still coming
                    cut = data.rfind(b"\n") + 1
                    data, partial[r] = data[:cut], data[cut:]
                if data:
                    prefix = "" if rank is not None else f"[rank {r} {hosts.get(r, '?')}] "
                    text = data.decode(errors="replace")
                    write("".join(prefix + line + "\n" for line in text.splitlines()))
            if ended:
                return state
            time.sleep(min(self.poll_s, 1.0))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # not written yet, or the folder is not readable here
        return -1
