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

import json
import sys
import time
from pathlib import Path

from hpcjax.contract import attempts_log_path, rank_of_log
from hpcjax.errors import HpcjaxError, UsageError
from hpcjax.launch.outcome import FINISHED_STATES, Outcome, tail_lines

STILL_EVERY_S = 30.0  # while nothing changes, say so this often


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Run:
    backend = "?"
    poll_s = 2.0

    def __init__(self, job_id: str, log_dir: Path, num_ranks: int) -> None:
        self.job_id, self.log_dir, self.num_ranks = str(job_id), Path(log_dir), num_ranks
        self._outcome: Outcome | None = None

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

    def describe(self) -> str:
        """The state for `hpcjax status`; for a job that failed, its report too."""
        return self._with_ending(f"job {self.job_id} ({self.backend}): {self.state()}")

    def as_dict(self) -> dict:
        return self._with_outcome({"job_id": self.job_id, "backend": self.backend, "state": self.state()})

    def _with_ending(self, text: str) -> str:
        outcome = self.outcome
        return "\n".join(filter(None, [text, self.describe_attempts(),
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
                self._outcome = self._finish(state)
        return self._outcome

    def wait(self, *, progress: bool = True, detail=None) -> Outcome:
        """Follow the job to its end, a line on stderr for each change of state (and every
        30 s while nothing changes); return its Outcome. `detail()`, if given, adds what the
        job itself says (its latest report) to each line."""
        last, last_print, started = None, 0.0, time.monotonic()
        while True:
            state, shown = self.poll()
            now = time.monotonic()
            if progress and (shown != last or now - last_print >= STILL_EVERY_S):
                still = "still " if shown == last else ""
                more = detail() if detail and state == "RUNNING" else ""
                say(f"job {self.job_id}: {still}{shown}{'; ' + more if more else ''}  [{now - started:.0f}s]")
                last, last_print = shown, now
            if state in FINISHED_STATES:
                self._outcome = self._outcome or self._finish(state)
                return self._outcome
            time.sleep(self.poll_s)

    def attempts(self) -> list[dict]:
        """How each attempt of the job ended (the batch script's lines; a requeued job has
        several): attempt, ended (completed, stopped, failed), exit_code, nodes, failed_node."""
        path = attempts_log_path(self.log_dir, self.job_id)
        lines = path.read_text(errors="replace").splitlines() if path.is_file() else []
        found = []
        for line in lines:
            try:
                found.append(json.loads(line))
            except ValueError:  # a line cut short by a kill: the others still count
                continue
        return found

    def describe_attempts(self) -> str:
        attempts = self.attempts()
        if not attempts:
            return ""
        return f"  attempts: {len(attempts)} ended: " + "; ".join(
            f"{a.get('attempt')} {a.get('ended')} on {a.get('nodes')}"
            + (f" (failed on {a['failed_node']})" if a.get("failed_node") else "") for a in attempts)

    def rank_logs(self) -> dict[int, Path]:
        """Every rank's log file that exists, by rank."""
        found = {}
        if self.log_dir.is_dir():
            for path in self.log_dir.glob(f"{self.job_id}-*"):
                rank = rank_of_log(path.name, self.job_id)
                if rank is not None:
                    found[rank] = path
        return dict(sorted(found.items()))

    def logs(self, rank: int | None = None, tail: int | None = None) -> str:
        """One rank's log as it is, or every rank's with lines prefixed `[rank R host] `."""
        logs = self.rank_logs()
        if not logs:
            raise HpcjaxError(f"no rank logs of job {self.job_id} in {self.log_dir}",
                              f"the job may not have started yet: see `hpcjax status {self.job_id}`")
        if rank is not None:
            if rank not in logs:
                raise UsageError(f"job {self.job_id} has no log for rank {rank}",
                                 f"ranks with logs: {', '.join(map(str, logs))}")
            return tail_lines(logs[rank].read_text(errors="replace"), tail)
        hosts = self.hosts()
        out = []
        for r, path in logs.items():
            prefix = f"[rank {r} {hosts.get(r, '?')}] "
            out += [prefix + line + "\n" for line in tail_lines(path.read_text(errors="replace"), tail).splitlines()]
        return "".join(out)

    def follow_logs(self, write, rank: int | None = None) -> str:
        """Stream every rank's new lines (or one rank's) through write(text) as the job runs,
        prefixed `[rank R host] `, until it ends; return its final state. Requeued attempts
        append to the same logs, so they stream on."""
        offsets: dict[int, int] = {}
        partial: dict[int, str] = {}
        hosts: dict[int, str] = {}
        while True:
            state, _ = self.poll()
            ended = state in FINISHED_STATES
            logs = {r: p for r, p in self.rank_logs().items() if rank is None or r == rank}
            if logs and any(r not in hosts for r in logs) and state != "PENDING":
                hosts = self.hosts()
            for r, path in logs.items():
                if rank is None and r not in hosts and not ended:
                    continue  # its node is not known yet (accounting lags): read it once it is
                with open(path, errors="replace") as handle:
                    handle.seek(offsets.get(r, 0))
                    text = partial.pop(r, "") + handle.read()
                    offsets[r] = handle.tell()
                lines = text.splitlines(keepends=True)
                if lines and not lines[-1].endswith("\n") and not ended:
                    partial[r] = lines.pop()  # the rest of the line is still being written
                prefix = "" if rank is not None else f"[rank {r} {hosts.get(r, '?')}] "
                if lines:
                    write("".join(prefix + line if line.endswith("\n") else prefix + line + "\n"
                                  for line in lines))
            if ended:
                return state
            time.sleep(min(self.poll_s, 1.0))

