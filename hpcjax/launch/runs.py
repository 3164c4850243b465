"""The catalog of runs, login side: what a submission records (the job record and its row in
hpcjax.catalog.db), and the refresh that brings unfinished runs up to date: SLURM's runs from
one `sacct --duplicates` per cluster for all of them (each requeued attempt is a row, with its
start, end, nodes and GPUs), the local backend's from their records, and every run's last
metrics from its run directory. What SLURM has forgotten stays as last seen.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from contextlib import closing
from datetime import datetime
from pathlib import Path

from hpcjax.catalog import db, records
from hpcjax.contract import FINISHED_STATES
from hpcjax.errors import HpcjaxError
from hpcjax.rundir import RunDir, run_dir_argument

SACCT_ATTEMPTS = ("JobID", "State", "Start", "End", "NodeList", "AllocTRES", "ExitCode")
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


def submission(spec, element: int | None = None, array_job: str = "", **extra) -> dict:
    """The fields a job record keeps of a submission (of one element of an array), for the catalog
    and `hpcjax relaunch`: a sweep's element keeps its own command and values, and the sweep's id."""
    from hpcjax.launch import profiles

    command = spec.array_commands[element] if element is not None and spec.array_commands else spec.command
    fields = {"name": spec.job_name, "kind": kind_of(command), "command": list(command),
              "options": profiles.values_of(spec), "partition": spec.partition, "submitted": time.time()}
    if element is not None and spec.sweep:
        fields.update(sweep=array_job, sweep_values=dict(spec.sweep[element]))
    if spec.after:
        fields["after"] = [f"{job}:{when}" for job, when in spec.after]
    named = run_dir_of(spec, command)
    if named:  # where its metrics are (a job run here; the SLURM backend names it for the cluster)
        fields["run_dir"] = str(Path.cwd() / named)
    return {**fields, **extra}


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
        print(f"hpcjax: warning: job {key} was submitted, but its record could not be written in "
              f"{records.records_dir()} ({error.strerror}): `hpcjax status/logs/cancel` find a SLURM job by its "
              "id alone, `runs` and `relaunch` will not know it", file=sys.stderr)
        return
    _catalog(key, records.load(key) or fields)


def update(key: str, **changes) -> None:
    records.update(key, **changes)
    _catalog(key, records.load(key) or changes)


def _catalog(key: str, fields: dict) -> None:
    try:
        with closing(db.connect()) as conn:
            db.save(conn, key, **db.from_record({"job_id": key.split("@")[0], **fields}, time.time()))
            if fields.get("started"):
                db.save_attempts(conn, key, [{"attempt": 1, "start": fields["started"], "end": fields.get("ended"),
                                              "state": fields.get("state"), "nodelist": fields.get("nodelist"),
                                              "gpus": _gpus(fields.get("layout") or {})}])
    except (sqlite3.Error, OSError) as error:
        print(f"hpcjax: note: the catalog of runs was not updated for job {key}: {error}", file=sys.stderr)


def ended(key: str, outcome) -> None:
    """A followed job's end, as its Run saw it, into its catalog row (if it has one)."""
    try:
        with closing(db.connect()) as conn:
            db.save(conn, key, state=outcome.state, final=True, exit_code=outcome.exit_code,
                    report=None if outcome.ok else outcome.report())
    except (sqlite3.Error, OSError) as error:
        print(f"hpcjax: note: the catalog of runs was not updated for job {key}: {error}", file=sys.stderr)


def _gpus(layout: dict) -> int:
    return (layout.get("nodes") or 1) * (layout.get("gpus_per_node") or 1)


