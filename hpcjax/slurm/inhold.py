"""One job run inside a held allocation (`--on NAME`), followed: its state is what the hold's
queue says (queued, running, its exit code), read with the hold's own state from SLURM (a hold
that ended while the job ran ended it: that is the job's report, not a failure of its program);
its logs, attempts, ranks' failures and hang are read as any SLURM job's, under its own name
(HOLD.sN). Queuing it is hpcjax.slurm.holds'."""

from __future__ import annotations

import dataclasses
import re

from hpcjax.values import jobid
from hpcjax.protocol.contract import FINISHED_STATES, WARNING_SIGNAL, Layout, rank_log_path
from hpcjax.values.errors import HpcjaxError, SpecError, UsageError
from hpcjax.follow.outcome import Finding, Outcome
from hpcjax.follow.run import Run
from hpcjax.hosts.cluster import THIS_MACHINE, Cluster
from hpcjax.job import clusters
from hpcjax.slurm import controller as slurmctl, holds
from hpcjax.slurm.job import SlurmRun
from hpcjax.slurm.status import JobStatus

WARNED = "warning signal not handled"  # follow.triage's name for a rank killed by the warning
TAIL_BYTES = 4096  # of rank 0's log: where slurmstepd says a step ran out of time

class InHoldRun(SlurmRun):
    poll_s = 0.5  # the queue is a file read: a job in a hold starts within a second, say so as soon

    def __init__(self, job_id: str, log_dir, num_ranks: int, cluster: Cluster, hold: str, spool: str) -> None:
        self.cluster = cluster
        Run.__init__(self, job_id, log_dir, num_ranks, self.cluster.host())
        self.hold_job, self.hold_name, self.spool = jobid.base(job_id), hold, spool
        self.slurm = slurmctl.slurm_on(self.host)
        self.slurm.watcher.follow(self.hold_job)
        self._status: JobStatus | None = None
        self._queue: dict = {}
        self._timed_out: bool | None = None

    @classmethod
    def attach(cls, job_id: str, record: dict | None, cluster: Cluster = THIS_MACHINE) -> "InHoldRun":
        if not record or not record.get("hold_spool"):
            raise UsageError(f"no record of job {job_id} here: it ran inside a held allocation, which only the "
                             "machine that queued it knows", "ask on that machine, or follow the hold's own job "
                             f"{jobid.base(job_id)}")
        cluster = cluster if cluster.remote else clusters.cluster_from_record(record.get("cluster"))
        run = cls(job_id, record["output_dir"], Layout.from_dict(record.get("layout", {})).num_processes, cluster,
                  record.get("hold_name", ""), record["hold_spool"])
        run.run_dir = record.get("run_dir")
        return run

    def status(self) -> JobStatus:
        hold = self.slurm.job_status(self.hold_job)
        queue = self._queue = holds.state_of(self.host, self.spool, self.job_id)
        files = queue["files"]
        reason, code = "", queue.get("rc", "")
        if "rc" in files:
            # cancelled is cancelled, as SLURM says of a job whose program saved and exited 0 in its grace
            state = "CANCELLED" if files & {"cancel", "withdrawn"} else "COMPLETED" if code == "0" else \
                "TIMEOUT" if self._out_of_time() else "FAILED"
        elif hold.finished:  # the hold ended first: while the job ran, or before it started
            state = hold.state if files & {"running", "ended"} else "CANCELLED"
            reason = queue.get("why") or f"hold {self.hold_name} (job {self.hold_job}) ended {hold.state}"
        elif "running" in files:
            state = "RUNNING"
        elif "request" in files:
            state = "PENDING"
            reason = (f"queued in hold {self.hold_name} (job {self.hold_job}, {hold.state.lower()}"
                      + (f": {hold.reason}" if hold.state == "PENDING" and hold.reason else "") + ")")
        else:
            raise UsageError(f"hold {self.hold_name} (job {self.hold_job}) has no job {self.job_id} in its queue "
                             f"{self.spool}", "the queue may have been removed; `hpcjax holds` lists the holds")
        # A cancelled job's code is SLURM's for one: 0 and the signal (its ranks' 143 or 137 is the cancel's doing).
        exit_code = "0:15" if state == "CANCELLED" else f"{code}:0" if code else ""
        # Its steps are the hold's steps named after it (on the nodes it asked for: --nodes, --exclude),
        # numbered as its own, so its ranks' nodes are found as a plain job's.
        steps = [{**step, "JobID": f"{self.job_id}.{number}"}
                 for number, step in enumerate(s for s in hold.steps if s.get("JobName") == self.job_id)]
        self._status = JobStatus(job_id=self.job_id, name=f"in hold {self.hold_name}", state=state, reason=reason,
                                 exit_code=exit_code, nodelist=steps[0]["NodeList"] if steps else hold.nodelist,
                                 workdir=hold.workdir, steps=steps)
        return self._status

    def _out_of_time(self) -> bool:
        """Whether the job's own --time ended it (its steps carry it): SLURM's line in its ranks' logs,
        as a plain job's TIMEOUT. Read once, from the end of rank 0's log."""
        if self._timed_out is None:
            tail = self.files.read_ends([str(rank_log_path(self.log_dir, self.job_id, 0))], TAIL_BYTES)
            self._timed_out = any(b"DUE TO TIME LIMIT" in (data or b"") for data in tail.values())
        return self._timed_out

    def poll(self) -> tuple[str, str]:
        status = self.status()
        shown = status.state + (f" ({status.reason})" if status.reason else "")
        if status.state == "RUNNING":
            shown += f" in hold {self.hold_name} on {status.nodelist}"
        return status.state, shown

    def ensure_can_start(self, patience_s: float = 0.0) -> None:
        """A hold that can never start was said when it was made; a job in it waits for it."""

    def cancel(self) -> None:
        """The job only, never the hold: withdrawn from the queue, or stopped by the hold's agent."""
        status = self.status()
        if status.finished:
            raise HpcjaxError(f"job {self.job_id} has already ended ({status.state}); nothing to cancel",
                              f"see `hpcjax status {self.job_id}`")
        holds.cancel(self.host, self.spool, self.job_id)

    def srun_ids(self) -> tuple[str, str]:
        return self.hold_job, self.job_id  # steps join the hold; the ranks know the job by HPCJAX_JOB_KEY

    def _finish(self, state: str) -> Outcome:
        """A job the hold's end cut short is reported as that: ended with the hold, or killed by the
        warning SLURM sends every job of the hold before its time limit (USR2, when uncaught)."""
        outcome = super()._finish(state)
        where = f"hold {self.hold_name} is SLURM job {self.hold_job}; `hpcjax status {self.hold_job}`"
        again = ("the program did not fail on its own: its hold's time ran out. Hold longer (hpcjax hold --time ...) "
                 "and run the job again")
        if state in FINISHED_STATES and "rc" not in self._queue.get("files", set()):
            why = self._status.reason if self._status else f"hold {self.hold_name} ended"
            ended = Finding(f"the hold ended: {why}", where, again)
            return dataclasses.replace(outcome, note="", failed=(), stopped=(), causes=(ended,))
        if outcome.cause and outcome.cause.cause == WARNED:
            warned = Finding(f"the hold is ending: SLURM's warning before its time limit ({WARNING_SIGNAL}) reached "
                             "this job, which does not catch it", f"{outcome.cause.evidence}; {where}",
                             again + f"; or catch {WARNING_SIGNAL} to save first (hpcjax train does)")
            return dataclasses.replace(outcome, causes=(warned,) + outcome.causes[1:])
        return outcome


