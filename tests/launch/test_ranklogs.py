"""Rank logs read as streams (launch.ranklogs, hosts.files): tails from the files' ends, the
first failure by a scan a chunk at a time, the same answers from this machine's files and
through the shell one-liners a login node runs over SSH (run here by a local host), and a
512-rank failure analysed from the tails of the ranks it needs only."""

from __future__ import annotations

import pytest

from hpcjax.hosts import files as files_module
from hpcjax.hosts.files import LocalFiles, RemoteFiles
from hpcjax.hosts.here import LocalHost
from hpcjax.follow import ranklogs
from hpcjax.follow.outcome import TaskEvent, analyze
from hpcjax.follow.ranklogs import RankLogs


LINES = [f"step {i}: loss {i / 7:.4f} " + "x" * (i % 90) + "\n" for i in range(5000)]


@pytest.fixture(params=["local", "through the login node's shell"])
def files(request):
    return LocalFiles() if request.param == "local" else RemoteFiles(LocalHost())


def test_tails_come_from_the_files_ends_and_equal_the_whole_files_tails(tmp_path, files, monkeypatch):
    monkeypatch.setattr(ranklogs, "TAIL_BYTES", 4096)  # so 5000 lines are far longer than the window
    (tmp_path / "0").write_text("".join(LINES))
    (tmp_path / "1").write_text("short\nno newline at the end")
    (tmp_path / "2").write_bytes(b"")
    logs = RankLogs(lambda r: tmp_path / str(r), files, clean=False)
    logs.fetch([0, 1, 2, 3])
    assert logs.tail(0, 10) == "".join(LINES[-10:])
    assert logs.tail(0, 3000) == "".join(LINES[-3000:])  # past the window: one pass keeping 3000 lines
    assert logs.tail(1, 1) == "no newline at the end" and logs.tail(1, None) == "short\nno newline at the end"
    assert logs.tail(2, 5) == "" and logs.tail(3, 5) == ""  # empty, and missing


def test_read_ends_new_and_chunks_agree_between_this_machine_and_the_shell(tmp_path, monkeypatch):
    monkeypatch.setattr(files_module, "CHUNK", 1000)
    data = "".join(LINES[:150]).encode() + bytes(range(256))  # ~10 chunks: text and every byte value
    (tmp_path / "log").write_bytes(data)
    paths = [str(tmp_path / "log"), str(tmp_path / "missing")]
    here, there = LocalFiles(), RemoteFiles(LocalHost())
    for size in (1, 999, 1000, len(data), len(data) + 5):
        assert here.read_ends(paths, size) == there.read_ends(paths, size) == {paths[0]: data[-size:], paths[1]: None}
    assert b"".join(here.read_chunks(paths[0])) == b"".join(there.read_chunks(paths[0])) == data
    assert max(len(c) for c in there.read_chunks(paths[0])) == 1000
    assert list(there.read_chunks(paths[1])) == [] == list(here.read_chunks(paths[1]))


def test_the_first_failure_is_found_by_a_scan_when_the_tail_shows_none(tmp_path, files, monkeypatch):
    monkeypatch.setattr(files_module, "CHUNK", 4096)
    text = "".join(LINES[:2000]) + "ValueError: the data set has no rows\n" + "".join(LINES[2000:])
    (tmp_path / "0").write_text(text)
    logs = RankLogs(lambda r: tmp_path / str(r), files)
    assert logs.first_failure(0) == "ValueError: the data set has no rows"
    (tmp_path / "1").write_text("".join(LINES))
    assert logs.first_failure(1) == ""


def test_one_failed_rank_of_512_is_named_from_a_few_tails(tmp_path, monkeypatch):
    log = tmp_path / "logs"
    log.mkdir()
    for rank in range(512):
        said = "RuntimeError: rank 300 cannot open its shard\n" if rank == 300 else "Terminated\n"
        (log / f"{rank}.log").write_text("".join(LINES[:50]) + said)
    read: list[str] = []
    real = LocalFiles.read_ends

    def counting(self, paths, size):
        read.extend(paths)
        return real(self, paths, size)

    monkeypatch.setattr(LocalFiles, "read_ends", counting)
    events = [TaskEvent((300,), "node38", "Exited with exit code 1", before_stop=True),
              TaskEvent(tuple(r for r in range(512) if r != 300), "node1", "Killed", before_stop=False)]
    outcome = analyze("77", "FAILED", events, lambda r: log / f"{r}.log")
    assert [f.rank for f in outcome.failed] == [300] and outcome.exit_code == 1
    assert "rank 300 cannot open its shard" in outcome.failed[0].log_tail
    assert outcome.causes[0].cause == "python exception" and "rank 300 log" in outcome.causes[0].evidence
    assert len(set(read)) == 1 + 16  # the failed rank, and 16 of the 511 srun stopped
