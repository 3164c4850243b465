"""What SLURM says of jobs, read: a job's state (squeue's fields and sacct's rows), the watcher
that asks for every followed job at once (as submitit's InfoWatcher does: one `squeue` and one
`sacct` per poll, whatever the number of jobs a process follows), and each attempt of a requeued
job (`sacct --duplicates`)."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime

from hpcjax.values import jobid
from hpcjax.protocol.contract import FINISHED_STATES
from hpcjax.values.errors import HpcjaxError
from hpcjax.slurm import reasons
from hpcjax.slurm.commands import ATTEMPT_FIELDS

FRESH_S = 1.0  # an answer younger than this is still the news: polls within it share one query


@dataclass
class JobStatus:
    job_id: str
    name: str
    state: str  # SLURM's, e.g. PENDING, RUNNING, COMPLETED, FAILED
    reason: str = ""  # why it is pending, if it is
    exit_code: str = ""
    elapsed: str = ""
    nodelist: str = ""
    workdir: str = ""
    steps: list[dict] = field(default_factory=list)
    start: str = ""  # a pending job's expected start (SLURM's estimate, ISO local time), if it has one
    running_s: int | None = None  # a running job's time in its current attempt (squeue's), when squeue said it

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    @property
    def job_exit_code(self) -> int:
        """SLURM's "3:0" (code:signal) as the code."""
        head = self.exit_code.split(":")[0]
        return int(head) if head.isdigit() else 0

    def as_dict(self) -> dict:
        return asdict(self)

    def pending_words(self) -> str:
        """Why it waits, in words, and when SLURM expects it to start (if it has said)."""
        when = f"; SLURM expects it to start at {self.start.replace('T', ' ')}" if self.start else ""
        return reasons.in_words(self.reason) + when

    def describe(self, script_exit: int | None = None) -> str:
        """`script_exit`: what the batch script itself says it exited with (its last attempt's
        record), which sacct shows less 128 when it is above 128 (130, a rank's Ctrl-C, as 2:0)."""
        lines = [f"job {self.job_id}" + (f" ({self.name})" if self.name else "") + f": {self.state}"
                 + (f": {self.pending_words()}" if self.state == "PENDING" else "")]
        change = reasons.explain(self.reason)[1] if self.state == "PENDING" else ""
        if change:
            lines.append(f"  to start sooner: {change}")
        code = self.exit_code
        if script_exit is not None and script_exit > 128 and self.job_exit_code == script_exit - 128:
            code = f"{script_exit} (sacct shows {self.exit_code}: it drops 128 from codes above 128)"
        if self.nodelist and self.nodelist != "None assigned":
            lines.append(f"  nodes: {self.nodelist}   elapsed: {self.elapsed}   exit code: {code}")
        for step in self.steps:
            lines.append(f"  step {step['JobID']}: {step['State']} exit {step['ExitCode']} "
                         f"tasks {step['NTasks']} on {step['NodeList']}")
        return "\n".join(lines)


