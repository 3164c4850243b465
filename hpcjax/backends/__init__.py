"""Where a job runs: one class per backend, registered with `@register` as the container runtimes
are (hpcjax.containers.table); one file in this folder to add a backend. A backend owns what
differs between the places a job can run: whether it is there to use, its own refusals (from
what the submission's probe found), what a dry run shows, how a job is started, recorded and
attached again, how many jobs one poll asks about, whether a multi-node job's files must be on
shared storage, who follows a job's ranks, how its ranks' stacks are taken, and how its rows of
the catalog are brought up to date. Outside this table nothing compares backend names (the
command line's option parser excepted: it lists `names()`).

    backend = backends.choose("auto")         # $HPCJAX_BACKEND, else the first available
    run = backends.attach("1234")             # the Run of a job submitted earlier

The table's entries: `slurm` (sbatch, here or over SSH) and `local` (this machine's processes).
"""

from __future__ import annotations

import dataclasses

import importlib
import os
import pkgutil
from pathlib import Path
from typing import ClassVar

from hpcjax.hosts.cluster import THIS_MACHINE
from hpcjax.values.errors import UsageError
from hpcjax.values.voice import say

AUTO = "auto"
BACKEND_ENV = "HPCJAX_BACKEND"  # what "auto" means when set
_TABLE: dict[str, type] = {}
_INSTANCES: dict[str, "Backend"] = {}


@dataclasses.dataclass(frozen=True)
class Queued:
    """One job (one element of an array) a backend has queued, as the record step takes it: its Run,
    which element it is, the id its record names (an array's own), and what more its record keeps
    (the backend's: a hold's name, a job in a hold's place in the queue)."""

    run: object
    job_id: str
    element: int | None = None
    fields: tuple = ()  # (name, value) pairs


class Backend:
    """What every backend answers. The pipeline (hpcjax.launch.steps) calls these in its order:
    check, then (after the stage and render steps) queue, then (after the record step) release; a
    dry run calls render and estimate instead. A backend supplies what differs between places, the
    pipeline the order."""

    name: ClassVar[str] = ""
    order: ClassVar[int] = 100  # "auto" takes the first available backend, lowest order first
    reaches_clusters: ClassVar[bool] = False  # can run a job on a cluster reached over SSH
    shared_storage: ClassVar[bool] = True  # a multi-node job's files must be where every node sees them
    submitter_follows: ClassVar[bool] = False  # the submitting process runs the ranks (waits; Ctrl-C stops them)
    holds_allocations: ClassVar[bool] = False  # an allocation can be held and jobs run in it (hpcjax hold, --on)
    described: ClassVar[str] = ""  # how it runs a job, for a message: "locally on this machine's CPU, ..."

    def available(self) -> bool:
        """Whether it can run a job from this machine."""
        return True

    def unavailable(self) -> str:
        """Why it is not available, for the line "auto" says when it picks another."""
        return ""

    def wants(self, sub) -> dict:
        """What the check needs to know of where the job goes, asked in one go (a probe's questions:
        programs, paths, jobs, config values); the answers come to check() as `probe`."""
        return {}

    def check(self, sub, probe) -> None:
        """Every refusal of this backend, before anything is written or submitted."""

    def render(self, sub) -> tuple[str, str]:
        """The render step's: (what it runs, or for a backend that runs no script what it starts, as a
        dry run shows it; the line that says what it is). Rendered once per submission: the queue
        step finds it in `sub.script`."""
        raise NotImplementedError

    def estimate(self, sub) -> str:
        """A dry run's last word: when the scheduler would start the job (`sub.script`), or its
        refusal (raised); "" where there is no scheduler to ask."""
        return ""

    def queue(self, sub) -> list[Queued]:
        """The queue step's: put the staged, rendered job (`sub.script`) where it waits to run (sbatch,
        here or over SSH; a hold's queue; this machine's ranks made, not started), one Queued per
        array element. Its records are the record step's, after this."""
        raise NotImplementedError

    def release(self, sub, queued: list[Queued]) -> None:
        """Once the jobs are recorded: start what only this backend starts (this machine's ranks), and
        say what was queued where."""

    def attach(self, job_id: str, record: dict | None, cluster) -> object:
        """The Run of a job submitted earlier (`record`: hpcjax's record of it, if any)."""
        raise NotImplementedError

    def refresh(self, conn, rows: list[dict]) -> None:
        """Bring these catalog rows (this backend's, not final) up to date."""

    def stacks(self, run, environment: str, node_side) -> tuple[str, str]:
        """Run the node side of `hpcjax stacks` (`node_side(job)`: its argv for the job's id as the
        nodes know it; `environment`: NAME=VALUE it needs) where the job's ranks are; (stdout, stderr)."""
        raise NotImplementedError


def register(cls: type) -> type:
    if not cls.name:
        raise TypeError(f"{cls.__name__} has no name")
    _TABLE[cls.name] = cls
    return cls


def _load() -> None:
    """Every module of this folder, once: each registers its backends."""
    if getattr(_load, "done", False):
        return
    _load.done = True
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


def names() -> tuple[str, ...]:
    _load()
    return tuple(sorted(_TABLE, key=lambda n: (_TABLE[n].order, n)))


def _load_one(name: str) -> None:
    """The module named after a backend registers it: `status` of a SLURM job imports the SLURM
    backend only (the local one brings the process machinery, SLURM's the template engine)."""
    if name not in _TABLE and name.isidentifier() and (Path(__path__[0]) / f"{name}.py").is_file():
        importlib.import_module(f"{__name__}.{name}")


