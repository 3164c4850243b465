"""The SLURM backend: submit a JobSpec through submitit, follow it as a Run.

The submission file is rendered from the same template as `hpcjax render`, so
what render prints is exactly what is submitted. submitit is reached through
the smallest adapter that works: two of SlurmExecutor's methods overridden
(`_make_submission_file_text`, `_num_tasks`) and one called (`_submit_command`),
checked by a test that fails loudly if a submitit release changes them.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from hpcjax.contract import DEFAULT_OUTPUT_DIR, Layout, batch_log_path, rank_log_path
from hpcjax.errors import SlurmNotFound, SubmitError
from hpcjax.containers import binds
from hpcjax.catalog import records
from hpcjax.launch import slurmctl
from hpcjax.launch.jobstatus import JobStatus
from hpcjax.launch.outcome import Outcome, analyze, last_attempt, read_tail, srun_events
from hpcjax.launch.render import render_sbatch
from hpcjax.launch.run import Run, say
from hpcjax.launch.spec import JobSpec

# Pending reasons that mean the job can never start as asked: waiting is pointless.
NEVER_STARTS = {"PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints",
                "InvalidAccount", "InvalidQOS", "AccountNotAllowed", "QOSNotAllowed",
                "ReqNodeNotAvail, UnavailableNodes:", "JobHeldAdmin", "DependencyNeverSatisfied"}
# submitit's methods hpcjax overrides (the first two) or calls (the last); tests/launch/test_submitit_adapter.py
# pins their signatures, so a submitit release that changes one fails loudly.
SUBMITIT_HOOKS = {"_make_submission_file_text": ("self", "command", "uid"), "_num_tasks": ("self",),
                  "_submit_command": ("self", "command")}


def executor_class():
    # submitit is imported here, not at module import: the CLI must start fast.
    import submitit

    class HpcjaxSlurmExecutor(submitit.SlurmExecutor):
        """submitit's SLURM executor whose submission file is hpcjax's rendered script.
        submitit still writes the file into its folder, runs sbatch and reads the job id."""

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


def submit(spec: JobSpec) -> "SlurmRun":
    """Submit spec; return its Run once the scheduler has looked at it. Raises SubmitError
    if SLURM refuses it or holds it with a reason that means it can never start."""
    if spec.array:
        raise SubmitError("a job array has one Run per element", "submit it with slurm.submit_array(spec)")
    [run] = _submit(spec, [None])
    return run


def submit_array(spec: JobSpec) -> list["SlurmRun"]:
    """Submit a job array (spec.array elements); return one Run per element, in order."""
    return _submit(spec, list(range(spec.array)))


def _submit(spec: JobSpec, elements: list[int | None]) -> list["SlurmRun"]:
    binds.check_before_submit(spec)
    if shutil.which("sbatch") is None:
        raise SlurmNotFound("SLURM is not installed on this machine (no `sbatch` on the PATH)",
                            "run `hpcjax submit` on the cluster's login node, or on this machine's "
                            "CPU with --backend local")
    import submitit

    Path(spec.output_dir).mkdir(parents=True, exist_ok=True)  # sbatch needs it to exist
    try:
        job = executor_class()(spec).submit_spec()
    except submitit.core.utils.FailedJobError as err:
        summary = slurmctl.slurm_on().summary()
        raise SubmitError(f"sbatch refused the job ({spec.layout.name}): {str(err).strip()}",
                          f"the cluster has: {summary}" if summary else
                          "check the layout against `sinfo -o '%P %D %c %G'`") from None
    log_dir = Path(spec.output_dir).resolve()
    runs = [SlurmRun(job.job_id if i is None else f"{job.job_id}_{i}", log_dir, spec.layout.num_processes)
            for i in elements]
    for run in runs:
        records.save(run.job_id, {"backend": "slurm", "output_dir": str(log_dir), "layout": spec.layout.as_dict()})
    what = f"job {job.job_id}" if spec.array == 0 else f"job array {job.job_id} of {spec.array} elements"
    say(f"submitted {what} ({spec.layout.name}, {spec.layout.num_processes} processes); "
        f"logs in {spec.output_dir}/")
    runs[0].ensure_can_start()
    return runs


class SlurmRun(Run):
    backend = "slurm"

    def __init__(self, job_id: str, log_dir: Path, num_ranks: int) -> None:
        super().__init__(slurmctl.check_job_id(job_id), log_dir, num_ranks)
        self.slurm = slurmctl.slurm_on()
        self.slurm.watcher.follow(self.job_id)  # polled with every other job this process follows
        self._status: JobStatus | None = None

    @classmethod
    def attach(cls, job_id: str, record: dict | None) -> "SlurmRun":
        """A job submitted earlier: by hpcjax (its record says where the logs are) or with
        plain sbatch (the default log directory under the job's working directory)."""
        if record:
            return cls(job_id, Path(record["output_dir"]), Layout.from_dict(record.get("layout", {})).num_processes)
        status = slurmctl.job_status(job_id)
        run = cls(job_id, Path(status.workdir or ".") / DEFAULT_OUTPUT_DIR, 0)
        run._status = status
        return run

    def status(self) -> JobStatus:
        self._status = self.slurm.job_status(self.job_id)
        return self._status

    def poll(self) -> tuple[str, str]:
        status = self.status()
        shown = status.state + (f" ({status.reason})" if status.state == "PENDING" else "")
        if status.state == "RUNNING":
            shown += f" on {status.nodelist}"
        if status.state == "PENDING":
            self._fail_if_never_starts(status)
        attempts = self.attempts() if status.state in ("PENDING", "RUNNING", "REQUEUED") else []
        if attempts:
            shown += f", after {len(attempts)} attempt(s), the last {attempts[-1].get('ended')}"
        return status.state, shown

    def ensure_can_start(self, patience_s: float = 10.0) -> None:
        """Wait until the scheduler has looked at the job once; cancel and fail if it
        says the job can never start (sbatch accepts such jobs on many clusters)."""
        deadline = time.monotonic() + patience_s
        while time.monotonic() < deadline:
            state, _ = self.poll()
            if state != "PENDING" or self._status.reason not in ("", "None"):
                return
            time.sleep(0.5)

    def _fail_if_never_starts(self, status: JobStatus) -> None:
        if status.reason in NEVER_STARTS or status.reason.startswith("ReqNodeNotAvail"):
            self.slurm.run(["scancel", self.job_id.split("_")[0]])  # an array's elements share the spec
            summary = self.slurm.summary()
            raise SubmitError(f"job {self.job_id} can never start: SLURM holds it with reason "
                              f"{status.reason}; it was cancelled",
                              f"ask for what the cluster has: {summary}" if summary else
                              "compare the request with `sinfo -o '%P %D %c %G'`")

    def cancel(self) -> None:
        self.slurm.cancel_job(self.job_id)

    def hosts(self) -> dict[int, str]:
        status = self._status if self._status and self._status.finished else self.status()
        return self.slurm.hosts_of_ranks(status, self.num_ranks or len(self.rank_logs()))

    def describe(self) -> str:
        return self._with_ending(self.status().describe())

    def as_dict(self) -> dict:
        return self._with_outcome(self.status().as_dict())

    def _finish(self, state: str) -> Outcome:
        batch = batch_log_path(self.log_dir, self.job_id)
        text = batch.read_text(errors="replace") if batch.is_file() else ""
        job_code = self._status.job_exit_code if self._status else 0
        return analyze(self.job_id, state, srun_events(text), self._rank_log, job_exit_code=job_code,
                       note=f"no rank reported an error; last lines of {batch}:\n{read_tail(batch).rstrip()}",
                       batch_log=last_attempt(text))

    def _rank_log(self, rank: int) -> Path:
        return rank_log_path(self.log_dir, self.job_id, rank)
