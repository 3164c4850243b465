"""What a training loop tells its run, and what the caller reads back: Ray Train's
`report`, `get_checkpoint` and `get_context`, over files in the run directory.

    storage_path/name/reports.jsonl    rank 0's reports, in order: {"attempt", "metrics"};
                                       and at each attempt's start {"attempt", "start": n}:
                                       the first n reports are kept (those up to the
                                       checkpoint it resumes from), the rest were replayed
                                       and before an attempt's first report {"attempt",
                                       "time_to_first_report": {...}} (session._start)
    storage_path/name/checkpoint.json  the latest checkpoint: {"path", "attempt", "history"}
    storage_path/name/checkpoints/     copies of checkpoints registered from elsewhere
    storage_path/name/tensorboard/     every number reported, as report/<name> at step = the
                                       report's index (train.scalars; purged past a resume)

Rank side: the worker calls `start` once JAX is initialized. Caller side: `history`,
`latest_checkpoint`, `next_attempt`, through a host's files (`files`: this machine's by
default, or a login node's over SSH for a run on a cluster). Standard library only (NumPy, lazily, to turn
array values into numbers; tensorboardX, lazily and if installed, for the scalars).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hpcjax.values import jsonlines
from hpcjax.protocol import rundir
from hpcjax.values.errors import UsageError
from hpcjax.hosts.files import LocalFiles
from hpcjax.rank.watch import hangwatch
from hpcjax.train.scalars import Scalars

REPORTS, CHECKPOINT, COPIES = rundir.REPORTS, rundir.LATEST_CHECKPOINT, rundir.CHECKPOINTS


class Checkpoint:
    """A directory holding a checkpoint (an Orbax checkpoint, or any directory)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = str(Path(path).resolve())

    @classmethod
    def from_directory(cls, path: str | os.PathLike) -> "Checkpoint":
        return cls(path)

    @classmethod
    def on_cluster(cls, path: str) -> "Checkpoint":
        """A checkpoint on a cluster reached over SSH: its path there, never resolved here."""
        checkpoint = cls.__new__(cls)
        checkpoint.path = path
        return checkpoint

    def to_directory(self, path: str | os.PathLike | None = None) -> str:
        """A copy of the checkpoint in `path` (a new temporary directory if None)."""
        target = Path(path) if path else Path(tempfile.mkdtemp(prefix="hpcjax-checkpoint-"))
        shutil.copytree(self.path, target, dirs_exist_ok=True)
        return str(target)

    @contextlib.contextmanager
    def as_directory(self):
        yield self.path  # on shared storage already: no copy

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and other.path == self.path

    def __repr__(self) -> str:
        return f"Checkpoint(path={self.path!r})"


@dataclass(frozen=True)
class Context:
    """Where this rank stands: Ray Train's TrainContext names, and the layout."""

    world_size: int
    world_rank: int
    local_world_size: int
    layout: dict  # nodes, gpus_per_node, gpus_per_process
    attempt: int = 1
    run_dir: str | None = None  # storage_path/name of a Trainer run
    extra: dict = field(default_factory=dict)

    def get_world_size(self) -> int:
        return self.world_size

    def get_world_rank(self) -> int:
        return self.world_rank

    def get_local_rank(self) -> int:
        return self.world_rank % self.local_world_size

    def get_local_world_size(self) -> int:
        return self.local_world_size

    def get_node_rank(self) -> int:
        return self.world_rank // self.local_world_size  # srun places ranks block-wise

    def get_storage(self) -> str | None:
        return self.run_dir

    def get_experiment_name(self) -> str | None:
        return Path(self.run_dir).name if self.run_dir else None


_context: Context | None = None
_state = {"history": 0, "checkpoint": None, "scalars": None, "first_report": True}


def start(context: Context) -> None:
    """Called by the worker on every rank once JAX is initialized."""
    global _context
    _context = context
    if context.run_dir is None:
        return
    latest = latest_checkpoint(context.run_dir)
    _state["checkpoint"] = latest
    _state["history"] = _read_json(f"{context.run_dir}/{CHECKPOINT}").get("history", 0) if latest else 0
    if context.world_rank == 0:
        _append(Path(context.run_dir) / REPORTS, {"attempt": context.attempt, "start": _state["history"]})
        _state["scalars"] = Scalars(Path(context.run_dir), start_step=_state["history"])


def get_context() -> Context:
    if _context is None:
        raise UsageError("hpcjax.get_context() is called outside a job hpcjax started",
                         "call it inside the function given to hpcjax.Trainer or @hpcjax.remote")
    return _context


def get_checkpoint() -> Checkpoint | None:
    """The run's latest checkpoint (from an earlier job of the run), or None."""
    _training_context("get_checkpoint")
    return _state["checkpoint"]