def refresh(conn: sqlite3.Connection, rows: list[dict]) -> None:
    """Bring the given runs up to date: SLURM's unfinished ones by cluster, local ones from their
    records, and every run's last metrics."""
    by_cluster: dict[str, list[dict]] = {}
    recent = time.time() - ATTEMPTS_FOR_S
    for row in rows:
        settled = row["final"] and ((row["attempts"] and all(a.get("end") for a in row["attempts"]))
                                    or (row["submitted"] or 0) < recent)
        if row["backend"] == "slurm" and not settled:  # its attempts too, once accounting has them
            by_cluster.setdefault(row["cluster"] or "", []).append(row)
        elif row["backend"] == "local" and not row["final"]:
            fields = records.load(row["key"])
            if fields:
                _catalog(row["key"], fields)
    for cluster, group in by_cluster.items():
        try:
            _refresh_slurm(conn, cluster, group)
        except HpcjaxError as error:
            print(f"hpcjax: note: could not ask SLURM{' on ' + cluster if cluster else ''} about "
                  f"{len(group)} run(s): {error.message}; shown as last seen", file=sys.stderr)
    for row in rows:
        if row.get("run_dir") and not row["cluster"]:
            metrics = last_metrics(Path(row["run_dir"]))
            if metrics is not None and metrics != row.get("metrics"):
                db.save(conn, row["key"], metrics=metrics)


def _refresh_slurm(conn: sqlite3.Connection, cluster: str, group: list[dict]) -> None:
    from hpcjax.launch import attach
    from hpcjax.launch.slurmctl import slurm_on

    slurm = attach(group[0]["job_id"], _cluster_of(group[0])).slurm if cluster else slurm_on()
    ids = sorted({row["job_id"].split("_")[0] for row in group})
    text = slurm.run(["sacct", "-X", "--duplicates", "-P", "-n", "-j", ",".join(ids),
                      "-o", ",".join(SACCT_ATTEMPTS)])
    attempts = parse_attempts(text)
    for row in group:
        found = attempts.get(row["job_id"])
        if not found:
            continue  # not in accounting yet (just submitted), or SLURM forgot it: as last seen
        state = found[-1]["state"]
        db.save(conn, row["key"], state=state, final=state in FINISHED_STATES,
                exit_code=found[-1]["exit_code"])
        db.save_attempts(conn, row["key"], found)


def _cluster_of(row: dict):
    from hpcjax.launch.profiles import cluster_from_record

    return cluster_from_record((records.load(row["key"]) or {}).get("cluster"))


def parse_attempts(text: str) -> dict[str, list[dict]]:
    """sacct --duplicates rows -> job id -> its attempts in order (a requeued job has one row each)."""
    out: dict[str, list[dict]] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != len(SACCT_ATTEMPTS):
            continue
        job, state, start, end, nodelist, tres, exit_code = parts
        gpus = next((int(p.split("=")[1]) for p in tres.split(",") if p.startswith("gres/gpu=")
                     and p.split("=")[1].isdigit()), None)
        # A job cancelled while pending (a dependency that failed) has a Start equal to its End
        # in sacct, and no nodes: it never started.
        never_ran = nodelist in ("", "None assigned")
        out.setdefault(job, []).append({"state": state.split()[0] if state else "UNKNOWN",
                                        "start": None if never_ran else _epoch(start),
                                        "end": _epoch(end), "nodelist": nodelist, "gpus": gpus,
                                        "exit_code": int(exit_code.split(":")[0]) if exit_code[:1].isdigit() else None})
    for rows in out.values():
        rows.sort(key=lambda a: a["start"] if a["start"] is not None else float("inf"))
        for number, attempt in enumerate(rows, 1):
            attempt["attempt"] = number
    return out


def _epoch(text: str) -> float | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp()
    except ValueError:  # Unknown, None: not started or not ended
        return None


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
            try:
                value = json.loads(line)
            except ValueError:
                continue
            value = value.get("metrics", value) if isinstance(value, dict) else None
            if isinstance(value, dict):
                found = {**{k: v for k, v in value.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
                         **found}
                if "loss" in value:
                    break
        if set(found) - {"step"}:
            return found
    return None
