"""One SLURM job, followed: its state (the controller's while it remembers the job, then
accounting's), its ranks' hosts, its end and its report (the batch log's srun lines, the
attempts log, why a job with --after never started). Submitting is hpcjax.backends.slurm's."""

from __future__ import annotations

import dataclasses
import time
from datetime import datetime

from hpcjax.values import jobid
from hpcjax.catalog import records
from hpcjax.protocol.contract import (DEFAULT_OUTPUT_DIR, FINISHED_STATES, PREFLIGHT_BAD_KEY, PREFLIGHT_KEY, Layout,
                             batch_log_path, preflight_paths, rank_log_path)
from hpcjax.values.errors import SubmitError
from hpcjax.follow.outcome import Outcome, analyze, last_attempt, preflight_failed, srun_events, tail_lines
from hpcjax.follow.run import Run
from hpcjax.hosts.cluster import THIS_MACHINE, Cluster
from hpcjax.job import clusters
from hpcjax.slurm import commands, controller as slurmctl, reasons
from hpcjax.slurm.status import CANCELLED_PENDING, JobStatus

# How long a submit looks for the scheduler's first word on a job before it returns (the id is
# printed before): SLURM tries a new job at once, so a reason it can never start comes within
# this on an idle controller; on a busy one the follower (`--wait`, `status`, fit()) says it later.
LOOK_S, LOOK_EVERY_S = 1.5, 0.25


def ending(status, last: dict) -> bool:
    """Whether the attempt that ended last is the one still RUNNING in SLURM's eyes: it began before
    that end (its time running is longer than the time since), so no new attempt has started."""
    if status.state != "RUNNING" or status.running_s is None:
        return False
    try:
        ended_at = datetime.fromisoformat(str(last.get("end"))).timestamp()
    except ValueError:
        return False
    return status.running_s + 2 >= time.time() - ended_at  # (squeue counts whole seconds)


