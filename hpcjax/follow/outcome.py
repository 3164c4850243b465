"""How a job ended, and who caused it: one analysis for every backend.

A backend reports what it saw as task events (ranks, host, what happened, and
whether it happened before the launcher began stopping the others); `analyze`
turns them into an Outcome: the job's state, the exit code to return, the ranks
that failed by themselves with their host, reason and log tail, and the ranks
that were stopped after them.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from hpcjax.protocol.contract import ATTEMPT_LINE, PREFLIGHT_KEY, STUCK_EXIT_CODE
from hpcjax.protocol.statuses import shell_status, status_of
from hpcjax.values.errors import JobFailed
from hpcjax.values.nodelist import ranges
from hpcjax.follow import hangs
from hpcjax.follow.ranklogs import LOCAL, RankLogs, tail_lines, triaged
from hpcjax.follow.triage import HANG_HINT, Finding, silent_ranks, triage

LOG_TAIL_LINES = 20
TRIAGE_LINES = 200  # of each log, searched for the known causes
TRIAGED_RANKS = 16  # of the blamed ranks, and of the others, whose logs are searched (the rest say the same)
SILENT = "stopped sending heartbeats (frozen, stopped by a signal, or its node lost)"
# srun's own report of a task that ended badly, in the batch log, e.g.
# "srun: error: node2: task 5: Exited with exit code 3" or "tasks 0-3: Killed".
SRUN_TASK_ERROR = re.compile(r"srun: error: (?P<host>\S+): tasks? (?P<tasks>[\d,\-]+): (?P<what>.+)")
SRUN_TERMINATING = "Terminating StepId"  # srun's line when it starts stopping the other ranks
STOPPED_WORDS = ("Killed", "Terminated")  # what a rank stopped by its launcher reports
ENDED_FROM_OUTSIDE = {"CANCELLED", "TIMEOUT", "PREEMPTED", "DEADLINE"}  # states no rank caused


@dataclass(frozen=True)
class TaskEvent:
    ranks: tuple[int, ...]
    host: str
    what: str  # srun's words: "Exited with exit code 3", "Killed", "Terminated", ...
    before_stop: bool  # reported before the launcher began stopping the other ranks


@dataclass(frozen=True)
class RankFailure:
    rank: int
    host: str
    reason: str
    log: str  # path of the rank's log
    log_tail: str

    def describe(self) -> str:
        text = f"rank {self.rank} on {self.host} failed: {self.reason}"
        if self.log_tail:
            text += f"\n--- last lines of {self.log}:\n{self.log_tail.rstrip()}"
        return text


@dataclass(frozen=True)
class Outcome:
    job_id: str
    state: str  # SLURM's words: COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
    exit_code: int  # what a shell should return for this job: 0 only when COMPLETED
    failed: tuple[RankFailure, ...] = ()  # the ranks that failed by themselves, first first
    stopped: tuple[int, ...] = ()  # the ranks the launcher stopped after the failure
    stopped_by: str = "srun"
    note: str = ""  # what there is to say when no rank reported anything
    causes: tuple[Finding, ...] = ()  # what the logs show, most specific first (follow.triage)

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETED"

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}

    @property
    def cause(self) -> Finding | None:
        return self.causes[0] if self.causes else None

    def raise_if_failed(self) -> "Outcome":
        """For Python callers: the outcome if the job completed, else JobFailed with the report."""
        if not self.ok:
            raise JobFailed(self.report(), f"hpcjax logs {self.job_id}")
        return self

    def report(self) -> str:
        """What a person reads when the job did not complete."""
        if self.ok:
            return f"job {self.job_id} COMPLETED"
        # a cancel's status is its signal's, not the program's: not said as the program's exit code
        lines = [f"job {self.job_id} ended {self.state}" +
                 ("" if self.state == "CANCELLED" else f" (exit code {self.exit_code})")]
        lines += [failure.describe() for failure in self.failed]
        if self.stopped:
            after = " after the failure" if self.failed else ""  # a cancelled or timed-out job had none
            lines.append(f"ranks stopped by {self.stopped_by}{after}: {ranges(list(self.stopped))}")
        if self.note:
            lines.append(self.note)
        if self.causes:
            lines.append(self.causes[0].describe())
            lines += [f"also seen: {f.cause} ({f.evidence})" for f in self.causes[1:]]
        return "\n".join(lines)


def last_attempt(batch_log: str) -> str:
    """The part of a batch log written by the job's last attempt (a requeued job appends)."""
    start = batch_log.rfind(ATTEMPT_LINE + " ")
    return batch_log[start:] if start >= 0 else batch_log


