"""What the SLURM controller and accounting know about a job: state (squeue,
sacct), the hosts of its ranks, cancel.

Every call of a SLURM command goes through run_slurm so a missing installation
or a refused request becomes one clear error.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

from hpcjax.errors import HpcjaxError, SlurmNotFound, UsageError
from hpcjax.launch.outcome import FINISHED_STATES

SACCT_FIELDS = ("JobID", "JobName", "State", "ExitCode", "Elapsed", "NodeList", "NTasks",
                "Reason", "WorkDir")


# Read-only queries that may be retried: a controller busy with a burst of RPCs
# sometimes fails one with no message; following a job must not end on that.
QUERIES = {"squeue", "sacct", "sinfo", "scontrol"}
QUERY_TRIES, QUERY_BACKOFF_S = 4, 0.5
# Answers that will not change on a retry.
FINAL_ERRORS = ("Invalid job id", "Invalid user", "Unknown", "accounting storage is disabled")


def run_slurm(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        raise SlurmNotFound(f"`{argv[0]}` is not on the PATH: SLURM is not installed here",
                            "run this on the cluster's login node, or use the local backend")
    tries = QUERY_TRIES if argv[0] in QUERIES else 1
    for attempt in range(tries):
        proc = subprocess.run(argv, capture_output=True, text=True)
        said = proc.stderr.strip() or proc.stdout.strip()
        if proc.returncode == 0:
            return proc.stdout
        if any(word in said for word in FINAL_ERRORS) or attempt + 1 == tries:
            break
        time.sleep(QUERY_BACKOFF_S * 2 ** attempt)
    raise HpcjaxError(f"`{' '.join(argv)}` failed: {said or f'exit code {proc.returncode}, no message'}",
                      "check that the job id is right and that SLURM is reachable")


def check_job_id(job_id: str) -> str:
    if not re.fullmatch(r"\d+(_\d+)?", str(job_id)):
        raise UsageError(f"invalid job id {job_id!r}",
                         "a SLURM job id is a number, e.g. 1234, or an array element's, e.g. 1234_3")
    return str(job_id)


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

    def describe(self) -> str:
        lines = [f"job {self.job_id} ({self.name}): {self.state}"
                 + (f" ({self.reason})" if self.state == "PENDING" and self.reason else "")]
        if self.nodelist and self.nodelist != "None assigned":
            lines.append(f"  nodes: {self.nodelist}   elapsed: {self.elapsed}   exit code: {self.exit_code}")
        for step in self.steps:
            lines.append(f"  step {step['JobID']}: {step['State']} exit {step['ExitCode']} "
                         f"tasks {step['NTasks']} on {step['NodeList']}")
        return "\n".join(lines)


# After accounting failed (slurmdbd down, or no accounting at all), ask the controller
# alone for this long before trying accounting again: each try costs its retries.
ACCOUNTING_RETRY_S = 60.0
_accounting = {"down_until": 0.0, "told": False}


def accounting_rows(job_id: str) -> list[dict] | None:
    """sacct's rows for the job, or None when accounting cannot be asked (said once)."""
    if time.monotonic() < _accounting["down_until"]:
        return None
    try:
        text = run_slurm(["sacct", "-j", job_id, "-P", "-n", "-o", ",".join(SACCT_FIELDS)])
    except SlurmNotFound:
        raise
    except HpcjaxError as err:
        _accounting["down_until"] = time.monotonic() + ACCOUNTING_RETRY_S
        if not _accounting["told"]:
            _accounting["told"] = True
            said = err.message.strip().splitlines()[-1].split("error: ")[-1]  # sacct's last word
            print(f"warning: SLURM accounting is unavailable ({said}); following the job through the "
                  "controller (squeue, scontrol), which forgets a job MinJobAge after it ends: finished jobs "
                  "older than that cannot be looked up, and steps are not listed", file=sys.stderr, flush=True)
        return None
    return [dict(zip(SACCT_FIELDS, line.split("|"))) for line in text.splitlines() if line]