class SlurmRun(Run):
    backend = "slurm"

    def __init__(self, job_id: str, log_dir, num_ranks: int, cluster: Cluster = THIS_MACHINE) -> None:
        self.cluster = cluster
        super().__init__(slurmctl.check_job_id(job_id), log_dir, num_ranks, self.cluster.host())
        self.slurm = slurmctl.slurm_on(self.host)
        self.slurm.watcher.follow(self.job_id)  # polled with every other job this process follows
        self._status: JobStatus | None = None

    def catalog_key(self) -> str:
        return records.key(self.job_id, self.cluster.destination)

    @classmethod
    def attach(cls, job_id: str, record: dict | None, cluster: Cluster = THIS_MACHINE) -> "SlurmRun":
        """A job submitted earlier: by hpcjax (its record says where the logs are) or with
        plain sbatch (the default log directory under the job's working directory)."""
        if record:  # the cluster the user named wins; else the user's own way to the one the record names
            cluster = cluster if cluster.remote else clusters.cluster_from_record(record.get("cluster"))
            run = cls(job_id, record["output_dir"], Layout.from_dict(record.get("layout", {})).num_processes,
                      cluster)
            run.run_dir = record.get("run_dir")
            return run
        status = slurmctl.slurm_on(cluster.host()).job_status(job_id)
        run = cls(job_id, f"{status.workdir or '.'}/{DEFAULT_OUTPUT_DIR}", 0, cluster)
        run._status = status
        return run

    def status(self) -> JobStatus:
        self._status = self.slurm.job_status(self.job_id)
        return self._status

    def poll(self) -> tuple[str, str]:
        status = self.status()
        shown = status.state + (f": {status.pending_words()}" if status.state == "PENDING" else "")
        if status.state == "RUNNING":
            shown += f" on {status.nodelist}"
        if status.state == "PENDING":
            self._fail_if_never_starts(status)
        attempts = self.attempts() if status.state in ("PENDING", "RUNNING", "REQUEUED") else []
        # a completed attempt is the job's end; so is the running one's, written a moment before SLURM
        # says the job has ended ("attempt 2 after 1" was said of a job of one attempt, issue 63)
        if attempts and attempts[-1].get("ended") != "completed" and not ending(status, attempts[-1]):
            shown += f", attempt {len(attempts) + 1} after {len(attempts)}, the last {attempts[-1].get('ended')}"
        return status.state, shown

    def ensure_can_start(self, patience_s: float = LOOK_S) -> None:
        """Wait until the scheduler has looked at the job once; cancel and fail if it
        says the job can never start (sbatch accepts such jobs on many clusters)."""
        deadline = time.monotonic() + patience_s
        while time.monotonic() < deadline:
            state, _ = self.poll()
            if state != "PENDING" or self._status.reason not in ("", "None"):
                return
            time.sleep(LOOK_EVERY_S)

    def _fail_if_never_starts(self, status: JobStatus) -> None:
        if reasons.never_starts(status.reason):
            self.slurm.run(commands.cancel(jobid.base(self.job_id)))  # an array's elements share the spec
            summary = self.slurm.summary()
            words, change = reasons.explain(status.reason)
            raise SubmitError(f"job {self.job_id} can never start: SLURM holds it with reason "
                              f"{status.reason} ({words.removesuffix(': it can never start')}); it was cancelled",
                              (f"{change}; " if change else "") + (f"the cluster has: {summary}" if summary else
                                                                   "compare the request with `sinfo -o '%P %D %c %G'`"))

    def cancel(self) -> None:
        seen = self.slurm.cancel_job(self.job_id)
        if seen.state == "PENDING" and records.load(self.catalog_key()):
            # the record says who cancelled a job that never started (SLURM's word is the same for all)
            records.update(self.catalog_key(), cancelled_at=datetime.now().isoformat(timespec="seconds"))

    def srun_ids(self) -> tuple[str, str]:
        """(the job `srun --jobid` joins, the id its ranks know the job by): an array element's own number."""
        own = self.slurm.own_id(self.job_id)
        return own, own

    def hosts(self) -> dict[int, str]:
        status = self._status if self._status and self._status.finished else self.status()
        return self.slurm.hosts_of_ranks(status, self.num_ranks or len(self.rank_logs()))

    def describe(self) -> str:
        attempts = self.attempts()
        last = attempts[-1].get("exit_code") if attempts else None
        return self._with_ending(self.status().describe(last if isinstance(last, int) else None))

    def as_dict(self) -> dict:
        return self._with_outcome(self.status().as_dict())

    def _finish(self, state: str) -> Outcome:
        batch = batch_log_path(self.log_dir, self.job_id)
        text = self.files.read_text(str(batch)) or ""
        attempts = self.attempts()
        last = (attempts or [{}])[-1]
        # A failed job's code as its script recorded it: sacct shows codes above 128 less 128. (A
        # job ended from outside, cancelled or out of time, keeps SLURM's: its ranks were stopped.)
        recorded = last.get("exit_code") if state == "FAILED" else None
        job_code = recorded if isinstance(recorded, int) else self._status.job_exit_code if self._status else 0
        outcome = analyze(self.job_id, state, srun_events(text), self._rank_log, job_exit_code=job_code,
                          note=f"no rank reported an error; last lines of {batch}:\n{tail_lines(text, 20).rstrip()}",
                          batch_log=last_attempt(text), files=self.files)
        if not text and state == "CANCELLED":  # it never started: a dependency that ended otherwise than asked?
            outcome = dataclasses.replace(outcome, note=self._not_started() or outcome.note)
        self._keep_preflight_failures(attempts)
        preflight = preflight_failed(self.job_id, state, outcome.exit_code, last,
                                     str(preflight_paths(self.log_dir, self.job_id)[0]))
        outcome = preflight or outcome
        why = last.get("not_retried")  # --retry-failed said why it stopped
        return dataclasses.replace(outcome, note=f"{outcome.note}\nnot retried: {why}".strip()) if why else outcome

    def _keep_preflight_failures(self, attempts: list[dict]) -> None:
        """The nodes a preflight of this job failed (the job's end, or left out for a spare), into its
        record: `hpcjax nodes` lists them."""
        from hpcjax.protocol.preflight_rules import reason_of

        failures = [{"node": node, "attempt": a.get("attempt"), "at": a.get("end"),
                     "what": reason_of(str(a[PREFLIGHT_KEY]), node) or a[PREFLIGHT_KEY]}
                    for a in attempts if a.get(PREFLIGHT_KEY)
                    for node in str(a.get(PREFLIGHT_BAD_KEY) or "").split(",") if node]
        record = records.load(self.catalog_key())
        if failures and record is not None and record.get("preflight_failures") != failures:
            records.update(self.catalog_key(), preflight_failures=failures)

    def _not_started(self) -> str:
        """Why a job that never started was cancelled: by `hpcjax cancel`, or by SLURM because a
        dependency (--after) ended otherwise than asked, or from outside while it was pending."""
        record = records.load(self.catalog_key()) or {}
        if record.get("cancelled_at"):
            return f"not started: cancelled with `hpcjax cancel` at {record['cancelled_at']}, while it was pending"
        for dependency in record.get("after") or []:
            job, _, when = dependency.partition(":")
            lines = self.slurm.run(commands.states([job])).split()
            ended = lines[-1].split("|")[-1].split(" ")[0] if lines else "UNKNOWN"
            # a dependency still pending or running cancelled nothing: the cancel came from outside
            if when == "ok" and ended in FINISHED_STATES and ended != "COMPLETED":
                return f"not started: job {job} {ended.lower()} (--after {dependency}), so SLURM cancelled this one"
        if self._status is not None and self._status.reason == CANCELLED_PENDING:
            return CANCELLED_PENDING
        return "not started: cancelled while it was pending (scancel, or an administrator)"

    def _rank_log(self, rank: int):
        return rank_log_path(self.log_dir, self.job_id, rank)