def elapsed_seconds(text: str) -> int:
    """SLURM's Elapsed ([D-]H:M:S, M:S; "00:00:00" in a job's first second) as seconds; 0 for what
    is not one (a user's walltime is hpcjax.job.spec's to parse, and refuse)."""
    import re

    match = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", (text or "").strip())
    if match is None:
        return 0
    days, hours, minutes, seconds = (int(x or 0) for x in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


# An array element cancelled while it was pending leaves no trace of its own: squeue drops it, and
# accounting only ever had the array's pending row ("741_[1-2%1]", then "741_[1%1]").
CANCELLED_PENDING = "cancelled before it started: SLURM keeps no record of an array element cancelled while pending"


def status_of(job_id: str, queue: list[str] | None, rows: list[dict] | None, controller: dict | None,
              array_known: bool = False) -> JobStatus:
    """One job's status from what the controller (squeue's fields, or scontrol's row when
    accounting is down) and accounting (sacct's rows) said about it. `array_known`: the controller or
    accounting knows other elements of its array (an element absent beside them was cancelled pending)."""
    if rows is None:
        main, steps = controller or {}, []
    else:
        main = next((r for r in rows if r["JobID"] == job_id), {})
        steps = [r for r in rows if jobid.is_step_of(r["JobID"], job_id)]
    if not queue and not main and rows is not None and array_known and "_" in job_id:
        return JobStatus(job_id=job_id, name="", state="CANCELLED", reason=CANCELLED_PENDING)
    if not queue and not main:
        raise HpcjaxError(f"SLURM knows no job {job_id}" + (", and accounting is unavailable" if rows is None else ""),
                          "the controller forgets a job MinJobAge after it ends; check the id with "
                          "`squeue --me` or `sacct`")
    status = JobStatus(job_id=job_id, name=main.get("JobName", ""),
                       state=main.get("State", "").split(" ")[0],  # "CANCELLED by 0" -> CANCELLED
                       reason=main.get("Reason", ""), exit_code=main.get("ExitCode", ""),
                       elapsed=main.get("Elapsed", ""), nodelist=main.get("NodeList", ""),
                       workdir=main.get("WorkDir", ""), steps=steps)
    if queue:
        status.name, status.state, status.reason, status.nodelist, used, start = queue
        status.start = start if status.state == "PENDING" and start[:1].isdigit() else ""  # N/A, Unknown: none
        status.running_s = elapsed_seconds(used) if status.state == "RUNNING" else None
    return status


class Watcher:
    """Every job this process follows on one cluster, asked about together."""

    def __init__(self, slurm, fresh_s: float = FRESH_S) -> None:
        self.slurm, self.fresh_s = slurm, fresh_s
        self.following: list[str] = []
        self.answers: dict[str, JobStatus | HpcjaxError] = {}
        self.final: set[str] = set()  # ended, and accounting agrees: never asked again
        self.asked_at = float("-inf")
        self.queries = 0  # polls made (each one squeue and at most one sacct): for tests and benchmarks

    def follow(self, job_id: str) -> None:
        if job_id not in self.following:
            self.following.append(job_id)

    def status(self, job_id: str, *, fresh: bool = False) -> JobStatus:
        self.follow(job_id)
        if self.next_asked(job_id, fresh=fresh):
            self.poll()
        answer = self.answers[job_id]
        if isinstance(answer, HpcjaxError):
            raise answer
        return answer

    def next_asked(self, job_id: str, *, fresh: bool = False) -> list[str]:
        """The jobs the poll that status(job_id) makes asks about, in its order; none when the last
        answer stands (cli.submitted.ask_slurm_early starts that very poll's queries early)."""
        stale = time.monotonic() - self.asked_at > self.fresh_s
        if job_id in self.final or not (fresh or stale or job_id not in self.answers):
            return []
        return self._unfinished([*self.following, *([] if job_id in self.following else [job_id])])

    def _unfinished(self, job_ids: list[str]) -> list[str]:
        return [j for j in job_ids if j not in self.final]

    def poll(self) -> None:
        """One squeue and one sacct for every followed job that has not ended for good."""
        asking = self._unfinished(self.following)
        self.queries += 1
        queue, rows = at_once(lambda: self.slurm.queue_lines(asking), lambda: self.slurm.accounting_rows(asking))
        # the arrays SLURM has elements of (a pending row "741_[1-2%1]" too)
        arrays = {i.split("_", 1)[0] for i in [*queue, *(r["JobID"] for r in rows or [])] if "_" in i}
        for job_id in asking:
            controller = self.slurm.controller_row(job_id) if rows is None else None
            try:
                status = status_of(job_id, queue.get(job_id), rows, controller, jobid.base(job_id) in arrays)
            except HpcjaxError as error:
                self.answers[job_id] = error
                # asked again only when asked for again (status() follows it): an id SLURM does not
                # know must not ride along in every later query of this process
                self.following.remove(job_id)
                continue
            self.answers[job_id] = status
            accounted = rows is not None and any(r["JobID"] == job_id and r["State"].split(" ")[0] in FINISHED_STATES
                                                 for r in rows)
            if status.finished and accounted:
                self.final.add(job_id)
        self.asked_at = time.monotonic()


def at_once(first, second):
    """(first(), second()), the two run side by side: a status costs the slower query, not both.
    An error of either is raised, the first's when both fail (as when they ran in turn)."""
    got: dict = {}

    def ask() -> None:
        try:
            got["value"] = first()
        except BaseException as error:  # handed to the caller, as if raised there
            got["error"] = error

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    try:
        other = second()
    except BaseException as error:
        thread.join()
        raise got.get("error", error) from None
    thread.join()
    if "error" in got:
        raise got["error"]
    return got["value"], other


def parse_attempts(text: str) -> dict[str, list[dict]]:
    """sacct --duplicates rows -> job id -> its attempts in order (a requeued job has one row each)."""
    out: dict[str, list[dict]] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != len(ATTEMPT_FIELDS):
            continue
        job, state, start, end, nodelist, tres, exit_code = parts
        gpus = next((int(p.split("=")[1]) for p in tres.split(",") if p.startswith("gres/gpu=")
                     and p.split("=")[1].isdigit()), None)
        # A job cancelled while pending (a dependency that failed) has a Start equal to its End
        # in sacct, and no nodes: it never started.
        never_ran = nodelist in ("", "None assigned")
        out.setdefault(job, []).append({"state": state.split()[0] if state else "UNKNOWN",
                                        "start": None if never_ran else _epoch(start),
                                        "end": _epoch(end), "nodelist": nodelist, "gpus": gpus,
                                        "exit_code": int(exit_code.split(":")[0]) if exit_code[:1].isdigit() else None})
    for rows in out.values():
        rows.sort(key=lambda a: a["start"] if a["start"] is not None else float("inf"))
        for number, attempt in enumerate(rows, 1):
            attempt["attempt"] = number
    return out


def _epoch(text: str) -> float | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp()
    except ValueError:  # Unknown, None: not started or not ended
        return None
