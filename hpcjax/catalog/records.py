"""Job records: what hpcjax remembers of each job it submitted (backend, log
directory, layout, and for local jobs their pids and final state), so that
`hpcjax status/logs/cancel JOBID` find a job from its id alone, from any
process. One small JSON file per job under ~/.hpcjax/jobs (HPCJAX_HOME)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

HOME_ENV = "HPCJAX_HOME"  # where hpcjax keeps its job records (default ~/.hpcjax)


def records_dir() -> Path:
    return Path(os.environ.get(HOME_ENV) or Path.home() / ".hpcjax") / "jobs"


def _path(job_id: str) -> Path:
    return records_dir() / f"{job_id}.json"


def key(job_id: str, destination: str | None = None) -> str:
    """The record's name: the job id, and for a cluster reached over SSH its destination too
    (two clusters, or a cluster and this machine, hand out the same ids)."""
    if not destination:
        return str(job_id)
    return f"{job_id}@{re.sub(r'[^A-Za-z0-9_.-]', '_', destination)}"


def remote_keys(job_id: str) -> list[str]:
    """The records of this job id on clusters reached over SSH."""
    return sorted(p.stem for p in records_dir().glob(f"{job_id}@*.json"))


def load(job_id: str) -> dict | None:
    try:
        return json.loads(_path(job_id).read_text())
    except (OSError, ValueError):  # no record, or one being replaced: none
        return None


def save(job_id: str, record: dict) -> None:
    """Write the record in one step, so a reader in another process never sees half of it."""
    directory = records_dir()
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{job_id}.")
    with os.fdopen(fd, "w") as handle:
        json.dump({"job_id": job_id.split("@")[0], **record}, handle)
    os.replace(tmp, _path(job_id))


def update(job_id: str, **changes) -> None:
    save(job_id, {**(load(job_id) or {}), **changes})


def new_local_id(start: int) -> str:
    """A job id no other record holds: claimed by creating its record exclusively."""
    directory = records_dir()
    directory.mkdir(parents=True, exist_ok=True)
    candidate = start
    while True:
        try:
            os.close(os.open(_path(str(candidate)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return str(candidate)
        except FileExistsError:
            candidate += 1
