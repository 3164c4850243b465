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

from hpcjax.values.errors import UsageError

HOME_ENV = "HPCJAX_HOME"  # where hpcjax keeps its job records (default ~/.hpcjax)


def home() -> Path:
    return Path(os.environ.get(HOME_ENV) or Path.home() / ".hpcjax")


def records_dir() -> Path:
    return home() / "jobs"


def _path(job_id: str) -> Path:
    return records_dir() / f"{job_id}.json"


def key(job_id: str, destination: str | None = None) -> str:
    """The record's name: the job id, and for a cluster reached over SSH its destination too
    (two clusters, or a cluster and this machine, hand out the same ids)."""
    if not destination:
        return str(job_id)
    return f"{job_id}@{re.sub(r'[^A-Za-z0-9_.-]', '_', destination)}"


def job_id_of(record_key: str) -> str:
    """The job id a record's name holds (key's inverse, less the destination)."""
    return record_key.split("@", 1)[0]


def remote_keys(job_id: str) -> list[str]:
    """The records of this job id on clusters reached over SSH."""
    return sorted(p.stem for p in records_dir().glob(f"{job_id}@*.json"))


def element_ids(job_id: str, destination: str | None = None) -> list[str]:
    """The elements of the job array `job_id` (its id as `submit` printed it) recorded here, in order."""
    suffix = key("", destination)
    found = [p.stem.removesuffix(suffix) for p in records_dir().glob(f"{job_id}_*{suffix}.json")]
    return sorted((e for e in found if re.fullmatch(rf"{re.escape(job_id)}_\d+", e)),
                  key=lambda e: int(e.rpartition("_")[2]))


# The fields a record's readers rely on, with their types (a record holds more).
SHAPE = {"job_id": str, "backend": str, "output_dir": str, "layout": dict, "state": str, "pids": list,
         "cluster": dict, "run_dir": str, "exit_codes": dict, "causes": list}
LAYOUT_KEYS = ("nodes", "gpus_per_node", "gpus_per_process")


class DamagedRecord(UsageError):
    """A job record that hpcjax did not write as it is (edited, truncated, another version's)."""


def load(job_id: str) -> dict | None:
    """The record of a job (None: none, or an id claimed but not written yet); a record that
    is not what hpcjax writes is refused, naming its file."""
    path = _path(job_id)
    try:
        return parse(path.read_text(errors="replace"), job_id, str(path))
    except OSError:
        return None



def every():
    """(key, record, the file's mtime) for each readable record under HPCJAX_HOME, by key: a damaged
    or vanished file is left out (`hpcjax runs` says which when it reads them one by one)."""
    for file in sorted(records_dir().glob("*.json")):
        try:
            record = parse(file.read_text(errors="replace"), file.stem, str(file))
            written = file.stat().st_mtime
        except (OSError, DamagedRecord):
            continue
        if record is not None:
            yield file.stem, record, written


def parse(text: str, job_id: str, where: str) -> dict | None:
    """A record's text (from this machine or a cluster) as a record, or DamagedRecord."""
    if not text.strip():
        return None  # new_local_id claimed the id; the record follows
    try:
        record = json.loads(text)
    except ValueError:
        record = None
    why = check(record)
    if why:
        raise DamagedRecord(f"the record of job {job_id} ({where}) is damaged: {why}",
                            f"delete it (rm {where}); a SLURM job is still found without it, by its id")
    return record


def check(record) -> str:
    """'' for a record of the shape hpcjax writes, else what is wrong with it."""
    if not isinstance(record, dict):
        return "it is not a JSON object"
    for key, kind in SHAPE.items():
        if key in record and record[key] is not None and not isinstance(record[key], kind):
            return f"{key} is {type(record[key]).__name__}, not {kind.__name__}"
    layout = record.get("layout") or {}
    if any(not isinstance(layout.get(k, 1), int) or isinstance(layout.get(k, 1), bool) or layout.get(k, 1) < 1
           for k in LAYOUT_KEYS):
        return f"its layout {layout!r} is not three positive integers"
    if not record.get("output_dir"):
        return "it names no output_dir (where the job's logs are)"
    if "cluster" in record and not isinstance((record["cluster"] or {}).get("destination", ""), str):
        return "its cluster has no destination"
    return ""


def save(job_id: str, record: dict) -> None:
    """Write the record in one step, so a reader in another process never sees half of it."""
    directory = records_dir()
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{job_id}.")
    with os.fdopen(fd, "w") as handle:
        json.dump({"job_id": job_id_of(job_id), **record}, handle)
    os.replace(tmp, _path(job_id))


def update(job_id: str, **changes) -> None:
    save(job_id, {**(load(job_id) or {}), **changes})


PSEUDO_ROOTS = ("/proc", "/sys", "/dev")  # the kernel's own trees (/dev/shm, a tmpfs, is a file system)


def pseudo_file_system(path) -> str:
    """The kernel tree (/proc, /sys, /dev) a path lies in, or ''."""
    resolved = os.path.realpath(path)
    if resolved == "/dev/shm" or resolved.startswith("/dev/shm/"):
        return ""
    return next((root for root in PSEUDO_ROOTS if resolved == root or resolved.startswith(root + "/")), "")


def require_writable() -> None:
    """Refuse to submit when the records cannot be written: a job without its record is lost to
    `status`, `runs`, `fetch` and `relaunch` (and a local job to its own follower)."""
    directory = records_dir()
    existing = next(p for p in (directory, *directory.parents) if p.exists() or p == Path(p.anchor))
    why = "" if existing.is_dir() else f"{existing} is not a directory"
    kernel = pseudo_file_system(directory)
    if kernel:  # root may "write" there, and the record is lost: the kernel's own files
        why = f"{kernel} is the kernel's, not a file system for files"
    if not why and not os.access(existing, os.W_OK | os.X_OK):  # made only when the first record is written
        why = f"{existing} is not writable"
    if why:
        raise UsageError(f"hpcjax cannot write its job records in {directory}: {why}",
                         f"set {HOME_ENV} to a directory you can write (e.g. export {HOME_ENV}=$HOME/.hpcjax), "
                         "or fix the permissions there; nothing was submitted")


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


RECORDS_THERE = "records"  # <remote_dir>/records/<job>.json: a job's record on the cluster itself


def save_there(cluster, home: str, job_id: str, record: dict) -> None:
    """A job's record on the cluster (`home`: its remote directory there, as the stage found it):
    another laptop (or this one after a wipe) finds it there."""
    cluster.host().files.write_text(f"{home}/{RECORDS_THERE}/{job_id}.json", json.dumps(record))


def load_there(cluster, job_id: str) -> dict | None:
    """A job's record on the cluster (shape checked; it names where the job's files are, never how
    to reach the cluster: that is the Cluster the user named)."""
    path = f"{cluster.home()}/{RECORDS_THERE}/{job_id}.json"
    return parse(cluster.host().files.read_text(path) or "", job_id, f"{cluster.name}:{path}")