def srun_events(batch_log: str) -> list[TaskEvent]:
    """srun's reports of failed tasks in a batch log's last attempt, in order, each marked
    whether it came before srun began terminating the step (--kill-on-bad-exit)."""
    batch_log = last_attempt(batch_log)
    cause_part = batch_log.split(SRUN_TERMINATING, 1)[0]
    events = []
    for match in SRUN_TASK_ERROR.finditer(batch_log):
        ranks = []
        for part in match["tasks"].split(","):
            first, _, last = part.partition("-")
            ranks.extend(range(int(first), int(last or first) + 1))
        events.append(TaskEvent(tuple(ranks), match["host"], match["what"].strip(),
                                before_stop=match.start() < len(cause_part)))
    return events


def analyze(job_id: str, state: str, events: list[TaskEvent], rank_log, *, job_exit_code: int = 0,
            stopped_by: str = "srun", note: str = "", batch_log: str = "", files=LOCAL) -> Outcome:
    """The Outcome of a finished job. `rank_log(rank)` is the path of a rank's log, read through
    `files` (a host's files) as streams; `batch_log` the text of the job's (last attempt's) batch log."""
    if state == "COMPLETED":
        return Outcome(job_id=job_id, state=state, exit_code=0, stopped_by=stopped_by)
    logs = RankLogs(rank_log, files)

    def tail(rank: int, count: int = LOG_TAIL_LINES) -> str:
        return logs.tail(rank, count)

    outcome = _blame(job_id, state, events, rank_log, logs, job_exit_code, stopped_by, note)
    blamed_ranks = [f.rank for f in outcome.failed][:TRIAGED_RANKS]
    others = sorted({r for e in events for r in e.ranks} - {f.rank for f in outcome.failed})[:TRIAGED_RANKS]
    texts = {**triaged(logs, blamed_ranks, TRIAGE_LINES, scan=True), **triaged(logs, others, TRIAGE_LINES, scan=False)}
    # srun's lines about the ranks it stopped say nothing of the cause: only the failed ranks' count.
    texts["batch log"] = tail_lines(SRUN_TASK_ERROR.sub("", batch_log), TRIAGE_LINES)
    blamed = {f.rank for f in outcome.failed}
    texts["srun"] = "\n".join(f"task {r}: {e.what}" for e in events for r in e.ranks if r in blamed)
    silent = silent_ranks("\n".join(texts.values()))
    if silent:  # the ranks that aborted did so because these went quiet: blame them
        hosts = {r: e.host for e in events for r in e.ranks}
        failed = tuple(RankFailure(r, hosts.get(r, "?"), SILENT, str(rank_log(r)), tail(r))
                       for r in silent)
        others = {r for e in events for r in e.ranks} - set(silent)
        outcome = Outcome(job_id=job_id, state=state, exit_code=outcome.exit_code, failed=failed,
                          stopped=tuple(sorted(others)), stopped_by="JAX's coordination service")
    hang = hangs.read(Path(str(rank_log(0))).parent, job_id, files.read_text)
    if hang is not None:  # the ranks ended by the watch waited for these (if one stood out)
        failed = tuple(RankFailure(r, _host(hang, r, events), hang.reason(r), str(rank_log(r)), tail(r))
                       for r in hang.held_by)
        note = hang.stacks_text(job_id) if failed else f"hung: {hang.why}\n{hang.stacks_text(job_id)}"
        # the hang's status, whichever rank's end srun saw first (contract.HANG_MARKER says why)
        exit_code = STUCK_EXIT_CODE if state == "FAILED" else outcome.exit_code
        outcome = Outcome(job_id=job_id, state=state, exit_code=exit_code, failed=failed,
                          stopped=tuple(r for r in range(len(hang.entries) + len(hang.silent)) if r not in hang.held_by),
                          stopped_by="hpcjax's hang watch", note=note)
    # What the failed ranks, srun and the batch log say comes first; the other ranks' logs
    # mostly show the consequences (a peer's connection reset), so they only add.
    first = {k: v for k, v in texts.items() if k in ("batch log", "srun") or
             k in {f"rank {f.rank} log" for f in outcome.failed}}
    findings = triage(first) + triage({k: v for k, v in texts.items() if k not in first})
    if silent:  # the coordination service's word on who went quiet outranks every consequence
        findings.sort(key=lambda f: f.cause != "frozen rank")
    if hang is not None:  # so does the hang watch's
        blamed_text = ", ".join(f"rank {r}" for r in hang.held_by)
        findings.insert(0, Finding("hang", f"{hang.seen_by}; {blamed_text + ' ' if blamed_text else ''}{hang.why}",
                                   HANG_HINT))
    causes: dict[str, Finding] = {}
    for finding in findings:
        causes.setdefault(finding.cause, finding)  # each cause once, its first evidence kept
    return replace(outcome, causes=tuple(causes.values()))


