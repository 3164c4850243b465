"""A Python call as a job, through the one pipeline every job takes (hpcjax.launch.steps): the
API resolves the submission (the worker as the command, the call's Data, its storage) and adds
only what is its own, the call's folder (`CallStage`, written at the stage step: here in the
storage directory; for a cluster reached over SSH, here in a temporary directory first, then sent
whole with rsync beside the job's logs) and the results read back (api.calls). The ranks import
the caller's modules from the job's snapshot of the working tree, hpcjax from its shipped copy,
and submitit and cloudpickle from copies staged in the call folder (a cluster's Python, or an
image, needs only JAX).

    cluster = scaling.going(backend=None)   # resolved once, when the Trainer or remote is made
    calls = launch(fn, [((1,), {})], scaling, backend=None, cluster=cluster, storage=storage_dir(..., cluster), job_name="f")
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path, PurePosixPath

from hpcjax.api import calls, folder
from hpcjax.api.configs import Data, ScalingConfig
from hpcjax.containers.binds import in_place
from hpcjax.hosts import ship
from hpcjax.follow.interrupts import uninterrupted
from hpcjax.values.voice import say
from hpcjax.values.errors import UsageError


@dataclasses.dataclass(frozen=True)
class CallStage:
    """The call's part of the stage step: its folder, where the job reads it, and the worker's command."""

    function: object
    arguments: list  # [(args, kwargs)], Data still in them
    session: dict | None
    storage: Path | PurePosixPath  # a PurePosixPath: the cluster's
    element: str  # the worker's element argument: a number, or "array"
    name: str = dataclasses.field(default_factory=calls.new_call_name)  # its folder's, chosen before any is made

    @property
    def call_dir(self) -> Path | PurePosixPath:
        return self.storage / "calls" / self.name

    def check(self) -> None:
        """The check step's part: the function and every element's arguments pickle."""
        calls.pickled(self.function, self.arguments)

    def check_python(self, answer: tuple[int, str], where: str) -> None:
        """The check step's part once the cluster answered (`answer`: its Python's `major.minor`): code
        pickled by value here loads only in the same Python there; said before a job is spent."""
        code, said = answer
        there, here = (said.strip().splitlines() or [""])[-1] if code == 0 else "", "%d.%d" % sys.version_info[:2]
        if not re.fullmatch(r"\d+\.\d+", there) or there == here:
            return
        if any(calls.code_by_value(data) for data in calls.pickled(self.function, self.arguments)):
            name = getattr(self.function, "__name__", "the function")
            raise UsageError(f"{name} travels as code (defined in __main__, a notebook or a lambda), and code "
                             f"pickled by Python {here} here does not load in Python {there} on {where}",
                             f"align the two: run this from a Python {there} here, or name a Python {here} there "
                             f"(the profile's python = ...); or define {name} in a module of your working tree, which "
                             "is shipped with the job and imported there by name")

    def write(self, sub, home: str | None):
        """Here (home None) in the storage directory; there, staged in a temporary directory and sent.
        The submission with the worker's command (a new value); the folder is call_dir."""
        bound_there = sub.bound_there
        if home is None:
            mapped = [calls.unwrap_data((a, k), [], lambda d: d.path) for a, k in self.arguments]
            calls.prepare(Path(self.call_dir), self.function, mapped, self.session)
            if sub.spec.container.in_container:
                calls.stage_dependencies(self.call_dir)
            bound = [str(self.storage)] + [path for path, _ in sub.data]
        else:
            there = dict(sub.data_there)
            mapped = [calls.unwrap_data((a, k), [], lambda d: d.path if d.on_cluster else there[d.path])
                      for a, k in self.arguments]
            ship_call(sub.cluster, PurePosixPath(self.call_dir), self.function, mapped, self.session, sub.tree)
            bound_there = (home, *[p for p, on_cluster in sub.data if on_cluster and not p.startswith(home + "/")])
            bound = []
        python = dataclasses.replace(sub.spec, cluster_python=sub.cluster.python if home else "").hpcjax_python()
        command = (python, "-u", "-m", "hpcjax.api.worker", str(self.call_dir), self.element)
        container = in_place(sub.spec.container, bound) if bound else sub.spec.container
        return dataclasses.replace(sub, spec=dataclasses.replace(sub.spec, command=command, container=container),
                                   bound_there=bound_there)


