"""A Python call as a job: the function and its arguments pickled into a call folder by
submitit's machinery, a JobSpec whose command is the worker, submitted through the one
path every job takes (the rendered script, a backend, the Run handle), and the result
read back from what the ranks left.

    calls = launch(fn, [((1,), {}), ((2,), {})], scaling, backend="slurm", storage=...)
    calls[0].result()         # rank 0's return value, or RemoteError
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import pickle
import sys
import threading
import time
import uuid
from pathlib import Path

from hpcjax.api import folder
from hpcjax.api.configs import Data, ScalingConfig, require_shared
from hpcjax.errors import HpcjaxError
from hpcjax.launch import choose_backend
from hpcjax.launch.run import say


class RemoteError(HpcjaxError):
    """A rank's function raised (or the job failed without a Python exception). `rank`,
    `host`, `job_id` name where; the text carries the remote traceback; the original
    exception is chained (`__cause__`) when it could be unpickled here."""

    def __init__(self, message: str, hint: str = "", *, rank: int | None = None, host: str | None = None,
                 job_id: str = "", remote_traceback: str = "", outcome=None) -> None:
        super().__init__(message, hint)
        self.rank, self.host, self.job_id = rank, host, job_id
        self.remote_traceback, self.outcome = remote_traceback, outcome

    def __reduce__(self):
        return (_rebuild_remote_error, (self.message, self.hint, self.rank, self.host, self.job_id,
                                        self.remote_traceback))


def _rebuild_remote_error(message, hint, rank, host, job_id, remote_traceback):
    return RemoteError(message, hint, rank=rank, host=host, job_id=job_id, remote_traceback=remote_traceback)


class Call:
    """One element of a call: the job's Run handle (job_id, state, wait, logs, cancel,
    outcome, ...) and `result()`."""

    def __init__(self, call_dir: Path, element: int, run=None) -> None:
        self.call_dir, self.element, self.run = call_dir, element, run
        self.started = threading.Event()  # set once the job exists (a local map starts it later)
        self.ended = threading.Event()  # set by a local map's scheduler when the job has ended
        self.scheduled = run is None
        self.cancelled = False
        self.start_error: BaseException | None = None
        if run is not None:
            self.started.set()

    def __getattr__(self, name: str):
        if name.startswith("_") or name in ("run", "call_dir", "element", "started", "ended", "scheduled",
                                             "cancelled", "start_error"):
            raise AttributeError(name)
        self._require_started()
        return getattr(self.run, name)

    def _require_started(self) -> None:
        self.started.wait()
        if self.start_error is not None:
            raise self.start_error

    def state(self) -> str:
        return self.run.state() if self.started.is_set() else "PENDING"

    def wait(self, *, progress: bool = True, detail=None):
        if self.scheduled:  # the scheduler's thread follows the job; wait for it
            self.ended.wait()
            self._require_started()
            return self.run.outcome
        return self.run.wait(progress=progress, detail=detail)

    def cancel(self) -> None:
        """Cancel the job; an element of a local map that has not started yet never runs
        (it is started and cancelled in its turn, so it ends CANCELLED like the others)."""
        self.cancelled = True
        if self.started.is_set() and self.start_error is None and self.run.state() in ("RUNNING", "PENDING"):
            self.run.cancel()

    def result(self, *, progress: bool = False):
        """Rank 0's return value once the job has ended; RemoteError if it failed."""
        outcome = self.wait(progress=progress)
        return read_result(self.call_dir, self.element, outcome)

    def exception(self, *, progress: bool = False) -> RemoteError | None:
        try:
            self.result(progress=progress)
        except RemoteError as error:
            return error
        return None

    def __repr__(self) -> str:
        job = self.run.job_id if self.started.is_set() else "not started"
        return f"<hpcjax call {self.call_dir.name}[{self.element}], job {job}: {self.state()}>"


def prepare(calls_root: Path, function, arguments: list[tuple[tuple, dict]], session: dict | None = None) -> Path:
    """The call folder: the caller's import path, and one pickled call per element."""
    from submitit.core.utils import DelayedSubmission

    call_dir = calls_root / f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
    call_dir.mkdir(parents=True)
    folder.write_meta(call_dir, {"sys_path": [os.path.abspath(p or ".") for p in sys.path], "session": session})
    for element, (args, kwargs) in enumerate(arguments):
        folder.element_dir(call_dir, element).mkdir()
        DelayedSubmission(function, *args, **kwargs).dump(folder.call_pickle(call_dir, element))
    return call_dir


def stage_dependencies(call_dir: Path) -> None:
    """Copy the worker's own dependencies beside the call, for an image without them."""
    import importlib.util
    import shutil

    target = call_dir / folder.DEPS
    target.mkdir()
    for name in folder.WORKER_DEPENDENCIES:
        found = importlib.util.find_spec(name)
        if found is None or found.origin is None:
            continue
        origin = Path(found.origin)
        if found.submodule_search_locations:  # a package: its directory
            shutil.copytree(origin.parent, target / name, ignore=shutil.ignore_patterns("__pycache__", "tests"))
        else:
            shutil.copy2(origin, target / origin.name)


def unwrap_data(value, found: list[str]):
    """Data arguments (also inside lists, tuples and dicts) as the plain paths they name."""
    if isinstance(value, Data):
        found.append(value.path)
        return value.path
    if isinstance(value, (list, tuple)):
        return type(value)(unwrap_data(v, found) for v in value)
    if isinstance(value, dict):
        return {k: unwrap_data(v, found) for k, v in value.items()}
    return value