def _host(hang, rank: int, events: list[TaskEvent]) -> str:
    entry = next((e for e in hang.entries if e["rank"] == rank), {})
    return entry.get("host") or next((e.host for e in events if rank in e.ranks), "?")


def _blame(job_id, state, events, rank_log, logs: RankLogs, job_exit_code, stopped_by, note) -> Outcome:
    # The cause: what was reported before the launcher stopped anyone; failing that,
    # whatever is not a stop. A job that was only stopped (cancelled, timed out) has no
    # failed rank: its ranks are all "stopped".
    def stop(event: TaskEvent) -> bool:
        return event.what.startswith(STOPPED_WORDS)

    # In a job SLURM (or the user) ended, a rank that was killed or terminated was stopped, not failing.
    own = [e for e in events if e.before_stop and not (state in ENDED_FROM_OUTSIDE and stop(e))] or \
          [e for e in events if not stop(e)]
    logs.fetch(rank for e in own for rank in e.ranks)  # every failed rank's tail in one batch
    failed = tuple(RankFailure(rank, e.host, e.what, str(rank_log(rank)), logs.tail(rank, LOG_TAIL_LINES))
                   for e in own for rank in e.ranks)
    blamed = {f.rank for f in failed}
    stopped = tuple(sorted({r for e in events if e not in own for r in e.ranks} - blamed))
    codes = [code for e in own if (code := status_of(e.what))]
    exit_code = codes[0] if codes else shell_status(job_exit_code)
    return Outcome(job_id=job_id, state=state, exit_code=exit_code, failed=failed, stopped=stopped,
                   stopped_by=stopped_by, note="" if failed else note)


def preflight_failed(job_id: str, state: str, exit_code: int, attempt: dict, report: str) -> Outcome | None:
    """The outcome of a job whose last attempt ended in its preflight (a node unfit): the nodes and
    figures the preflight named, not the exit code of its ranks; None for any other ending."""
    line = attempt.get(PREFLIGHT_KEY) or ""
    if not line.startswith("preflight: FAILED"):
        return None
    nodes = attempt.get("failed_node") or "?"
    return Outcome(job_id, state, exit_code, note="the program never started: the preflight failed it",
                   causes=(Finding(f"node(s) {nodes} failed the preflight", f"{line} ({report})",
                                   "with --requeue N --retry-failed the job requeues itself without them; "
                                   "`hpcjax nodes` lists the nodes that failed a preflight"),))