def get(name: str) -> Backend:
    """The backend of that name (one instance per process); an unknown name lists the valid ones."""
    _load_one(name)
    if name not in _TABLE:
        _load()
    if name not in _TABLE:
        raise UsageError(f"unknown backend {name!r}", f"valid backends: {', '.join((AUTO, *names()))}")
    if name not in _INSTANCES:
        _INSTANCES[name] = _TABLE[name]()
    return _INSTANCES[name]



@dataclasses.dataclass(frozen=True)
class Spelling:
    """How a caller writes the backend and the cluster, for the words of a refusal."""

    backend: str  # formatted with the backend's name
    cluster: str


OPTIONS = Spelling("--backend {}", "--cluster")  # the command line
ARGUMENTS = Spelling("backend={!r}", "cluster=")  # the Python API


def runs_here(name: str | None) -> bool:
    """Whether the backend named runs on this machine only (the local one); "auto" or None: no."""
    return name not in (None, AUTO) and not get(name).reaches_clusters


def cluster_for(name: str | None, cluster, *, named: bool = True, spelled: Spelling = OPTIONS):
    """The one rule of where a submission goes, for every entry point: `cluster` as given, or this
    machine where it gives way. A backend that runs here runs here: a cluster that only a default
    named ($HPCJAX_CLUSTER, a profile's host) gives way to it, and one named outright (`named`) with
    it is a contradiction, refused before anything is done."""
    if not cluster.remote or not runs_here(name):
        return cluster
    if named:
        backend = spelled.backend.format(name)
        raise UsageError(f"{backend} runs on this machine, not on the cluster {cluster.destination}",
                         f"drop {spelled.cluster} to run here, or drop {backend} to submit to the cluster")
    return THIS_MACHINE

def choose(name: str | None = AUTO, *, cluster=THIS_MACHINE, quiet: bool = False) -> Backend:
    """The backend a submission uses: the one named; "auto": $HPCJAX_BACKEND when set, else one that
    reaches the named cluster, else the first available here (said on stderr when it is not the first)."""
    if name is not None and not str(name).strip():
        raise UsageError("--backend '' names no backend", f"valid backends: {', '.join((AUTO, *names()))}")
    name = name or AUTO
    if name == AUTO and os.environ.get(BACKEND_ENV):
        name = os.environ[BACKEND_ENV]
        if name == AUTO or name not in names():
            raise UsageError(f"{BACKEND_ENV}={name!r} is not a backend", f"valid backends: {', '.join(names())}")
    cluster_for(name, cluster)  # a named backend that runs here, with a cluster: refused
    if name != AUTO:
        return get(name)
    candidates = [get(n) for n in names()]
    if cluster.remote:
        return next(b for b in candidates if b.reaches_clusters)
    chosen = next(b for b in candidates if b.available())
    if not quiet and chosen is not candidates[0]:
        say(f"{candidates[0].unavailable()}: running {chosen.described or 'on the ' + chosen.name + ' backend'}")
    return chosen


def of_record(record: dict | None) -> Backend:
    """The backend a job record names (a job without one: SLURM's, submitted with plain sbatch)."""
    name = (record or {}).get("backend") or "slurm"
    try:
        return get(str(name))
    except UsageError:  # a backend this hpcjax does not have: the job is still SLURM's to ask about
        return get("slurm")


def attach(job_id: str, cluster=THIS_MACHINE):
    """The Run of a job submitted earlier, from its id: hpcjax's record says which backend (and
    which cluster) ran it; a job without a record is a SLURM job (plain sbatch). With a cluster
    reached over SSH, its record there is the truth (another laptop submitted it). With this
    machine (no cluster named), its record here, else the record of the one cluster it was
    submitted to from here."""
    from hpcjax.values import jobid
    from hpcjax.catalog import records

    job_id = jobid.check(job_id)
    if cluster.remote:
        record = records.load(records.key(job_id, cluster.destination)) or records.load_there(cluster, job_id)
        return (of_record(record) if record else choose(AUTO, cluster=cluster)).attach(job_id, record, cluster)
    record = records.load(job_id)
    if record is None:
        elsewhere = records.remote_keys(job_id)
        if len(elsewhere) > 1:
            names_ = ", ".join(records.load(k)["cluster"]["destination"] for k in elsewhere)
            raise UsageError(f"job {job_id} was submitted to more than one cluster ({names_})",
                             "name the one you mean with --cluster")
        record = records.load(elsewhere[0]) if elsewhere else None
    return of_record(record).attach(job_id, record, cluster)


def attach_each(job_id: str, cluster=THIS_MACHINE) -> list:
    """The Runs an id names as `submit` printed it: a sweep's array id names each of its elements
    (as their records here name them); any other id its one job."""
    from hpcjax.values import jobid
    from hpcjax.catalog import records

    job_id = jobid.check(job_id)
    destination = cluster.destination
    if "_" not in job_id and not jobid.is_hold_step(job_id) and records.load(records.key(job_id, destination)) is None:
        elements = records.element_ids(job_id, destination)
        if elements:
            return [attach(element, cluster) for element in elements]
    return [attach(job_id, cluster)]


def attach_one(job_id: str, cluster=THIS_MACHINE, verb: str = "status"):
    """The Run of one job; a sweep's array id is refused with its elements named (their logs,
    stacks and files are each element's own)."""
    runs = attach_each(job_id, cluster)
    if len(runs) > 1:
        ids = [run.job_id for run in runs]
        shown = ", ".join(ids[:5]) + (f", ... {ids[-1]}" if len(ids) > 5 else "")
        raise UsageError(f"job {job_id} is a sweep of {len(ids)} elements ({shown}); `hpcjax {verb}` takes one",
                         f"name the element: hpcjax {verb} {ids[0]} (`hpcjax status {job_id}` shows them all)")
    return runs[0]