def with_binds(container, paths: list[str]):
    """The container with each path bound at the same place inside (the call folder, the
    logs, Data), so the function sees the paths it was given; bare runs need none."""
    if container.runtime == "none":
        return container
    present = {b.split(":")[0] for b in container.binds}
    binds = tuple(f"{p}:{p}" for p in dict.fromkeys(paths) if p not in present)
    return dataclasses.replace(container, binds=container.binds + binds)


def worker_command(scaling: ScalingConfig, call_dir: Path, element: str) -> list[str]:
    # In a container the image's Python runs the worker; bare, the caller's own.
    python = "python3" if scaling.spec.container.runtime != "none" else sys.executable
    return [python, "-u", "-m", "hpcjax.api.worker", str(call_dir), element]


def launch(function, arguments: list[tuple[tuple, dict]], scaling: ScalingConfig, *, backend: str | None,
           storage: Path, job_name: str, session: dict | None = None, max_parallel: int | None = None,
           array: bool = False) -> list[Call]:
    """Submit one job per element (a SLURM job array when `array`); return the Calls in order.
    Everything is checked before anything is written or submitted."""
    backend = choose_backend(backend)
    nodes = scaling.spec.layout.nodes
    require_shared("storage", storage, nodes, backend)
    data: list[str] = []
    arguments = [(unwrap_data(a, data), unwrap_data(k, data)) for a, k in arguments]
    for path in data:
        require_shared("Data", path, nodes, backend)
    fields = dict(container=with_binds(scaling.spec.container, [str(storage)] + data),
                  output_dir=str(storage / "logs"), job_name=job_name)
    call_dir = prepare(storage / "calls", function, arguments, session)
    if scaling.spec.container.runtime != "none":
        stage_dependencies(call_dir)
    if backend == "slurm":
        from hpcjax.launch import slurm

        if array:
            spec = scaling.job(worker_command(scaling, call_dir, folder.ARRAY_ELEMENT), array=len(arguments),
                               array_parallel=max_parallel, **fields)
            return [Call(call_dir, i, run) for i, run in enumerate(slurm.submit_array(spec))]
        spec = scaling.job(worker_command(scaling, call_dir, "0"), **fields)
        return [Call(call_dir, 0, slurm.submit(spec))]
    specs = [scaling.job(worker_command(scaling, call_dir, str(i)), **fields) for i in range(len(arguments))]
    from hpcjax.launch import local

    for spec in specs:
        local.check_local_spec(spec)
    if not array:
        call = Call(call_dir, 0, local.submit(specs[0]))
        _local_calls.append(call)
        return [call]
    calls = [Call(call_dir, i) for i in range(len(specs))]
    slots = max_parallel or max(1, (os.cpu_count() or 1) // scaling.spec.layout.num_processes)
    # Not a daemon: like concurrent.futures, the program waits for its map at exit, so no
    # element is left unstarted and no rank is orphaned.
    threading.Thread(target=_run_locally, args=(calls, specs, slots), name="hpcjax-local-map").start()
    return calls


_local_calls: list[Call] = []  # local jobs the caller may not wait for: their ranks are its children


@atexit.register
def _wait_for_local_calls() -> None:
    for call in _local_calls:
        if call.run.state() == "RUNNING":
            say(f"waiting for local job {call.run.job_id} to end: its ranks are this program's children")
            call.run.wait(progress=False)


def _run_locally(calls: list[Call], specs: list, slots: int) -> None:
    """A local map's scheduler: at most `slots` jobs at once, started in order."""
    from hpcjax.launch import local

    waiting, running = list(zip(calls, specs)), []
    while waiting or running:
        while waiting and len(running) < slots:
            call, spec = waiting.pop(0)
            try:
                call.run = local.submit(spec)
                if call.cancelled:
                    call.run.cancel()
            except BaseException as error:  # the caller's wait raises it instead of hanging
                call.start_error = error
                call.started.set()
                call.ended.set()
                continue
            call.started.set()
            running.append(call)
        for call in list(running):
            if call.run.state() not in ("RUNNING", "PENDING"):
                _ = call.run.outcome
                call.ended.set()
                running.remove(call)
        time.sleep(0.2)


def read_result(call_dir: Path, element: int, outcome):
    """Rank 0's value for a job that completed; RemoteError naming the rank that failed
    first (its own exception and traceback where it left them, else the job's report)."""
    from submitit.core.utils import pickle_load

    left = {rank: pickle_load(path) for rank, path in folder.results(call_dir, element).items()}
    if outcome.ok and left.get(0, ("",))[0] == "success":
        return left[0][1]
    errors = {rank: payload for rank, payload in left.items() if payload[0] == "error"}
    first = outcome.failed[0].rank if outcome.failed else None
    rank = first if first in errors else min(errors, default=None)
    if rank is None:
        failure = outcome.failed[0] if outcome.failed else None
        raise RemoteError(outcome.report(),
                          f"see every rank's log: hpcjax logs {outcome.job_id}",
                          rank=failure.rank if failure else None, host=failure.host if failure else None,
                          job_id=outcome.job_id, outcome=outcome)
    _, text, exception, where = errors[rank]
    original = None
    if exception is not None:
        try:
            original = pickle.loads(exception)
        except Exception:  # a class the caller cannot import: the traceback text still says it all
            original = None
    last = text.strip().splitlines()[-1] if text.strip() else "an error"
    error = RemoteError(f"rank {where['rank']} on {where['host']} of job {outcome.job_id} raised {last}\n"
                        f"remote traceback (rank {where['rank']}):\n{text.rstrip()}",
                        f"the rank's whole log: hpcjax logs {outcome.job_id} --rank {where['rank']}",
                        rank=where["rank"], host=where["host"], job_id=outcome.job_id, remote_traceback=text,
                        outcome=outcome)
    if original is not None:
        raise error from original
    raise error