def report(metrics: dict, checkpoint: Checkpoint | str | os.PathLike | None = None) -> None:
    """Keep rank 0's metrics (in order) and, with `checkpoint`, make that directory the
    run's latest checkpoint. A directory outside the run directory is copied into it, so a
    later job on other nodes finds it. Other ranks' reports are checked and dropped."""
    context = _training_context("report")
    if not isinstance(metrics, dict):
        raise UsageError(f"hpcjax.report takes a dict of metrics, got {type(metrics).__name__}",
                         'report({"loss": float(loss), "epoch": epoch})')
    plain = {str(k): plain_value(v) for k, v in metrics.items()}
    path = None
    if checkpoint is not None:
        path = Path(checkpoint.path if isinstance(checkpoint, Checkpoint) else checkpoint).resolve()
        if not path.is_dir():
            raise UsageError(f"checkpoint {str(path)!r} is not a directory",
                             "save the checkpoint first, then report its directory")
    hangwatch.progress()  # every rank's reports are its progress: a job whose reports stop ends by itself
    if context.world_rank != 0:
        return
    with hangwatch.hold():  # writing the record and copying a checkpoint are pauses on purpose
        if _state["first_report"]:
            _state["first_report"] = False
            _append(Path(context.run_dir) / REPORTS, {"attempt": context.attempt, "time_to_first_report": _start()})
        _keep(context, plain, path)


def _start() -> dict:
    """This attempt's start, as far as hpcjax saw it: process start to JAX initialized and to
    this first report, and each program `hpcjax.compiled` gave (warm or cold, and its seconds)."""
    import time

    from hpcjax.rank.cache import executables
    from hpcjax.rank.start import runtime

    age = runtime.process_age_s()
    started = time.monotonic() - age if age is not None else None
    initialized = runtime.initialized_at
    return {"total_s": age, "initialized_s": initialized - started if started and initialized else None,
            "compiled": list(executables.started)}


def _keep(context: Context, plain: dict, path: Path | None) -> None:
    run_dir = Path(context.run_dir)
    _append(run_dir / REPORTS, {"attempt": context.attempt, "metrics": plain})
    if _state["scalars"] is not None:
        _state["scalars"].add(_state["history"], plain)
        _state["scalars"].flush()  # a report is rare and the process may end right after it
    _state["history"] += 1
    if path is not None:
        if run_dir.resolve() not in path.parents:
            copy = run_dir / COPIES / f"checkpoint_{_state['history']:06d}"
            shutil.copytree(path, copy, dirs_exist_ok=True)
            path = copy.resolve()
        _write_json(run_dir / CHECKPOINT, {"path": str(path), "attempt": context.attempt,
                                           "history": _state["history"]})


def _training_context(name: str) -> Context:
    context = get_context()
    if context.run_dir is None:
        raise UsageError(f"hpcjax.{name}() needs a training run: this function was started by @hpcjax.remote",
                         "use hpcjax.Trainer for a run with reports and checkpoints, or return the "
                         "values from the remote function")
    return context


def plain_value(value):
    """A value JSON can hold: numbers stay numbers, arrays of one element become one."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): plain_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    import numpy  # noqa: PLC0415 (only reports of array values need it)

    array = numpy.asarray(value)  # waits for this value only
    return array.item() if array.size == 1 else array.tolist()


# --- the caller's side -------------------------------------------------------------
HERE = LocalFiles()


def history(run_dir: str | Path, files=HERE) -> list[dict]:
    """Every kept report, in order: an attempt that resumed from a checkpoint replaces
    what came after that checkpoint."""
    kept: list[dict] = []
    for entry in _read_lines(f"{run_dir}/{REPORTS}", files):
        if "start" in entry:
            del kept[entry["start"]:]
        elif "metrics" in entry:
            kept.append(entry["metrics"])
    return kept


def starts(run_dir: str | Path, files=HERE) -> list[dict]:
    """Each attempt's time to its first report: {"attempt", "total_s", "initialized_s", "compiled"}."""
    return [{"attempt": e.get("attempt"), **e["time_to_first_report"]}
            for e in _read_lines(f"{run_dir}/{REPORTS}", files) if isinstance(e.get("time_to_first_report"), dict)]


def describe_latest(run_dir: str | Path, files=HERE) -> str:
    """The latest report, for the progress line: `report 38: epoch=37 loss=0.1234`."""
    kept = history(run_dir, files)
    if not kept:
        return ""
    shown = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in list(kept[-1].items())[:6] if isinstance(v, (int, float, str)))
    return f"report {len(kept)}: {shown}"


def latest_checkpoint(run_dir: str | Path, files=HERE) -> Checkpoint | None:
    """The run's latest checkpoint. For a run on a cluster reached over SSH, its path is the
    cluster's (`hpcjax fetch` brings it here)."""
    found = _read_json(f"{run_dir}/{CHECKPOINT}", files).get("path")
    if not found or not files.is_dir(found):
        return None
    return Checkpoint(found) if files is HERE else Checkpoint.on_cluster(found)


def next_attempt(run_dir: str | Path, files=HERE) -> int:
    return max((e.get("attempt", 0) for e in _read_lines(f"{run_dir}/{REPORTS}", files)), default=0) + 1


def _read_lines(path: str, files=HERE) -> list[dict]:
    return jsonlines.objects(files.read_text(path))  # a line cut short by a kill: the others still count


def _read_json(path: str, files=HERE) -> dict:
    try:
        return json.loads(files.read_text(path) or "{}")
    except ValueError:
        return {}


def _append(path: Path, entry: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        handle.write(json.dumps(entry) + "\n")


def _write_json(path: Path, data: dict) -> None:
    """In one step: a reader (or a kill) never sees half of it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)
