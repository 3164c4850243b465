"""What SLURM knows about a job: state (sacct, squeue), per-rank logs, cancel.

Every call of a SLURM command goes through run_slurm so a missing installation
or a refused request becomes one clear error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpcjax.errors import HpcjaxError, SlurmNotFound, UsageError
from hpcjax.render import BATCH_LOG, RANK_LOG

HOME_ENV = "HPCJAX_HOME"  # where hpcjax keeps its job records (default ~/.hpcjax)
SACCT_FIELDS = ("JobID", "JobName", "State", "ExitCode", "Elapsed", "NodeList", "NTasks",
                "Reason", "WorkDir")
# srun's own report of a task that ended badly, in the batch log, e.g.
# "srun: error: node2: task 5: Exited with exit code 3" or "tasks 0-3: Killed".
SRUN_TASK_ERROR = re.compile(r"srun: error: (?P<host>\S+): tasks? (?P<tasks>[\d,\-]+): (?P<what>.+)")
FINISHED_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
                   "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


def run_slurm(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        raise SlurmNotFound(f"`{argv[0]}` is not on the PATH: SLURM is not installed here",
                            "run this on the cluster's login node, or use the local backend")
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise HpcjaxError(f"`{' '.join(argv)}` failed: {proc.stderr.strip() or proc.stdout.strip()}",
                          "check that the job id is right and that SLURM is reachable")
    return proc.stdout


def check_job_id(job_id: str) -> str:
    if not re.fullmatch(r"\d+", str(job_id)):
        raise UsageError(f"invalid job id {job_id!r}", "a SLURM job id is a number, e.g. 1234")
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


def job_status(job_id: str) -> JobStatus:
    """The job's state: the controller's word while it remembers the job (it is
    current; accounting lags a moment behind), accounting's for older jobs, and
    accounting's exit code, elapsed time, working directory and steps."""
    job_id = check_job_id(job_id)
    text = run_slurm(["sacct", "-j", job_id, "-P", "-n", "-o", ",".join(SACCT_FIELDS)])
    rows = [dict(zip(SACCT_FIELDS, line.split("|"))) for line in text.splitlines() if line]
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
    run_slurm(["scancel", check_job_id(job_id)])


# --- job records: where a submitted job's logs are --------------------------------


def records_dir() -> Path:
    return Path(os.environ.get(HOME_ENV) or Path.home() / ".hpcjax") / "jobs"


def save_record(job_id: str, output_dir: str, layout: dict) -> None:
    directory = records_dir()
    directory.mkdir(parents=True, exist_ok=True)
    record = {"job_id": job_id, "output_dir": str(Path(output_dir).resolve()), "layout": layout}
    (directory / f"{job_id}.json").write_text(json.dumps(record))


def log_dir_of(job_id: str) -> Path:
    record = records_dir() / f"{job_id}.json"
    if record.is_file():
        return Path(json.loads(record.read_text())["output_dir"])
    # A script rendered by hpcjax and submitted with plain sbatch: the default
    # log directory, relative to the job's working directory.
    workdir = job_status(job_id).workdir or "."
    return Path(workdir) / "hpcjax-logs"


def rank_log_path(log_dir: Path, job_id: str, rank: int) -> Path:
    return Path(RANK_LOG.format(dir=log_dir).replace("%j", job_id).replace("%t", str(rank)))


def batch_log_path(log_dir: Path, job_id: str) -> Path:
    return Path(BATCH_LOG.format(dir=log_dir).replace("%j", job_id))


def rank_logs(job_id: str) -> dict[int, Path]:
    """Every rank's log file that exists, by rank."""
    log_dir = log_dir_of(job_id)
    name = re.escape(Path(RANK_LOG).name).replace("%j", job_id).replace("%t", r"(\d+)")
    pattern = re.compile(name)
    found = {}
    for path in log_dir.glob(f"{job_id}-*"):
        match = pattern.fullmatch(path.name)
        if match:
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def hosts_of_ranks(job_id: str, num_ranks: int) -> dict[int, str]:
    """Rank -> node for the job's first step: srun places ranks block-wise, nodes in order."""
    status = job_status(job_id)
    step = next((s for s in status.steps if s["JobID"] == f"{job_id}.0"), None)
    if step is None or not step["NodeList"] or not num_ranks:
        return {}
    hosts = run_slurm(["scontrol", "show", "hostnames", step["NodeList"]]).split()
    per_node = -(-num_ranks // len(hosts))
    return {rank: hosts[min(rank // per_node, len(hosts) - 1)] for rank in range(num_ranks)}


def tail_lines(text: str, count: int | None) -> str:
    if count is None:
        return text
    lines = text.splitlines(keepends=True)
    return "".join(lines[-count:]) if count > 0 else ""


def read_logs(job_id: str, rank: int | None = None, tail: int | None = None) -> str:
    """One rank's log as it is, or every rank's with lines prefixed `[rank R host] `."""
    job_id = check_job_id(job_id)
    logs = rank_logs(job_id)
    if not logs:
        raise HpcjaxError(f"no rank logs of job {job_id} in {log_dir_of(job_id)}",
                          "the job may not have started yet: see `hpcjax status " + job_id + "`")
    if rank is not None:
        if rank not in logs:
            raise UsageError(f"job {job_id} has no log for rank {rank}",
                             f"ranks with logs: {', '.join(map(str, logs))}")
        return tail_lines(logs[rank].read_text(errors="replace"), tail)
    hosts = hosts_of_ranks(job_id, len(logs))
    out = []
    for r, path in logs.items():
        prefix = f"[rank {r} {hosts.get(r, '?')}] "
        for line in tail_lines(path.read_text(errors="replace"), tail).splitlines():
            out.append(prefix + line + "\n")
    return "".join(out)


def describe_rank_failure(rank: int, host: str, what: str, log: Path, lines: int = 20) -> str:
    """`rank R on HOST failed: WHAT` and the tail of that rank's log."""
    text = f"rank {rank} on {host} failed: {what}"
    if log.is_file():
        text += f"\n--- last lines of {log}:\n" + tail_lines(log.read_text(errors="replace"), lines).rstrip()
    return text


def task_errors(batch_log: str) -> list[dict]:
    """srun's reports of failed tasks: [{host, tasks: [ints], what}], in log order."""
    errors = []
    for match in SRUN_TASK_ERROR.finditer(batch_log):
        tasks = []
        for part in match["tasks"].split(","):
            first, _, last = part.partition("-")
            tasks.extend(range(int(first), int(last or first) + 1))
        errors.append({"host": match["host"], "tasks": tasks, "what": match["what"].strip()})
    return errors
