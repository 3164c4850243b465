"""The one way every job is submitted, whatever started it (`hpcjax submit`, `smoke`, `train`
through submit, `relaunch`, a sweep, a chain, the Trainer, a remote function's call or map):

  resolve  the entry point builds a Submission: the spec (profile + options), the backend and the
           cluster it goes to, what travels with it (uploads, Data, a Python call)
  check    every refusal, no side effect (launch.refusals); where it goes asked in one round trip
  stage    what the job needs where it runs, made there (launch.staging)
  render   what the backend will run, rendered once; a dry run stops here and shows it
  queue    the backend puts it where it waits to run (sbatch here or over SSH, a hold's queue, this
           machine's ranks made but not started): one `backends.Queued` per array element
  record   its records and catalog row, the same for every backend (record, record_fields, catalog.keep)
  release  the job's id announced; the backend starts what only it starts (this machine's ranks)
  follow   its Runs: a first look at what the scheduler says (then wait or logs, as the caller likes)

Each step is owned by one module; each check runs once per submission.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpcjax.values import jobid
from hpcjax.backends import Backend
from hpcjax.hosts import here, ship
from hpcjax.hosts.cluster import THIS_MACHINE, Cluster
from hpcjax.job.spec import JobSpec
from hpcjax.launch import refusals, staging, uploads


@dataclass(frozen=True)
class Submission:
    """A submission as data: the resolve step makes it, and each step after returns a new one (the
    stage step, the paths it has there: `dataclasses.replace`); no step rewrites another's result."""

    spec: JobSpec
    backend: Backend
    cluster: Cluster = THIS_MACHINE
    uploads: tuple = ()  # (local path, name in the job's working directory): --upload
    data: tuple = ()  # the API's Data: (local or cluster path, whether it is the cluster's)
    storage: tuple = ()  # (what, path) the job writes, which a multi-node job needs shared
    tree: Path | None = None  # the working tree that is shipped (found once, at resolve, for a cluster)
    limit_mb: int = ship.DEFAULT_LIMIT_MB
    ship_code: bool = True  # the working tree goes with it (not for hpcjax's own checks)
    call: object | None = None  # the API's call: .write(sub, home) writes its folder, sets the command
    announce: object | None = None  # announce(job_id), as soon as it is recorded
    dirs_there: tuple = ()  # directories the stage makes there first (the API's calls folder)
    hold: bool = False  # the job is a held allocation (hpcjax hold): its script is the hold's agent
    hold_name: str = ""  # its name for --on and release (-J is SLURM's name for its job, which may differ)
    # what the steps learn and make
    home_there: str = ""  # the cluster's remote directory as it is there (the stage's; '' on this machine)
    script: str = ""  # what the backend runs, rendered once (the render step's)
    workdir: str = ""  # where the job starts (its snapshot on a cluster)
    log_dir: str = ""
    run_dirs: dict = field(default_factory=dict)  # kept run directories there (a relative --run-dir)
    data_there: dict = field(default_factory=dict)  # local Data path -> where it is stored there
    bound_there: tuple = ()  # more paths there to bind into a container

    def kept_run_dirs(self) -> dict[str, str]:
        return uploads.relative_run_dirs(self.spec, self.tree) if self.cluster.remote and self.ship_code else {}

    def local_data(self) -> list[str]:
        return [path for path, on_cluster in self.data if not on_cluster]

    def to_upload(self) -> list[Path]:
        """What is stored there by content: --upload's directories, and the API's local Data."""
        found = [local for local, _ in self.uploads] + [Path(p) for p in self.local_data()] \
            if self.cluster.remote else []
        return list(dict.fromkeys(found))

    def storage_paths(self) -> list[tuple[str, str]]:
        return list(self.storage) + [("Data", p) for p in self.local_data()]

    @property
    def elements(self) -> list[int | None]:
        return list(range(self.spec.array)) if self.spec.array else [None]


@contextlib.contextmanager
def interrupts_held():
    """Ctrl-C while a job is handed to SLURM takes effect once its id is known, recorded and
    announced, so a job sbatch accepted is never unknown to the user. SIGINT is blocked meanwhile
    (sbatch, or ssh carrying it, inherits the mask and finishes too) and delivered at the end."""
    if threading.current_thread() is not threading.main_thread():  # Python delivers Ctrl-C to the main thread
        yield
        return
    with here.ctrl_c_mask(signal.SIG_BLOCK):
        yield


