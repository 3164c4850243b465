"""The catalog of runs: every job hpcjax submitted (CLI, smoke, Trainer, remote; both backends;
any cluster), its attempts, state and last metrics, in one SQLite database under HPCJAX_HOME.

SQLite from the standard library, in WAL mode with a busy timeout, so several hpcjax
processes may write at once (a locked database is waited for, not failed on). The job
records (`records`, one JSON file per job) stay the source a job is found by; the catalog is
built from them and from what SLURM, the log directories and the run directories say, so it
is never the only copy: a deleted or damaged database is rebuilt from those, and says so.
A schema change is a new entry in MIGRATIONS; `PRAGMA user_version` says which have run.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path

from hpcjax.catalog import records
from hpcjax.protocol.contract import FINISHED_STATES
from hpcjax.values.voice import say

DB_NAME = "catalog.sqlite"
BUSY_TIMEOUT_S = 10.0
CANNOT_WRITE = re.compile(r"readonly|read-only|unable to open|disk I/O|locked|full", re.IGNORECASE)
# Each entry brings a database from version i to i + 1.
MIGRATIONS = (
    """
    CREATE TABLE runs (
        key TEXT PRIMARY KEY, job_id TEXT NOT NULL, name TEXT, kind TEXT, backend TEXT,
        cluster TEXT NOT NULL DEFAULT '', command TEXT, options TEXT,
        output_dir TEXT, run_dir TEXT, workdir TEXT,
        nodes INTEGER, gpus_per_node INTEGER, gpus_per_process INTEGER, partition TEXT,
        submitted REAL, state TEXT, final INTEGER NOT NULL DEFAULT 0, exit_code INTEGER,
        metrics TEXT, report TEXT, sweep TEXT, sweep_values TEXT, after TEXT);
    CREATE TABLE attempts (
        key TEXT NOT NULL, attempt INTEGER NOT NULL, start REAL, end REAL, state TEXT,
        nodelist TEXT, gpus INTEGER, PRIMARY KEY (key, attempt));
    CREATE INDEX runs_submitted ON runs (submitted);
    CREATE INDEX runs_sweep ON runs (sweep);
    """,
)
COLUMNS = ("job_id", "name", "kind", "backend", "cluster", "command", "options", "output_dir", "run_dir",
           "workdir", "nodes", "gpus_per_node", "gpus_per_process", "partition", "submitted", "state", "final",
           "exit_code", "metrics", "report", "sweep", "sweep_values", "after")
ATTEMPT_COLUMNS = ("key", "attempt", "start", "end", "state", "nodelist", "gpus")
JSON_COLUMNS = ("command", "options", "metrics", "sweep_values", "after")


def path() -> Path:
    return records.home() / DB_NAME


def connect() -> sqlite3.Connection:
    """The catalog, created (and filled from the job records) when it is missing or empty,
    rebuilt when it is damaged or of another program's making, migrated when it is older than
    this hpcjax. A catalog this user cannot write is read from a copy made in memory from the
    job records (said once): listing never fails on it, and nothing is lost, the records
    being the source."""
    where = path()
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        conn, made = _open(where)
    except sqlite3.OperationalError as error:  # read-only file or directory, a full disk
        return _in_memory(f"the catalog {where} cannot be written ({error})")
    except (sqlite3.DatabaseError, DamagedCatalog) as error:  # not a database, or not this one
        try:
            _move_aside(where)
        except OSError as moving:
            return _in_memory(f"the catalog {where} is damaged ({error}) and cannot be moved aside ({moving})")
        say(f"hpcjax: the catalog {where} was damaged ({error}); moved aside and rebuilt from the job records, "
            "the log directories and SLURM")
        conn, made = _open(where)
    except OSError as error:  # HPCJAX_HOME itself cannot be made
        return _in_memory(f"the catalog's directory {where.parent} cannot be made ({error.strerror})")
    if made:
        imported = import_records(conn)
        if imported:
            say(f"hpcjax: made the catalog of runs {where} from {imported} job record(s)")
    return conn


class DamagedCatalog(Exception):
    """A database that is not hpcjax's catalog (another program's tables, or ours changed by hand)."""


def _open(where: Path) -> tuple[sqlite3.Connection, bool]:
    """(the connection, whether its tables were made now: an empty file counts as a new catalog)."""
    conn = sqlite3.connect(where, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        made = conn.execute("PRAGMA user_version").fetchone()[0] == 0
        try:
            migrate(conn)
        except sqlite3.OperationalError as error:  # our tables over another program's (same names)
            if CANNOT_WRITE.search(str(error)):
                raise
            raise DamagedCatalog(f"its tables are not hpcjax's ({error})") from None
        check_schema(conn)
        conn.execute("BEGIN IMMEDIATE")  # can this process write it? A read-only one refuses a write now,
        try:  # not later in the middle of a refresh
            conn.execute(f"PRAGMA user_version={len(MIGRATIONS)}")
        finally:
            conn.execute("ROLLBACK")
        return conn, made
    except BaseException:
        conn.close()
        raise


def check_schema(conn: sqlite3.Connection) -> None:
    """The tables are the ones this hpcjax reads and writes (their columns), else DamagedCatalog."""
    for table, wanted in (("runs", ("key",) + COLUMNS), ("attempts", ATTEMPT_COLUMNS)):
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        missing = [c for c in wanted if c not in have]
        if missing:
            raise DamagedCatalog(f"its table {table} lacks {', '.join(missing)}" if have else f"it has no table {table}")


def _move_aside(where: Path) -> None:
    aside = where.with_name(f"{DB_NAME}.damaged-{int(time.time())}")
    where.replace(aside)
    for suffix in ("-wal", "-shm"):
        where.with_name(DB_NAME + suffix).unlink(missing_ok=True)


def _in_memory(why: str) -> sqlite3.Connection:
    """A catalog made now, in memory, from the job records (when the one on disk cannot be used)."""
    say(f"hpcjax: note: {why}; reading the job records instead (nothing is kept for the next command)")
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.row_factory = sqlite3.Row
    migrate(conn)
    import_records(conn)
    return conn


def migrate(conn: sqlite3.Connection) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        raise records.DamagedRecord(f"the catalog {path()} is of a newer hpcjax (schema {version}, this one "
                                    f"knows {len(MIGRATIONS)})", "upgrade hpcjax, or point HPCJAX_HOME elsewhere")
    for number in range(version, len(MIGRATIONS)):
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] == number:  # another process may have done it
                for statement in filter(str.strip, MIGRATIONS[number].split(";")):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version={number + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def import_records(conn: sqlite3.Connection) -> int:
    """Every job record under HPCJAX_HOME as a run (the first time, or after a rebuild)."""
    count = 0
    for stem, record, written in records.every():
        save(conn, stem, **from_record(record, written))
        count += 1
    return count


def from_record(record: dict, written: float) -> dict:
    layout = record.get("layout") or {}
    state = record.get("state") or "PENDING"  # a record is written before its job is known to start
    fields = {"job_id": record.get("job_id", ""), "backend": record.get("backend"),
              "cluster": (record.get("cluster") or {}).get("destination", ""),
              "output_dir": record.get("output_dir"), "run_dir": record.get("run_dir"),
              "workdir": record.get("workdir"), "nodes": layout.get("nodes", 1),
              "gpus_per_node": layout.get("gpus_per_node", 1), "gpus_per_process": layout.get("gpus_per_process", 1),
              "state": state, "final": state in FINISHED_STATES}
    for key in ("name", "kind", "command", "options", "partition", "submitted", "sweep", "sweep_values", "after"):
        if record.get(key) is not None:
            fields[key] = record[key]
    fields.setdefault("submitted", record.get("submitted") or written)
    return fields


def save(conn: sqlite3.Connection, key: str, **fields) -> None:
    """Insert or update one run; only the given fields change."""
    unknown = set(fields) - set(COLUMNS)
    if unknown:
        raise ValueError(f"unknown catalog columns {sorted(unknown)}")
    values = {k: json.dumps(v) if k in JSON_COLUMNS and v is not None else v for k, v in fields.items()}
    if "final" in values:
        values["final"] = int(bool(values["final"]))
    if "job_id" not in values:  # a change to a run already there
        conn.execute(f"UPDATE runs SET {', '.join(f'{k}=?' for k in values)} WHERE key=?", (*values.values(), key))
        return
    names = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    updates = ", ".join(f"{k}=excluded.{k}" for k in values)
    conn.execute(f"INSERT INTO runs (key, {names}) VALUES (?, {marks}) ON CONFLICT(key) DO UPDATE SET {updates}",
                 (key, *values.values()))


def save_attempts(conn: sqlite3.Connection, key: str, attempts: list[dict]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("DELETE FROM attempts WHERE key=?", (key,))
        conn.executemany("INSERT INTO attempts (key, attempt, start, end, state, nodelist, gpus) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)",
                         [(key, a["attempt"], a.get("start"), a.get("end"), a.get("state"), a.get("nodelist"),
                           a.get("gpus")) for a in attempts])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def runs(conn: sqlite3.Connection, *, state: str | None = None, since: float | None = None,
         name: str | None = None, cluster: str | None = None, sweep: str | None = None) -> list[dict]:
    """The runs, newest first, each with its attempts and GPU hours."""
    where, args = [], []
    for column, value, test in (("state", state, "state = ?"), ("submitted", since, "submitted >= ?"),
                                ("name", name, "name LIKE ?"), ("cluster", cluster, "cluster = ?"),
                                ("sweep", sweep, "sweep = ?")):
        if value is not None:
            where.append(test)
            args.append(f"%{value}%" if column == "name" else value.upper() if column == "state" else value)
    sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY submitted DESC, key"
    out = [decode(row) for row in conn.execute(sql, args)]
    attempts: dict[str, list[dict]] = {}
    for row in conn.execute("SELECT * FROM attempts ORDER BY key, attempt"):
        attempts.setdefault(row["key"], []).append(dict(row))
    for run in out:
        run["attempts"] = attempts.get(run["key"], [])
        run["gpu_hours"] = gpu_hours(run)
    return out


def keys_of_kind(conn: sqlite3.Connection, kind: str, cluster: str = "", *, open_only: bool = False) -> list[str]:
    """The records' keys of one kind (e.g. the holds) on one cluster ("": this machine), newest first;
    `open_only`: those the catalog has not seen end."""
    return [row["key"] for row in conn.execute(
        "SELECT key FROM runs WHERE kind = ? AND cluster = ?" + (" AND final = 0" if open_only else "") +
        " ORDER BY submitted DESC, key", (kind, cluster))]


def clusters_of_kind(conn: sqlite3.Connection, kind: str) -> list[str]:
    """Every cluster ("": this machine) where the catalog has records of one kind."""
    return [row["cluster"] for row in conn.execute("SELECT DISTINCT cluster FROM runs WHERE kind = ? ORDER BY cluster",
                                                   (kind,))]


def decode(row: sqlite3.Row) -> dict:
    run = dict(row)
    for key in JSON_COLUMNS:
        if run.get(key) is not None:
            run[key] = json.loads(run[key])
    run["final"] = bool(run["final"])
    return run


def gpu_hours(run: dict, now: float | None = None) -> float:
    """GPUs x elapsed, summed over every attempt (a running one until now)."""
    now = time.time() if now is None else now
    total = 0.0
    for attempt in run.get("attempts", []):
        if attempt.get("start") is None:
            continue
        gpus = attempt.get("gpus") or (run.get("nodes") or 1) * (run.get("gpus_per_node") or 1)
        total += gpus * max(0.0, (attempt.get("end") or now) - attempt["start"]) / 3600
    return total
