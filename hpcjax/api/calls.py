"""A Python call's own part of a job: the function and its arguments pickled into a call folder
by submitit's machinery (`prepare`, written at the pipeline's stage step by api.submit), and the
result read back from what the ranks left (`Call.result`, `read_result`)."""

from __future__ import annotations

import os
import pickle
import sys
import time
import uuid
from pathlib import Path

from hpcjax.api import folder
from hpcjax.api.configs import Data
from hpcjax.values.errors import HpcjaxError, UsageError

NOT_READ = object()  # a Call whose result has not been read yet


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


def refuse_unreturnable(function, what: str) -> None:
    """A generator or async function runs nothing when called: its job would hand back a generator
    or a coroutine, which cannot be pickled, found only after the job ran (issue 63). Refused here."""
    import inspect

    kind = ("a generator function" if inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function)
            else "an async function" if inspect.iscoroutinefunction(function) else None)
    if kind:
        name = getattr(function, "__qualname__", repr(function))
        raise UsageError(f"{what} {name} is {kind}: calling it runs nothing and gives back a "
                         f"{'generator' if 'generator' in kind else 'coroutine'}, which cannot return from a job",
                         "run the work in a plain function and return its values, e.g. return list(...) of the "
                         "generator's items" if "generator" in kind else
                         "run the work in a plain function (asyncio.run(...) inside it) and return its value")


class Call:
    """One element of a call: the job's Run handle (job_id, state, wait, logs, cancel,
    outcome, ...) and `result()`."""

    def __init__(self, call_dir: Path, element: int, run) -> None:
        self.call_dir, self.element, self.run = call_dir, element, run
        self._value = NOT_READ

    def __getattr__(self, name: str):
        if name.startswith("_") or name in ("run", "call_dir", "element"):
            raise AttributeError(name)
        return getattr(self.run, name)

    def result(self, *, progress: bool = False):
        """Rank 0's value once the job has ended; RemoteError if it failed. Read once: its files
        are removed then (a big value stayed in the call folder, and went to the cluster again
        with the next submission's code from a laptop)."""
        if self._value is NOT_READ:
            outcome = self.run.wait(progress=progress)
            self._value = read_result(self.call_dir, self.element, outcome, self.run.files)
        return self._value

    def exception(self, *, progress: bool = False) -> RemoteError | None:
        try:
            self.result(progress=progress)
        except RemoteError as error:
            return error
        return None

    def __repr__(self) -> str:
        return f"<hpcjax call {self.call_dir.name}[{self.element}], job {self.run.job_id}: {self.run.state()}>"


def new_call_name() -> str:
    """A call folder's name, chosen before anything is written (the call's handle names it)."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"


def prepare(call_dir: Path, function, arguments: list[tuple[tuple, dict]], session: dict | None = None,
            sys_path: list[str] | None = None) -> Path:
    """The call folder `call_dir` (new): the caller's import path (this process's, unless given),
    and one pickled call per element."""
    pickles = pickled(function, arguments)  # before anything is written: none is left half made
    call_dir.mkdir(parents=True)
    if sys_path is None:
        sys_path = [os.path.abspath(p or ".") for p in sys.path]
    folder.write_meta(call_dir, {"sys_path": sys_path, "session": session})
    for element, data in enumerate(pickles):
        folder.element_dir(call_dir, element).mkdir()
        folder.call_pickle(call_dir, element).write_bytes(data)
    return call_dir


def code_by_value(data: bytes) -> bool:
    """Whether a pickle carries code by value (cloudpickle's way with a function defined in __main__, a
    notebook or a lambda: its bytecode), which only the same Python minor version can load. A function
    of an importable module travels by name instead."""
    import pickletools

    strings = [arg for _, arg, _ in pickletools.genops(data) if isinstance(arg, str)]
    return any(name == "CodeType" and where in ("_builtin_type", "types") for where, name in zip(strings, strings[1:]))


def pickled(function, arguments: list[tuple[tuple, dict]]) -> list[bytes]:
    """Each element's call as submitit pickles it (its DelayedSubmission, through cloudpickle);
    UsageError naming the element when one cannot be."""
    import cloudpickle
    from submitit.core.utils import DelayedSubmission

    found = []
    for element, (args, kwargs) in enumerate(arguments):
        try:
            found.append(cloudpickle.dumps(DelayedSubmission(function, *args, **kwargs)))
        except Exception as error:  # pickle's errors are many (TypeError, PicklingError, AttributeError, ...)
            where = f"element {element}'s arguments" if len(arguments) > 1 else "the arguments"
            raise UsageError(f"{getattr(function, '__name__', 'the function')} or {where} cannot be sent to the "
                             f"job: {type(error).__name__}: {error}",
                             "pass what pickles (numbers, strings, arrays, files as paths or hpcjax.Data); open "
                             "files, locks, sockets and generators do not: make them inside the function") from None
    return found


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


def unwrap_data(value, found: list, path_of=lambda data: data.path):
    """Data arguments (also inside lists, tuples and dicts) as the plain paths they name
    (`path_of`: where each is for the job); each Data is added to `found`."""
    if isinstance(value, Data):
        found.append(value)
        return path_of(value)
    if isinstance(value, (list, tuple)):
        return type(value)(unwrap_data(v, found, path_of) for v in value)
    if isinstance(value, dict):
        return {k: unwrap_data(v, found, path_of) for k, v in value.items()}
    return value


def read_result(call_dir, element: int, outcome, files):
    """Rank 0's value for a job that completed; RemoteError naming the rank that failed
    first (its own exception and traceback where it left them, else the job's report).
    The ranks' files are read through `files` (the job's host: here, or a login node)."""
    left = {}
    found = folder.results(call_dir, element, files)
    for rank, path in found.items():
        data = files.read_own_bytes(path)  # a pickle is code: one another user wrote is never loaded
        if data is not None:
            left[rank] = pickle.loads(data)
    if outcome.ok and left.get(0, ("",))[0] == "success":
        files.remove(list(found.values()))  # the value is the caller's now (Call keeps it)
        return left[0][1]
    errors = {rank: payload for rank, payload in left.items() if payload[0] == "error"}
    # The Outcome names the rank that failed first (the one the hang watch found holding the
    # others, the one that went quiet, the first srun saw exit): another rank's exception is then
    # a consequence (a collective whose peer was stopped), never the cause.
    first = outcome.failed[0].rank if outcome.failed else None
    rank = first if first in errors or first is not None else min(errors, default=None)
    if rank not in errors:
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