def submit(sub: Submission) -> list:
    """Check, stage, render, queue, record, release; the Runs (one per array element), after a first
    look. Each step takes what the one before made; the backend supplies what differs (where the
    script goes, how it is queued and started), not the order. A Ctrl-C once the job exists goes on
    as a KeyboardInterrupt that carries them (runs_of): its type stays KeyboardInterrupt's own, so a
    script that ends on it still ends by SIGINT, as CPython does."""
    probe = refusals.check(sub)
    sub = staging.stage(sub, probe)
    sub = dataclasses.replace(sub, script=sub.backend.render(sub)[0])
    runs: list = []
    try:
        # sbatch, the record and the announced id are one: Ctrl-C waits for all three
        with interrupts_held():
            queued = sub.backend.queue(sub)
            runs = [q.run for q in queued]
            record(sub, queued)
            if sub.announce is not None:  # it exists, with its record: a Ctrl-C from here on names it
                sub.announce(jobid.base(runs[0].job_id) if sub.spec.array else runs[0].job_id)
            sub.backend.release(sub, queued)
        runs[0].ensure_can_start()
    except KeyboardInterrupt:
        if not runs:
            raise
        interrupt = KeyboardInterrupt(f"interrupted once job {jobid.base(runs[0].job_id)} was submitted")
        interrupt.runs = runs
        raise interrupt from None
    return runs


def runs_of(interrupt: BaseException) -> list:
    """The Runs of the job a Ctrl-C landed on once it existed (submit's); [] if it came before."""
    return list(getattr(interrupt, "runs", None) or [])


def dry_run(sub: Submission) -> tuple[str, str]:
    """(what would run, the line that says what it is): every check the submit makes, nothing made."""
    probe = refusals.check(sub)
    if sub.cluster.remote:
        sub = staging.as_there(sub, probe.home)
    shown, said = sub.backend.render(sub)
    estimate = sub.backend.estimate(dataclasses.replace(sub, script=shown))
    return shown, (f"{estimate}\n" if estimate else "") + said


def record(sub: Submission, queued: list) -> None:
    """The record step, the same for every backend: each queued job's record and catalog row
    (record_fields, and the backend's own fields), and on a cluster reached over SSH its record
    there too (another laptop finds the job by it)."""
    from hpcjax.catalog import keep, records

    for job in queued:
        fields = {**record_fields(sub, job.element, job.job_id), **dict(job.fields)}
        job.run.run_dir = fields.get("run_dir")
        if sub.cluster.remote:
            records.save_there(sub.cluster, sub.home_there, job.run.job_id, fields)
        keep.record(records.key(job.run.job_id, sub.cluster.destination), fields)


def record_fields(sub: Submission, element: int | None, job_id: str) -> dict:
    """What a job record keeps of a submission (of one element of an array), the same for every
    backend: for the catalog, `status`, `fetch`, `report` and `relaunch`."""
    from hpcjax.catalog import keep
    from hpcjax.job import profiles

    spec = sub.spec
    command = spec.command_of(element)
    fields = {"backend": sub.backend.name, "output_dir": sub.log_dir, "layout": spec.layout.as_dict(),
              "workdir": sub.workdir, "name": spec.job_name, "kind": keep.kind_of(command), "command": list(command),
              "options": profiles.values_of(spec), "partition": spec.partition, "submitted": time.time()}
    if element is not None and spec.sweep:
        fields.update(sweep=job_id, sweep_values=dict(spec.sweep[element]))
    if spec.after:
        fields["after"] = [f"{job}:{when}" for job, when in spec.after]
    named = keep.run_dir_of(spec, command)
    if named:  # where its run is kept (a relative one: where it was kept there, else below the job's directory)
        fields["run_dir"] = sub.run_dirs.get(named) or (named if named.startswith("/") else f"{sub.workdir}/{named}")
    if sub.cluster.remote:
        fields["cluster"] = sub.cluster.as_record()
    return fields
