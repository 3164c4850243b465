"""Submit a JobSpec to SLURM through submitit, and follow it to its end.

The only module that runs sbatch (through submitit) and decides what a job's
end means. The submission file is rendered from the same template as
`hpcjax render`, so what render prints is exactly what is submitted.
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

from hpcjax import jobs
from hpcjax.errors import JobFailed, SlurmNotFound, SubmitError
from hpcjax.render import render_sbatch
from hpcjax.spec import JobSpec

POLL_S = 2.0
STILL_EVERY_S = 30.0  # while nothing changes, say so this often
# Pending reasons that mean the job can never start as asked: waiting is pointless.
NEVER_STARTS = {"PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints",
                "InvalidAccount", "InvalidQOS", "AccountNotAllowed", "QOSNotAllowed",
                "ReqNodeNotAvail, UnavailableNodes:", "JobHeldAdmin", "DependencyNeverSatisfied"}
LOG_TAIL_LINES = 20
STEP_TERMINATING = "Terminating StepId"  # srun's line when it starts stopping the other ranks


def _executor_class():
    # submitit is imported here, not at module import: the CLI must start fast.
    import submitit

    class HpcjaxSlurmExecutor(submitit.SlurmExecutor):
        """submitit's SLURM executor whose submission file is hpcjax's rendered script.

        submitit still does the bookkeeping: writes the file into the job folder,
        runs sbatch, reads the job id, watches the job through sacct, cancels it.
        """

        def __init__(self, spec: JobSpec) -> None:
            super().__init__(folder=spec.output_dir)
            self.spec = spec

        def _make_submission_file_text(self, command: str, uid: str) -> str:
            return render_sbatch(self.spec)

        def _num_tasks(self) -> int:
            return self.spec.layout.num_processes

        def submit_spec(self):
            # The rendered script carries its own srun line, so no pickled function.
            return self._submit_command(command="")

    return HpcjaxSlurmExecutor


def cluster_summary() -> str:
    try:
        text = jobs.run_slurm(["sinfo", "-h", "-o", "%P %D nodes, %c CPUs, gres %G"])
    except Exception:  # a summary for a hint must never hide the real error
        return ""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def submit(spec: JobSpec):
    """Submit spec; return submitit's job. Raises SubmitError if SLURM refuses it
    or holds it with a reason that means it can never start."""
    if shutil.which("sbatch") is None:
        raise SlurmNotFound("SLURM is not installed on this machine (no `sbatch` on the PATH)",
                            "run `hpcjax submit` on the cluster's login node, or on this machine's "
                            "CPU with --backend local")
    import submitit

    Path(spec.output_dir).mkdir(parents=True, exist_ok=True)  # sbatch needs it to exist
    try:
        job = _executor_class()(spec).submit_spec()
    except submitit.core.utils.FailedJobError as err:
        summary = cluster_summary()
        raise SubmitError(f"sbatch refused the job ({spec.layout.name}): {str(err).strip()}",
                          f"the cluster has: {summary}" if summary else
                          "check the layout against `sinfo -o '%P %D %c %G'`") from None
    jobs.save_record(job.job_id, spec.output_dir, asdict(spec.layout))
    print(f"submitted job {job.job_id} ({spec.layout.name}, {spec.layout.num_processes} "
          f"processes); logs in {spec.output_dir}/", file=sys.stderr)
    ensure_can_start(job.job_id)
    return job


def ensure_can_start(job_id: str, patience_s: float = 10.0) -> None:
    """Wait until the scheduler has looked at the job once; cancel and fail if it
    says the job can never start (sbatch accepts such jobs on many clusters)."""
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        status = jobs.job_status(job_id)
        if status.state != "PENDING":
            return
        _fail_if_never_starts(status)
        if status.reason not in ("", "None"):
            return
        time.sleep(0.5)


def _fail_if_never_starts(status: jobs.JobStatus) -> None:
    if status.reason in NEVER_STARTS or status.reason.startswith("ReqNodeNotAvail"):
        jobs.cancel_job(status.job_id)
        summary = cluster_summary()
        raise SubmitError(f"job {status.job_id} can never start: SLURM holds it with reason "
                          f"{status.reason}; it was cancelled",
                          f"ask for what the cluster has: {summary}" if summary else
                          "compare the request with `sinfo -o '%P %D %c %G'`")


def wait_and_report(job_id: str, poll_s: float = POLL_S) -> int:
    """Follow the job, showing each state change on stderr; return 0 if it
    COMPLETED, else print who failed and return the job's exit code (or 1)."""
    last, started, last_print = None, time.monotonic(), 0.0
    while True:
        status = jobs.job_status(job_id)
        shown = status.state + (f" ({status.reason})" if status.state == "PENDING" else "")
        if status.state == "RUNNING":
            shown += f" on {status.nodelist}"
        now = time.monotonic()
        if shown != last or now - last_print >= STILL_EVERY_S:
            still = "still " if shown == last else ""
            print(f"job {job_id}: {still}{shown}  [{now - started:.0f}s]", file=sys.stderr, flush=True)
            last, last_print = shown, now
        if status.state == "PENDING":
            _fail_if_never_starts(status)
        if status.finished:
            break
        time.sleep(poll_s)
    if status.state == "COMPLETED":
        return 0
    print(failure_report(job_id, status), file=sys.stderr)
    return failure_exit_code(job_id, status)


