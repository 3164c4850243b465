"""What the catalog keeps of each job: its record and its row in hpcjax.catalog.db, written when
it is submitted (the fields: launch.steps.record_fields), changed as it runs and when a
follower sees it end; and the refresh that brings unfinished runs up to date, each backend its
own (hpcjax.backends: SLURM's from one `sacct --duplicates` per cluster, the local backend's from
their records), then every run's last metrics from its run directory. (`hpcjax runs` is
cli/runs.py, this module's other side.)
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

from hpcjax.catalog import db, records
from hpcjax.values.errors import HpcjaxError
from hpcjax.protocol.rundir import RunDir, run_dir_argument
from hpcjax.values import jsonlines
from hpcjax.values.voice import say

METRICS_TAIL_BYTES = 1 << 16  # the last metrics are at the end: never read a whole long record
# A finished run whose attempts accounting never gave is asked about for this long, then left as it is.
ATTEMPTS_FOR_S = 7 * 86400


def kind_of(command) -> str:
    """What a job is, from its command: a smoke test, `hpcjax train`, the Python API, or a command."""
    words = " ".join(map(str, command))
    if "hpcjax.api.worker" in words:
        return "api"
    if "hpcjax check" in words:
        return "smoke"
    if "hpcjax train" in words:
        return "train"
    return "command"


def run_dir_of(spec, command) -> str | None:
    """The run directory a job keeps its run in: what its command names (--run-dir), else what
    its submitter said (a Trainer run's); as given, relative to the job's working directory."""
    return run_dir_argument(command) or spec.run_dir


def record(key: str, fields: dict) -> None:
    """Save a job's record and its catalog row (the catalog never fails a submission; the records
    were checked writable before it, and if they stopped being so since, the job is named)."""
    try:
        records.save(key, fields)
    except OSError as error:
        say(f"hpcjax: warning: job {key} was submitted, but its record could not be written in "
            f"{records.records_dir()} ({error.strerror}): `hpcjax status/logs/cancel` find a SLURM job by its "
            "id alone, `runs` and `relaunch` will not know it")
        return
    _catalog(key, records.load(key) or fields)


def update(key: str, **changes) -> None:
    records.update(key, **changes)
    _catalog(key, records.load(key) or changes)


def _catalog(key: str, fields: dict) -> None:
    try:
        with closing(db.connect()) as conn:
            db.save(conn, key, **db.from_record({"job_id": records.job_id_of(key), **fields}, time.time()))
            if fields.get("started"):
                db.save_attempts(conn, key, [{"attempt": 1, "start": fields["started"], "end": fields.get("ended"),
                                              "state": fields.get("state"), "nodelist": fields.get("nodelist"),
                                              "gpus": _gpus(fields.get("layout") or {})}])
    except (sqlite3.Error, OSError) as error:
        say(f"hpcjax: note: the catalog of runs was not updated for job {key}: {error}")


def ended(key: str, outcome) -> None:
    """A followed job's end, as its Run saw it, into its catalog row (if it has one)."""
    try:
        with closing(db.connect()) as conn:
            db.save(conn, key, state=outcome.state, final=True, exit_code=outcome.exit_code,
                    report=None if outcome.ok else outcome.report())
    except (sqlite3.Error, OSError) as error:
        say(f"hpcjax: note: the catalog of runs was not updated for job {key}: {error}")


def _gpus(layout: dict) -> int:
    return (layout.get("nodes") or 1) * (layout.get("gpus_per_node") or 1)


def refresh(conn: sqlite3.Connection, rows: list[dict], backend_of) -> None:
    """Bring the given runs up to date: each backend its own rows (`backend_of(name)`: the backend,
    hpcjax.backends.get; SLURM's from accounting, the local backend's from their records), then
    every run's last metrics from its run directory. What a backend cannot say stays as last seen."""
    by_backend: dict[str, list[dict]] = {}
    for row in rows:
        by_backend.setdefault(row["backend"] or "slurm", []).append(row)
    for name, group in by_backend.items():
        try:
            backend_of(name).refresh(conn, group)
        except HpcjaxError as error:
            say(f"hpcjax: note: could not bring {len(group)} {name} run(s) up to date: {error.message}; shown "
                "as last seen")
    for row in rows:
        if row.get("run_dir") and not row["cluster"]:
            metrics = last_metrics(Path(row["run_dir"]))
            if metrics is not None and metrics != row.get("metrics"):
                db.save(conn, row["key"], metrics=metrics)


def settled(row: dict) -> bool:
    """A finished run whose attempts are all known (or that is older than accounting keeps them)."""
    recent = time.time() - ATTEMPTS_FOR_S
    return row["final"] and ((row["attempts"] and all(a.get("end") for a in row["attempts"]))
                             or (row["submitted"] or 0) < recent)


def from_record(row: dict) -> None:
    """A run's row again from its job record (the local backend's, which its follower keeps current)."""
    fields = records.load(row["key"])
    if fields:
        _catalog(row["key"], fields)


def last_metrics(run_dir: Path) -> dict | None:
    """The last metrics of a run directory (`hpcjax train`'s record, or a Trainer's reports): the
    numbers of the last record with a loss and of any after it (a validation), read from the end."""
    for path in (RunDir(run_dir).metrics, run_dir / "reports.jsonl"):
        try:
            with open(path, "rb") as handle:
                handle.seek(0, 2)
                handle.seek(max(0, handle.tell() - METRICS_TAIL_BYTES))
                lines = handle.read().decode(errors="replace").split("\n")
        except OSError:
            continue
        found: dict = {}
        for line in reversed(lines):  # back to the last record with a loss, later values winning
            value = jsonlines.object_of(line)
            value = value.get("metrics", value) if value is not None else None
            if isinstance(value, dict):
                found = {**{k: v for k, v in value.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
                         **found}
                if "loss" in value:
                    break
        if set(found) - {"step"}:
            return found
    return None


def preflight_failures() -> list[dict]:
    """Every recorded preflight failure, the newest first."""
    rows = []
    for stem, record, _ in records.every():
        for failure in record.get("preflight_failures") or []:
            if isinstance(failure, dict) and failure.get("node"):
                rows.append({"node": str(failure["node"]), "job_id": str(record.get("job_id", stem)),
                             "cluster": str((record.get("cluster") or {}).get("destination") or ""),
                             "attempt": failure.get("attempt"), "at": failure.get("at") or "",
                             "what": str(failure.get("what") or "")})
    return sorted(rows, key=lambda r: str(r["at"]), reverse=True)


def recently_failed(destination: str, hours: float, now: float | None = None) -> dict[str, dict]:
    """The nodes of this cluster ('' for here) a preflight failed within `hours`: node -> the newest."""
    from datetime import datetime

    newest: dict[str, dict] = {}
    limit = (time.time() if now is None else now) - hours * 3600
    for row in preflight_failures():
        try:
            at = datetime.fromisoformat(str(row["at"])).timestamp()
        except ValueError:
            continue
        if row["cluster"] == destination and at >= limit and row["node"] not in newest:
            newest[row["node"]] = row
    return newest