def launch(function, arguments: list[tuple[tuple, dict]], scaling: ScalingConfig, *, backend: str | None,
           cluster, storage, job_name: str, session: dict | None = None, max_parallel: int | None = None,
           array: bool = False, after=None) -> list[calls.Call]:
    """Submit one job (or, with `array`, a job array of one element per argument) to `cluster`
    (scaling.going's answer, resolved once by the caller); the Calls in order. `after`: jobs (handles,
    or "JOBID[:ok|:any]") it waits for. Everything is checked before anything is written or submitted."""
    from hpcjax.launch import steps
    from hpcjax.launch.request import resolve

    found: list[Data] = []
    for args, kwargs in arguments:
        calls.unwrap_data((args, kwargs), found)
    element = folder.ARRAY_ELEMENT if array else "0"
    fields = dict(output_dir=str(PurePosixPath(storage) / "logs" if cluster.remote else Path(storage) / "logs"),
                  job_name=job_name, run_dir=(session or {}).get("run_dir"))
    if array:
        fields.update(array=len(arguments), array_parallel=max_parallel)
    placeholder = (sys.executable, "-u", "-m", "hpcjax.api.worker", "CALL_DIR", element)  # the stage sets CALL_DIR
    stage = CallStage(function, arguments, session, PurePosixPath(storage) if cluster.remote else Path(storage),
                      element)
    travels = dict(data=tuple((d.path, d.on_cluster) for d in found), call=stage,
                   storage=(("storage", str(storage)),) if not cluster.remote else (),
                   dirs_there=(str(PurePosixPath(storage) / "calls"),) if cluster.remote else ())
    sub = resolve(dataclasses.replace(scaling.request, command=placeholder, backend=backend or "auto", cluster=cluster,
                                      fields=fields, after=after, travels=travels))
    try:
        runs = steps.submit(sub)
    except KeyboardInterrupt as interrupt:
        with cancel_on_interrupt(steps.runs_of(interrupt)):  # the job exists, and the caller has no handle
            raise
    return [calls.Call(stage.call_dir, i, run) for i, run in enumerate(runs)]


def ship_call(cluster, target: PurePosixPath, function, arguments, session: dict | None, root: Path) -> None:
    """The call folder, written here and sent whole to `target` on the cluster. The ranks find
    the caller's modules at the same places in the job's snapshot (relative import paths), and
    the worker's own dependencies beside the call."""
    staging = Path(tempfile.mkdtemp(prefix="hpcjax-call-"))
    try:
        local = calls.prepare(staging / target.name, function, arguments, session, sys_path=tree_sys_path(root))
        calls.stage_dependencies(local)
        ship.rsync(cluster.host(), "-rlt", f"{local}/", into=str(target), parent_made=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def tree_sys_path(root: Path) -> list[str]:
    """The caller's import path entries inside the shipped tree, relative to the working
    directory (the job starts in the snapshot's copy of it); the others are this machine's."""
    cwd, root = Path.cwd().resolve(), root.resolve()
    kept = []
    for entry in sys.path:
        path = Path(os.path.abspath(entry or ".")).resolve()
        if path == root or root in path.parents:
            kept.append(os.path.relpath(path, cwd))
    return list(dict.fromkeys(kept))


class cancel_on_interrupt:
    """Ctrl-C while a caller waits, or while its job is submitted once the job exists: cancel the
    jobs, say so, and let the interrupt go on, as a KeyboardInterrupt that names them and carries
    none of hpcjax's frames (the caller's script still ends on it, or its notebook cell). A call
    interrupted before it returned a handle leaves the caller nothing to cancel its job with."""

    def __init__(self, handles: list) -> None:
        self.handles = handles

    def __enter__(self):
        return self

    def __exit__(self, kind, value, trace) -> bool:
        if kind is not None and issubclass(kind, KeyboardInterrupt) and self.handles:
            while True:  # a second Ctrl-C must not leave a job running
                try:
                    with uninterrupted():
                        self._cancel_all()
                    break
                except KeyboardInterrupt:  # it came before SIGINT was ignored: cancel again
                    continue
            ids = ", ".join(str(getattr(handle, "job_id", "?")) for handle in self.handles)
            raise KeyboardInterrupt(f"interrupted: job {ids} was cancelled") from None
        return False

    def _cancel_all(self) -> None:
        for handle in self.handles:
            try:
                handle.cancel()
                say(f"interrupted: cancelled job {handle.job_id}")
            except Exception as error:  # one that had already ended: nothing to cancel
                say(f"interrupted: job {getattr(handle, 'job_id', '?')} not cancelled ({error})")
