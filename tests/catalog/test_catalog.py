"""The catalog of runs (issue 25, part 1): the SQLite database (WAL, waits for a lock, migrates,
rebuilds itself when deleted or damaged), sacct's attempts, and on the local backend `hpcjax
runs`, `runs show`, `--usage` and `relaunch` as a user types them. On the dev cluster, with
every kind of job: tests/catalog/test_catalog_cluster.py."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing

import pytest

from conftest import run_hpcjax
from hpcjax.catalog import db
from hpcjax.cli.runs import parse_since, usage
from hpcjax.values.errors import UsageError
from hpcjax.slurm.status import parse_attempts
from hpcjax.catalog import keep as runs

SACCT = """\
705|REQUEUED|2026-11-24T14:50:30|2026-11-24T14:50:39|node[1-2]|billing=4,cpu=4,gres/gpu=4,node=2|0:15
705|COMPLETED|2026-11-24T14:51:04|2026-11-24T14:51:13|node[1-2]|billing=4,cpu=4,gres/gpu=4,node=2|0:0
706_1|FAILED|2026-11-24T14:53:12|2026-11-24T14:53:21|node1|billing=2,cpu=2,gres/gpu=2,node=1|3:0
707|PENDING|Unknown|Unknown|None assigned||0:0
708|CANCELLED by 0|2026-11-24T14:55:02|2026-11-24T14:55:02|None assigned||0:0
"""


def test_sacct_rows_become_attempts_in_order_with_their_gpus():
    found = parse_attempts(SACCT)
    assert [(a["attempt"], a["state"], a["gpus"], a["end"] - a["start"]) for a in found["705"]] == \
        [(1, "REQUEUED", 4, 9.0), (2, "COMPLETED", 4, 9.0)]
    assert found["706_1"][0]["exit_code"] == 3 and found["706_1"][0]["nodelist"] == "node1"
    assert found["707"][0]["start"] is None and found["707"][0]["state"] == "PENDING"
    # cancelled while pending (its dependency failed): sacct gives it a Start, but it never ran
    assert found["708"][0]["start"] is None and found["708"][0]["state"] == "CANCELLED"


def test_gpu_hours_sum_every_attempt_and_a_running_one_until_now(hpcjax_home):
    with closing(db.connect()) as conn:
        db.save(conn, "705", job_id="705", backend="slurm", nodes=2, gpus_per_node=2, submitted=1.0, state="RUNNING")
        db.save_attempts(conn, "705", [{"attempt": 1, "start": 0.0, "end": 1800.0, "gpus": 4},
                                       {"attempt": 2, "start": 3600.0, "end": None}])
        [run] = db.runs(conn)
    assert run["attempts"][1]["gpus"] is None  # the layout's 2 x 2 then
    assert db.gpu_hours(run, now=3600.0 + 900) == pytest.approx(4 * 0.5 + 4 * 0.25)
    assert usage([{**run, "partition": "gpu"}], "day")[0]["partition"] == "gpu"


def test_filters_and_newest_first(hpcjax_home):
    with closing(db.connect()) as conn:
        for number, (name, state) in enumerate([("prep", "COMPLETED"), ("train-lr3", "FAILED"), ("train-lr4", "RUNNING")]):
            db.save(conn, str(100 + number), job_id=str(100 + number), name=name, state=state, submitted=1000.0 + number,
                    cluster="ibex" if number == 2 else "")
        assert [r["key"] for r in db.runs(conn)] == ["102", "101", "100"]
        assert [r["key"] for r in db.runs(conn, state="failed")] == ["101"]
        assert [r["key"] for r in db.runs(conn, name="train")] == ["102", "101"]
        assert [r["key"] for r in db.runs(conn, since=1001.0)] == ["102", "101"]
        assert [r["key"] for r in db.runs(conn, cluster="ibex")] == ["102"]


@pytest.mark.parametrize("text, ago", [("3d", 3 * 86400), ("12h", 12 * 3600), ("90m", 5400), ("2w", 14 * 86400)])
def test_since(text, ago):
    assert parse_since(text, now=10_000_000.0) == 10_000_000.0 - ago


def test_a_bad_since_is_refused():
    with pytest.raises(UsageError, match="--since 'yesterday' is neither a duration nor a date"):
        parse_since("yesterday")


def test_a_locked_catalog_is_waited_for(hpcjax_home):
    """Another process holds the write lock for 0.4 s: a save waits for it instead of failing."""
    db.connect().close()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\nconn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('BEGIN IMMEDIATE')\nconn.execute(\"INSERT INTO runs (key, job_id) VALUES ('1', '1')\")\n"
        "print('locked', flush=True)\ntime.sleep(0.4)\nconn.execute('COMMIT')\n"), str(db.path())],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "locked\n"
    started = time.monotonic()
    with closing(db.connect()) as writer:
        db.save(writer, "2", job_id="2", state="PENDING")
    assert time.monotonic() - started >= 0.2  # it waited for the lock
    assert holder.wait(timeout=30) == 0
    with closing(db.connect()) as conn:
        assert sorted(r["key"] for r in db.runs(conn)) == ["1", "2"]


def test_a_newer_catalog_is_refused_and_an_older_one_migrated(hpcjax_home):
    hpcjax_home.mkdir(parents=True)
    old = sqlite3.connect(db.path())
    old.execute("PRAGMA user_version=0")
    old.close()
    with closing(db.connect()) as conn:  # version 0 (empty): every migration runs
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(db.MIGRATIONS)
        conn.execute(f"PRAGMA user_version={len(db.MIGRATIONS) + 1}")
    with pytest.raises(UsageError, match="is of a newer hpcjax"):
        db.connect()


def local_job(cwd, *options):
    done = run_hpcjax("submit", "--backend", "local", "--nodes", "1", "--gpus-per-node", "2", *options, "--",
                      sys.executable, "-c", "print('hi')", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[0]


def listed(cwd, *options) -> list[dict]:
    done = run_hpcjax("runs", "--json", *options, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_jobs_are_listed_shown_totalled_and_survive_a_deleted_or_damaged_catalog(tmp_path, hpcjax_home):
    first, second = local_job(tmp_path, "-J", "prep"), local_job(tmp_path, "-J", "train")
    rows = listed(tmp_path)
    assert [(r["key"], r["name"], r["state"], len(r["attempts"])) for r in rows] == \
        [(second, "train", "COMPLETED", 1), (first, "prep", "COMPLETED", 1)]
    assert rows[0]["gpu_hours"] > 0 and rows[0]["command"][-1] == "print('hi')"
    text = run_hpcjax("runs", cwd=tmp_path).stdout
    assert text.splitlines()[0].split() == ["ID", "NAME", "STATE", "LAYOUT", "SUBMITTED", "DURATION", "GPU-H",
                                            "ATTEMPTS", "LAST"]
    assert f"{first}  prep" in text and "1x2/1" in text
    shown = run_hpcjax("runs", "show", first, cwd=tmp_path)
    assert f"run {first} (prep, command, local): COMPLETED" in shown.stdout and "attempt 1: COMPLETED" in shown.stdout
    usage_rows = json.loads(run_hpcjax("runs", "--usage", "week", "--json", cwd=tmp_path).stdout)
    assert usage_rows[0]["runs"] == 2 and usage_rows[0]["gpu_hours"] == pytest.approx(sum(r["gpu_hours"] for r in rows),
                                                                                         rel=0.01)
    db.path().unlink()  # deleted: made again from the job records
    again = run_hpcjax("runs", "--json", cwd=tmp_path)
    assert "made the catalog of runs" in again.stderr
    assert [r["key"] for r in json.loads(again.stdout)] == [second, first]
    db.path().write_bytes(b"this is not a database" * 100)  # damaged: moved aside, rebuilt, said
    for suffix in ("-wal", "-shm"):
        db.path().with_name(db.path().name + suffix).unlink(missing_ok=True)
    damaged = run_hpcjax("runs", "--json", cwd=tmp_path)
    assert damaged.returncode == 0 and "was damaged" in damaged.stderr, damaged.stderr
    assert [r["key"] for r in json.loads(damaged.stdout)] == [second, first]
    assert list(hpcjax_home.glob("catalog.sqlite.damaged-*"))
    missing = run_hpcjax("runs", "show", "999", cwd=tmp_path)
    assert missing.returncode == 2 and "no run '999' in the catalog" in missing.stderr


def test_two_processes_submitting_at_once_both_land(tmp_path, hpcjax_home):
    argv = [sys.executable, "-m", "hpcjax", "submit", "--backend", "local", "--", sys.executable, "-c", "print(1)"]
    procs = [subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    ids = {p.communicate(timeout=120)[0].split()[0] for p in procs}
    assert len(ids) == 2
    assert {r["key"] for r in listed(tmp_path)} == ids


def test_relaunch_replaces_only_the_options_given(tmp_path, hpcjax_home):
    first = local_job(tmp_path, "-J", "again", "--env", "A=1")
    done = run_hpcjax("relaunch", first, "--nodes", "2", "--env", "B=2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    new = done.stdout.split()[0]
    assert f"relaunching run {first} with env, nodes changed" in done.stderr
    rows = {r["key"]: r for r in listed(tmp_path)}
    assert rows[new]["name"] == "again" and rows[new]["nodes"] == 2 and rows[new]["command"] == rows[first]["command"]
    assert rows[new]["options"]["env"] == {"A": "1", "B": "2"}
    assert kind_of_cases()


def kind_of_cases() -> bool:
    return [runs.kind_of(c) for c in (["python", "-m", "hpcjax", "check", "all"], ["hpcjax", "train", "--steps", "9"],
                                      ["python", "-u", "-m", "hpcjax.api.worker", "d", "0"], ["python", "t.py"])] == \
        ["smoke", "train", "api", "command"]


@pytest.mark.jax
def test_relaunch_of_a_training_run_gives_the_same_losses(tmp_path, hpcjax_home):
    from support import MODEL

    def losses(run_dir):
        return [json.loads(line)["loss"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
                if '"loss"' in line]

    command = [sys.executable, "-m", "hpcjax", "train", "--steps", "5", "--run-dir", "run", *MODEL]
    first = run_hpcjax("submit", "--backend", "local", "--nodes", "1", "--gpus-per-node", "1", "--", *command,
                       cwd=tmp_path, timeout=600)
    assert first.returncode == 0, first.stderr
    before = losses(tmp_path / "run")
    os.rename(tmp_path / "run", tmp_path / "first-run")  # the relaunch starts afresh, not from its checkpoint
    again = run_hpcjax("relaunch", first.stdout.split()[0], cwd=tmp_path, timeout=600)
    assert again.returncode == 0, again.stderr
    assert losses(tmp_path / "run") == before and len(before) == 5
    [row] = [r for r in listed(tmp_path) if r["key"] == again.stdout.split()[0]]
    assert row["kind"] == "train" and row["metrics"]["loss"] == before[-1]


def test_a_run_slurm_has_forgotten_stays_as_last_seen(tmp_path, hpcjax_home):
    """A finished run whose job SLURM no longer knows (MinJobAge, accounting purged) is still
    listed with its state and attempts; asking SLURM about it changes nothing."""
    with closing(db.connect()) as conn:
        db.save(conn, "999991", job_id="999991", backend="slurm", name="old", state="COMPLETED", final=True,
                submitted=1000.0, nodes=1, gpus_per_node=4)
        db.save_attempts(conn, "999991", [{"attempt": 1, "start": 1000.0, "end": 4600.0, "gpus": 4}])
    [row] = listed(tmp_path)
    assert (row["key"], row["state"], row["gpu_hours"]) == ("999991", "COMPLETED", pytest.approx(4.0))


def test_an_empty_a_foreign_and_a_read_only_catalog_still_list_every_run(tmp_path, hpcjax_home):
    """Issue 34: a zero-byte catalog said "no runs yet", another program's database gave a traceback,
    and a read-only one sqlite3.OperationalError; the job records are the source, so each lists them."""
    first = local_job(tmp_path, "-J", "one")
    for suffix in ("", "-wal", "-shm"):
        db.path().with_name(db.path().name + suffix).unlink(missing_ok=True)
    db.path().write_bytes(b"")  # zero bytes: a new catalog, filled from the records
    assert [r["key"] for r in listed(tmp_path)] == [first]
    db.path().unlink()
    with closing(sqlite3.connect(db.path())) as other:  # another program's database of the same name
        other.execute("CREATE TABLE runs (id INTEGER, who TEXT)")
        other.execute("INSERT INTO runs VALUES (1, 'not hpcjax')")
        other.commit()
    foreign = run_hpcjax("runs", "--json", cwd=tmp_path)
    assert foreign.returncode == 0 and "was damaged" in foreign.stderr, foreign.stderr
    assert [r["key"] for r in json.loads(foreign.stdout)] == [first]
    with closing(sqlite3.connect(db.path())) as ours:  # ours, at the current version, a column gone by hand
        ours.execute("ALTER TABLE runs DROP COLUMN report")
        ours.commit()
    edited = run_hpcjax("runs", "--json", cwd=tmp_path)
    assert edited.returncode == 0 and "lacks report" in edited.stderr, edited.stderr
    # Read-only: root writes through file modes, so the file is made immutable (ext4's +i) instead.
    made_immutable = subprocess.run(["chattr", "+i", str(db.path())], capture_output=True).returncode == 0
    if not made_immutable:  # a filesystem without attributes: a directory where the file should be
        for suffix in ("", "-wal", "-shm"):
            db.path().with_name(db.path().name + suffix).unlink(missing_ok=True)
        db.path().mkdir()
    try:
        unwritable = run_hpcjax("runs", "--json", cwd=tmp_path)
        assert unwritable.returncode == 0, unwritable.stderr
        assert "cannot be written" in unwritable.stderr and "reading the job records instead" in unwritable.stderr
        assert [r["key"] for r in json.loads(unwritable.stdout)] == [first]
    finally:
        if made_immutable:
            subprocess.run(["chattr", "-i", str(db.path())], check=True)


def test_an_unwritable_hpcjax_home_refuses_the_job_before_it_is_submitted(tmp_path):
    """Issue 34: the job was submitted, then a traceback, and no record: the job was lost to hpcjax."""
    (tmp_path / "a-file").write_text("")
    for home in (tmp_path / "a-file" / "home", tmp_path / "a-file"):
        done = run_hpcjax("submit", "--backend", "local", "--", sys.executable, "-c", "open('ran', 'w')",
                          cwd=tmp_path, env={"HPCJAX_HOME": str(home)})
        assert done.returncode == 2 and "hpcjax cannot write its job records in" in done.stderr, done.stderr
        assert "HPCJAX_HOME" in done.stderr and "Traceback" not in done.stderr
        assert not (tmp_path / "ran").exists() and not (tmp_path / "hpcjax-logs").exists()
    with pytest.raises(UsageError, match="cannot write its job records"):
        import hpcjax

        os.environ["HPCJAX_HOME"] = str(tmp_path / "a-file" / "home")
        try:
            hpcjax.remote(backend="local", storage_path=str(tmp_path / "calls"))(abs).submit(-1)
        finally:
            del os.environ["HPCJAX_HOME"]
    assert not (tmp_path / "calls").exists()