def failure_exit_code(job_id: str, status: jobs.JobStatus) -> int:
    """The failing rank's own exit code when srun reported one, else the job's, else 1."""
    batch = jobs.batch_log_path(jobs.log_dir_of(job_id), job_id)
    errors = jobs.task_errors(batch.read_text(errors="replace")) if batch.is_file() else []
    for error in errors:
        match = re.fullmatch(r"Exited with exit code (\d+)", error["what"])
        if match and 0 < int(match[1]) < 256:
            return int(match[1])
    code = int(status.exit_code.split(":")[0] or 0) if status.exit_code else 0
    return code if 0 < code < 256 else 1


def failure_report(job_id: str, status: jobs.JobStatus) -> str:
    log_dir = jobs.log_dir_of(job_id)
    batch = jobs.batch_log_path(log_dir, job_id)
    batch_text = batch.read_text(errors="replace") if batch.is_file() else ""
    errors = jobs.task_errors(batch_text)
    # The ranks that failed by themselves: what srun reported before it began
    # terminating the step (--kill-on-bad-exit), not the ranks it stopped after.
    cause = jobs.task_errors(batch_text.split(STEP_TERMINATING, 1)[0])
    own = cause or [e for e in errors if not e["what"].startswith(("Killed", "Terminated"))] or errors
    lines = [f"job {job_id} ended {status.state} (exit code {status.exit_code})"]
    if not own:
        lines.append(f"no rank reported an error; last lines of {batch}:")
        lines.append(jobs.tail_lines(batch_text, LOG_TAIL_LINES).rstrip())
        return "\n".join(lines)
    for error in own:
        for rank in error["tasks"]:
            lines.append(jobs.describe_rank_failure(rank, error["host"], error["what"],
                                                    jobs.rank_log_path(log_dir, job_id, rank), LOG_TAIL_LINES))
    killed = sorted({r for e in errors if e not in own for r in e["tasks"]})
    if killed:
        lines.append(f"ranks stopped by srun after the failure: {', '.join(map(str, killed))}")
    return "\n".join(lines)


def submit_and_wait(spec: JobSpec) -> int:
    """The Python API's one call: submit, follow, raise JobFailed unless COMPLETED."""
    job = submit(spec)
    code = wait_and_report(job.job_id)
    if code:
        raise JobFailed(f"job {job.job_id} failed", f"hpcjax logs {job.job_id}")
    return code
