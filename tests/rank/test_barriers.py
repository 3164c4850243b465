"""Before its first collective a program lines its processes up (rank.start.barriers.line_up): JAX's
CPU collectives give a process 30 s to join a new communicator, and processes that compiled at
different speeds arrive further apart than that. And a process that raised ends at once,
instead of waiting in JAX's shutdown barrier for processes that wait in a collective for it.
Real multi-process JAX on this machine (the local backend)."""

from __future__ import annotations

import json
import sys
from unittest import mock

import pytest

from conftest import DATA_DIR
from hpcjax import launch
from hpcjax.job.spec import JobSpec, Layout
from hpcjax.rank.start import barriers

pytestmark = pytest.mark.jax  # the unit tests patch JAX too

PROGRAM = DATA_DIR / "first_collective.py"


def run_job(tmp_path, *arguments: str):
    spec = JobSpec(command=(sys.executable, str(PROGRAM), *arguments), layout=Layout(nodes=1, gpus_per_node=2),
                   output_dir=str(tmp_path / "logs"), time="00:05:00")
    run = launch.submit(spec, "local")
    return run, run.wait(progress=False)


@pytest.mark.waits  # a 35 s sleep: 3 CPU-s in 36 s alone
def test_processes_35_s_apart_line_up_and_then_gather(tmp_path, hpcjax_home):
    # 35 s apart, gloo's first collective alone fails (DEADLINE_EXCEEDED after its 30 s)
    run, outcome = run_job(tmp_path, "line-up", "35")
    assert outcome.ok, outcome.report()
    rows = [json.loads(run.logs(rank=r).strip().splitlines()[-1]) for r in (0, 1)]
    assert [row["gathered"] for row in rows] == [[0, 1], [0, 1]]
    first, late = rows
    assert late["arrived"] - first["arrived"] > 30  # they really came far apart ...
    assert first["passed"] >= late["arrived"]  # ... and process 0 went on only once process 1 had come


def test_a_process_that_raises_ends_the_job_without_waiting_for_the_others(tmp_path, hpcjax_home):
    run, outcome = run_job(tmp_path, "raise")
    assert not outcome.ok
    assert [f.rank for f in outcome.failed] == [1], outcome.report()
    assert "ValueError: process 1 gives up before its first collective" in run.logs(rank=1)
    # process 0 was stopped while it waited, not ended by gloo's own timeout after 30 s
    assert "DEADLINE_EXCEEDED" not in run.logs(rank=0)


def test_each_call_of_a_name_is_a_barrier_of_its_own():
    client = mock.Mock()
    with mock.patch.object(barriers, "coordination_client", return_value=client), \
            mock.patch("jax.process_count", return_value=4), mock.patch.dict(barriers._passed, clear=True):
        barriers.line_up("state", timeout_s=7)
        barriers.line_up("state", timeout_s=7)
        barriers.line_up("first step", timeout_s=7)
    assert [c.args for c in client.wait_at_barrier.call_args_list] == [
        ("hpcjax/line-up/state/1", 7000), ("hpcjax/line-up/state/2", 7000), ("hpcjax/line-up/first step/1", 7000)]


def test_one_process_does_not_wait():
    with mock.patch.object(barriers, "coordination_client", return_value=None):
        barriers.line_up("anything")  # no client, no barrier, no error
