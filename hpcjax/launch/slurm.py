"""The SLURM backend: submit a JobSpec through submitit, follow it as a Run.

The submission file is rendered from the same template as `hpcjax render`, so
what render prints is exactly what is submitted. submitit is reached through
the smallest adapter that works: two of SlurmExecutor's methods overridden
(`_make_submission_file_text`, `_num_tasks`) and one called (`_submit_command`),
checked by a test that fails loudly if a submitit release changes them.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path

from hpcjax.contract import DEFAULT_OUTPUT_DIR, Layout, batch_log_path, rank_log_path
from hpcjax.errors import SlurmNotFound, SubmitError
from hpcjax.containers import binds
from hpcjax.catalog import records
from hpcjax.launch import chains, profiles, slurmctl
from hpcjax.launch.runs import record as record_run, run_dir_of, submission
from hpcjax.launch.jobstatus import JobStatus
from hpcjax.hosts.cluster import Cluster
from hpcjax.launch.outcome import Outcome, analyze, last_attempt, srun_events, tail_lines
from hpcjax.launch.render import render_sbatch
from hpcjax.launch.run import Run, interrupts_held, say
from hpcjax.launch.spec import JobSpec
from hpcjax.validate import make_directory

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


def submit(spec: JobSpec, cluster: Cluster | None = None, announce=None, **shipping) -> "SlurmRun":
    """Submit spec (here, or to a cluster over SSH); return its Run once the scheduler has
    looked at it. Raises SubmitError if SLURM refuses it or holds it with a reason that means
    it can never start. `announce(job_id)`, if given, as soon as the job is recorded."""
    if spec.array:
        raise SubmitError("a job array has one Run per element", "submit it with slurm.submit_array(spec)")
    [run] = _submit(spec, [None], cluster or Cluster(), shipping, announce)
    return run


def submit_array(spec: JobSpec, cluster: Cluster | None = None, announce=None, **shipping) -> list["SlurmRun"]:
    """Submit a job array (spec.array elements); return one Run per element, in order."""
    return _submit(spec, list(range(spec.array)), cluster or Cluster(), shipping, announce)


def _submit(spec: JobSpec, elements: list[int | None], cluster: Cluster, shipping: dict,
            announce=None) -> list["SlurmRun"]:
    slurm = slurmctl.slurm_on(cluster.host())
    if spec.after:
        chains.check_known(spec.after, slurm.job_status, f"SLURM on {cluster.name}")
    if spec.array:
        slurm.check_array_size(spec.array)
    if cluster.remote:
        from hpcjax.launch import remote

        prepared = remote.prepare(spec, cluster, **shipping)
        with interrupts_held():
            job_id, log_dir = remote.sbatch(prepared, cluster)
            runs = _record(prepared.spec, elements, job_id, log_dir, cluster, prepared.snapshot,
                           dict(prepared.run_dirs), announce)
    else:
        binds.check_before_submit(spec)
        with interrupts_held():
            job_id = _sbatch_here(spec)
            runs = _record(spec, elements, job_id, str(Path(spec.output_dir).resolve()), cluster, str(Path.cwd()),
                           announce=announce)
    runs[0].ensure_can_start()
    return runs


def _record(spec: JobSpec, elements: list[int | None], job_id: str, log_dir: str, cluster: Cluster, workdir: str,
            run_dirs: dict[str, str] | None = None, announce=None) -> list["SlurmRun"]:
    """The Runs of a submitted job (one per array element) and their records; announced."""
    runs = [SlurmRun(job_id if i is None else f"{job_id}_{i}", log_dir, spec.layout.num_processes, cluster)
            for i in elements]
    for run, element in zip(runs, elements):
        record = {"backend": "slurm", "output_dir": log_dir, "layout": spec.layout.as_dict(), "workdir": workdir,
                  **submission(spec, element, job_id)}
        named = run_dir_of(spec, record["command"])
        if named:  # what `hpcjax fetch JOBID` brings back besides the logs (a kept one: where it is kept)
            record["run_dir"] = run.run_dir = (run_dirs or {}).get(named) or (
                named if named.startswith("/") else f"{workdir}/{named}")
        if cluster.remote:
            record["cluster"] = cluster.as_record()
            from hpcjax.launch import remote

            remote.save_record(cluster, run.job_id, record)
        record_run(records.key(run.job_id, cluster.destination), record)
    what = f"job {job_id}" if spec.array == 0 else f"job array {job_id} of {spec.array} elements"
    where = f" on {cluster.name}" if cluster.remote else ""
    say(f"submitted {what}{where} ({spec.layout.described}); logs in {log_dir}/")
    if announce is not None:
        announce(job_id)
    return runs


def _sbatch_here(spec: JobSpec) -> str:
    """sbatch on this machine, through submitit; the job id."""
    if shutil.which("sbatch") is None:
        raise SlurmNotFound("SLURM is not installed on this machine (no `sbatch` on the PATH)",
                            "run `hpcjax submit` on the cluster's login node, or on this machine's "
                            "CPU with --backend local")
    import submitit

    make_directory(spec.output_dir, "--output-dir")  # sbatch needs it to exist
    try:
        job = executor_class()(spec).submit_spec()
    except submitit.core.utils.FailedJobError as err:
        said = str(err).strip()
        raise SubmitError(f"sbatch refused the job ({spec.layout.name}): {said}",
                          slurmctl.slurm_on().refusal_hint(said)) from None
    return str(job.job_id)


class SlurmRun(Run):
    backend = "slurm"

    def __init__(self, job_id: str, log_dir, num_ranks: int, cluster: Cluster | None = None) -> None:
        self.cluster = cluster or Cluster()
        super().__init__(slurmctl.check_job_id(job_id), log_dir, num_ranks, self.cluster.host())
        self.slurm = slurmctl.slurm_on(self.host)
        self.slurm.watcher.follow(self.job_id)  # polled with every other job this process follows
        self._status: JobStatus | None = None

    def catalog_key(self) -> str:
        return records.key(self.job_id, self.cluster.destination)

    @classmethod
    def attach(cls, job_id: str, record: dict | None, cluster: Cluster | None = None) -> "SlurmRun":
        """A job submitted earlier: by hpcjax (its record says where the logs are) or with
        plain sbatch (the default log directory under the job's working directory)."""
        if record:  # the cluster the user named wins; else the user's own way to the one the record names
            cluster = cluster or profiles.cluster_from_record(record.get("cluster"))
            run = cls(job_id, record["output_dir"], Layout.from_dict(record.get("layout", {})).num_processes,
                      cluster)
            run.run_dir = record.get("run_dir")
            return run
        cluster = cluster or Cluster()
        status = slurmctl.slurm_on(cluster.host()).job_status(job_id)
        run = cls(job_id, f"{status.workdir or '.'}/{DEFAULT_OUTPUT_DIR}", 0, cluster)
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
        text = self.files.read_text(str(batch)) or ""
        job_code = self._status.job_exit_code if self._status else 0
        outcome = analyze(self.job_id, state, srun_events(text), self._rank_log, job_exit_code=job_code,
                          note=f"no rank reported an error; last lines of {batch}:\n{tail_lines(text, 20).rstrip()}",
                          batch_log=last_attempt(text), files=self.files)
        if not text and state == "CANCELLED":  # it never started: a dependency that ended otherwise than asked?
            outcome = dataclasses.replace(outcome, note=self._not_started() or outcome.note)
        why = (self.attempts() or [{}])[-1].get("not_retried")  # --retry-failed said why it stopped
        return dataclasses.replace(outcome, note=f"{outcome.note}\nnot retried: {why}".strip()) if why else outcome

    def _not_started(self) -> str:
        """Why a job with --after never started: the first dependency that did not end as asked."""
        for dependency in (records.load(self.catalog_key()) or {}).get("after") or []:
            job, _, when = dependency.partition(":")
            lines = self.slurm.run(["sacct", "-X", "-n", "-P", "-j", job, "-o", "State"]).split()
            ended = lines[-1] if lines else "UNKNOWN"
            if when == "ok" and ended != "COMPLETED":
                return f"not started: job {job} {ended.lower()} (--after {dependency}), so SLURM cancelled this one"
        return ""

    def _rank_log(self, rank: int):
        return rank_log_path(self.log_dir, self.job_id, rank)
