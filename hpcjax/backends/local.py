"""The local backend: a job's N*G/K ranks as processes of this machine's CPU, GPUs emulated as CPU
devices (hpcjax.localjobs). The submitting process is the ranks' parent: it follows them, and
stops them when it is stopped."""

from __future__ import annotations

import os
import shlex
import subprocess

from hpcjax import backends
from hpcjax.backends import Backend, Queued, register
from hpcjax.catalog import keep, records
from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.localjobs import processes, queue
from hpcjax.localjobs.environment import check_local_spec, rank_environment
from hpcjax.values.voice import say

# Options of a spec the local backend has no use for (they are SLURM's), with their flags.
SLURM_ONLY = (("partition", "--partition"), ("account", "--account"), ("qos", "--qos"),
              ("constraint", "--constraint"), ("gpu_type", "--gpu-type"), ("mem", "--mem"), ("exclusive", "--exclusive"),
              ("cpus_per_task", "--cpus-per-task"), ("sbatch_lines", "--sbatch"), ("prologue", "--prologue"),
              ("epilogue", "--epilogue"), ("template", "--template"), ("preflight", "--preflight"))


@register
class LocalBackend(Backend):
    name = "local"
    order = 100  # "auto": when no other is available
    shared_storage = False  # every rank is on this machine
    submitter_follows = True
    described = "locally on this machine's CPU, GPUs emulated as CPU devices"

    def check(self, sub, probe) -> None:
        check_local_spec(sub.spec)
        if sub.spec.preflight:  # a site profile may make it the default: said, not refused
            say("preflight: not run on the local backend (it proves a cluster's nodes before a job spends "
                "them; this machine is one node, its devices emulated)")
        for job, when in sub.spec.after:
            try:
                find(job).state()
            except HpcjaxError as error:
                raise UsageError(f"--after {job}:{when}: this machine knows no job {job} "
                                 f"({error.message.splitlines()[0]})",
                                 "give the id `hpcjax submit` printed (`hpcjax runs` lists them)") from None

    def render(self, sub) -> tuple[str, str]:
        """One shell line per rank: the variables hpcjax gives it (beyond this environment), then
        the command; JOBID and PORT are chosen when the job starts."""
        spec = sub.spec
        unused = [flag for name, flag in SLURM_ONLY if getattr(spec, name)]
        lines = [f"# logs: {spec.output_dir}/JOBID-rankR.log; time limit: {spec.time}"]
        if unused:
            lines.append(f"# not used by the local backend (SLURM's): {', '.join(unused)}")
        command = " ".join(map(shlex.quote, spec.command))
        for rank in range(spec.layout.num_processes):
            env = rank_environment(spec, "JOBID", rank, "PORT")  # type: ignore[arg-type]
            given = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(env.items()) if os.environ.get(k) != v)
            lines.append(f"env {given} {command}")
        return "\n".join(lines) + "\n", (f"dry run: the local backend would start {spec.layout.described} on "
                                         "this machine, each as shown:")

    def queue(self, sub) -> list[Queued]:
        """The ranks' Runs made, not started (their ids claimed): started once recorded (release). A
        local job's record is its state too: PENDING until its ranks start."""
        pending = (("state", "PENDING"),)
        if sub.spec.array:
            array_id, runs = queue.make(sub.spec)
            return [Queued(run, array_id, index, pending) for index, run in enumerate(runs)]
        run = processes.make(sub.spec)
        return [Queued(run, run.job_id, None, pending)]

    def release(self, sub, queued: list[Queued]) -> None:
        runs = [job.run for job in queued]
        if sub.spec.array:
            queue.release(runs, find)
        else:
            processes.release(runs[0], find)

    def attach(self, job_id: str, record: dict | None, cluster) -> processes.LocalRun:
        if record is None:
            raise HpcjaxError(f"no record of local job {job_id} in {records.records_dir()}",
                              "`hpcjax runs` lists the jobs hpcjax knows")
        if not record.get("layout"):  # its ranks are counted from it
            where = records.records_dir() / f"{job_id}.json"
            raise records.DamagedRecord(f"the record of local job {job_id} ({where}) has no layout",
                                        f"delete it (rm {where}); the job cannot be followed without it")
        return processes.started_here(job_id) or processes.LocalRun.attach(job_id, record)

    def refresh(self, conn, rows: list[dict]) -> None:
        for row in rows:
            if not row["final"]:  # its follower keeps its record current
                keep.from_record(row)

    def stacks(self, run, environment: str, node_side) -> tuple[str, str]:
        done = subprocess.run(["env", environment, *node_side(run.job_id)], capture_output=True, text=True,
                              timeout=120)
        return done.stdout, done.stderr


def find(job: str):
    """A dependency's Run: one this process started (it polls its own ranks), else by its record
    (another process's local job, or a SLURM job hpcjax knows)."""
    run = processes.started_here(job)
    if run is None and records.load(job) is None:
        raise HpcjaxError(f"no record of job {job} in {records.records_dir()}")
    return run or backends.attach(job)

