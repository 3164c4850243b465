"""The call folder: where a call's pickled function and arguments wait for the ranks,
and where each rank leaves its result. One owner for the names both sides read.

    <calls>/<call id>/call.json              the caller's import path, the run's session
    <calls>/<call id>/deps/                  submitit, cloudpickle (in a container, and from a laptop)
    <calls>/<call id>/<element>/call.pkl     submitit's DelayedSubmission (cloudpickle)
    <calls>/<call id>/<element>/rank<R>.pkl  ("success", value) or ("error", traceback,
                                             pickled exception or None, {"rank", "host"})

A call has one element; a map has one per argument (a SLURM job array's index).
Standard library only: the worker reads it on every rank.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

META = "call.json"
CALL = "call.pkl"
RESULT = "rank{rank}.pkl"
ARRAY_ELEMENT = "array"  # the worker's element argument in a job array: SLURM_ARRAY_TASK_ID
# Copies of the worker's own dependencies, for a container image that lacks them (a
# stock JAX image has JAX and NumPy, not submitit): the worker falls back to these.
DEPS = "deps"
WORKER_DEPENDENCIES = ("submitit", "cloudpickle", "typing_extensions")


def element_dir(call_dir: str | Path, element: int) -> Path:
    return Path(call_dir) / str(element)


def call_pickle(call_dir: str | Path, element: int) -> Path:
    return element_dir(call_dir, element) / CALL


def result_path(call_dir: str | Path, element: int, rank: int) -> Path:
    return element_dir(call_dir, element) / RESULT.format(rank=rank)


def results(call_dir: str | Path, element: int, files) -> dict[int, str]:
    """Every rank's result file of an element, by rank, listed through a host's files (this
    machine's, or a login node's over SSH)."""
    found = {}
    directory = f"{call_dir}/{element}"
    for name in files.list_names(directory):
        match = re.fullmatch(RESULT.format(rank=r"(\d+)"), name)
        if match:
            found[int(match.group(1))] = f"{directory}/{name}"
    return dict(sorted(found.items()))


def write_meta(call_dir: Path, meta: dict) -> None:
    (call_dir / META).write_text(json.dumps(meta))


def read_meta(call_dir: str | Path) -> dict:
    return json.loads((Path(call_dir) / META).read_text())