def the_hold(sub) -> holds.Hold:
    return holds.find(sub.spec.on, sub.cluster)


def spec_in(hold: holds.Hold, spec):
    """The job as it runs in the hold: its steps ask for the hold's type of GPU (SLURM refuses an untyped
    step in a typed allocation)."""
    return dataclasses.replace(spec, gpu_type=hold.gpu_type)


# What a job may ask that its hold decides: the job runs in the hold's allocation, whatever it asks.
HOLDS_OWN = (("partition", "Partition", "--partition"), ("account", "Account", "--account"), ("qos", "QOS", "--qos"))


def asks_of_the_hold(spec) -> bool:
    """Whether the job asks something of its own that only the hold's allocation can say yes to."""
    return any(getattr(spec, field) for field, _, _ in HOLDS_OWN) or spec.time_seconds is not None


def check(sub, hold_answer: tuple[int, str] = (1, "")) -> None:
    """A job for a hold: the hold is known here, up (or about to be), holds the job's layout, and is
    what the job asks of its partition, account, QOS and time (`hold_answer`: `scontrol show job`
    of the hold, asked with the submit's other questions)."""
    hold = the_hold(sub)
    if sub.spec.gpu_type and sub.spec.gpu_type != hold.gpu_type:
        raise UsageError(f"--gpu-type {sub.spec.gpu_type}: hold {hold.name} has "
                         + (f"{hold.gpu_type} GPUs" if hold.gpu_type else "untyped GPUs"),
                         "a job in a hold runs on the hold's GPUs: leave --gpu-type out, or hold GPUs of that type "
                         f"(hpcjax hold --name NAME --gpu-type {sub.spec.gpu_type} ...)")
    code, text = hold_answer
    if code == 0:
        check_own_options(sub.spec, hold, dict(re.findall(r"(\w+)=(\S*)", text)))
    too_big = hold.fits(sub.spec.layout)
    if too_big:
        raise UsageError(f"{too_big}: the job does not fit in it",
                         f"ask for at most {hold.layout.nodes} node(s) x {hold.layout.gpus_per_node} GPU(s), or hold "
                         f"a bigger allocation: hpcjax hold --name NAME --nodes {sub.spec.layout.nodes} "
                         f"--gpus-per-node {sub.spec.layout.gpus_per_node}")
    found = holds.status(hold, sub.cluster)
    if found is None or found.finished:
        raise UsageError(f"hold {hold.name} (job {hold.job_id}) has ended ({found.state if found else 'long ago'})",
                         f"start another: hpcjax hold --name {hold.name} --nodes {hold.layout.nodes} "
                         f"--gpus-per-node {hold.layout.gpus_per_node} --time HH:MM:SS")
    if sub.spec.exclude and found.nodelist and found.state == "RUNNING":
        from hpcjax.values.nodelist import expand_hostlist

        left = [node for node in expand_hostlist(found.nodelist) if node not in sub.spec.exclude]
        if len(left) < sub.spec.layout.nodes:
            raise UsageError(f"the job needs {sub.spec.layout.nodes} node(s) of hold {hold.name}, and excluding "
                             f"{', '.join(sub.spec.exclude)} leaves {len(left)} of its nodes {found.nodelist}",
                             "exclude fewer, ask for fewer nodes, or hold others")