def controller_row(job_id: str) -> dict:
    """What the controller knows of the job (`scontrol show job`), in sacct's field names."""
    try:
        text = run_slurm(["scontrol", "show", "job", "-o", job_id])
    except HpcjaxError as err:
        if "Invalid job id" in err.message:
            return {}
        raise
    fields = dict(re.findall(r"(\w+)=(\S*)", text))
    return {"JobID": job_id, "JobName": fields.get("JobName", ""), "State": fields.get("JobState", ""),
            "ExitCode": fields.get("ExitCode", ""), "Elapsed": fields.get("RunTime", ""),
            "NodeList": fields.get("NodeList", ""), "Reason": fields.get("Reason", ""),
            "WorkDir": fields.get("WorkDir", "")}


def job_status(job_id: str) -> JobStatus:
    """The job's state: the controller's word while it remembers the job (it is
    current; accounting lags a moment behind), accounting's for older jobs, and
    accounting's exit code, elapsed time, working directory and steps. Without
    accounting, the controller's alone."""
    job_id = check_job_id(job_id)
    rows = accounting_rows(job_id)
    if rows is None:
        main = controller_row(job_id)
        rows = []
        if not main:
            raise HpcjaxError(f"SLURM knows no job {job_id}, and accounting is unavailable",
                              "the controller forgets a job MinJobAge after it ends; check the id with "
                              "`squeue --me`")
    else:
        main = next((r for r in rows if r["JobID"] == job_id), {})
    queue = _queue_line(job_id)
    if not queue and not main:
        raise HpcjaxError(f"SLURM knows no job {job_id}", "check the id with `squeue --me` or `sacct`")
    status = JobStatus(job_id=job_id, name=main.get("JobName", ""),
                       state=main.get("State", "").split(" ")[0],  # "CANCELLED by 0" -> CANCELLED
                       reason=main.get("Reason", ""), exit_code=main.get("ExitCode", ""),
                       elapsed=main.get("Elapsed", ""), nodelist=main.get("NodeList", ""),
                       workdir=main.get("WorkDir", ""),
                       steps=[r for r in rows if r["JobID"] != job_id])
    if queue:
        status.name, status.state, status.reason, status.nodelist, _ = queue.splitlines()[0].split("|")
    return status


def _queue_line(job_id: str) -> str:
    """The controller's line for the job; empty once it has forgotten it (MinJobAge)."""
    try:
        return run_slurm(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%j|%T|%r|%N|%M"]).strip()
    except SlurmNotFound:
        raise
    except HpcjaxError as err:
        if "Invalid job id" in err.message:
            return ""
        raise


def cancel_job(job_id: str) -> None:
    """scancel, refusing a job SLURM does not know (scancel itself only warns) or one
    that has already ended."""
    status = job_status(job_id)  # raises for a job SLURM does not know
    if status.finished:
        raise HpcjaxError(f"job {job_id} has already ended ({status.state}); nothing to cancel",
                          f"see `hpcjax status {job_id}`")
    run_slurm(["scancel", check_job_id(job_id)])


def hosts_of_ranks(status: JobStatus, num_ranks: int) -> dict[int, str]:
    """Rank -> node for the job's first step: srun places ranks block-wise, nodes in order."""
    step = next((s for s in status.steps if s["JobID"] == f"{status.job_id}.0"), None)
    # Without accounting there are no steps: hpcjax's one step spans the job's nodes.
    nodelist = step["NodeList"] if step else status.nodelist
    if not nodelist or nodelist in ("None assigned", "(null)") or not num_ranks:
        return {}
    hosts = run_slurm(["scontrol", "show", "hostnames", nodelist]).split()
    per_node = -(-num_ranks // len(hosts))
    return {rank: hosts[min(rank // per_node, len(hosts) - 1)] for rank in range(num_ranks)}