def check_own_options(spec, hold: holds.Hold, fields: dict) -> None:
    """Refuse what the job asks that its hold is not (a step cannot leave its allocation's partition,
    account or QOS, nor outlive it): it ran silently in the hold's before (issue 63)."""
    from hpcjax.job.walltime import format_walltime, parse_walltime

    again = f"hpcjax hold --name NAME --nodes {hold.layout.nodes} --gpus-per-node {hold.layout.gpus_per_node}"
    for field, key, flag in HOLDS_OWN:
        asked, held = getattr(spec, field), fields.get(key, "")
        if asked and held and asked.lower() != held.lower():
            raise UsageError(f"{flag} {asked}: hold {hold.name} (job {hold.job_id}) runs with {key.lower()} {held}, "
                             "and a job in a hold runs in the hold's allocation",
                             f"leave {flag} out to run in the hold, or hold an allocation with it: {again} {flag} "
                             f"{asked} ...")
    asked_s, limit = spec.time_seconds, fields.get("TimeLimit", "")
    try:
        limit_s = parse_walltime(limit) if limit else None
        ran = fields.get("RunTime", "") if fields.get("JobState") == "RUNNING" else ""
        ran_s = parse_walltime(ran) if ran.strip("0:-") else 0  # (parse_walltime takes no zero)
    except SpecError:
        return  # a time SLURM writes in a form hpcjax does not read: SLURM's own limit still applies
    if asked_s is not None and limit_s is not None and asked_s > limit_s - ran_s:
        left = format_walltime(max(limit_s - ran_s, 60))
        raise UsageError(f"--time {spec.time}: hold {hold.name} (job {hold.job_id}) has {left} left of its "
                         f"{format_walltime(limit_s)}; the job would end with the hold, not at its own limit",
                         f"leave --time out (a job in a hold may run to the hold's end), ask at most {left}, or "
                         f"hold longer: {again} --time {spec.time}")


def queue(sub) -> tuple[InHoldRun, dict]:
    """Queue the job in its hold: its Run, and what its record keeps of the hold."""
    from hpcjax.values.voice import say

    hold = the_hold(sub)
    job_id, ahead = holds.queue(sub.cluster.host(), hold, sub.script, sub.workdir, sub.log_dir)
    run = InHoldRun(job_id, sub.log_dir, sub.spec.layout.num_processes, sub.cluster, hold.name, hold.spool)
    waits = f"; it starts after {', '.join(ahead)}" if ahead else ""
    say(f"queued job {job_id} in hold {hold.name} (SLURM job {hold.job_id}, {sub.spec.layout.described}){waits}; "
        f"logs in {sub.log_dir}/")
    return run, {"kind": "step", "hold": hold.job_id, "hold_name": hold.name, "hold_spool": hold.spool}
