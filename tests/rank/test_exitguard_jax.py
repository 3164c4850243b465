"""The exit guard with real multi-process JAX on the local backend (issue 48): the usual script's
shape (tests/data/exit_stall_program.py: its last collective still in flight when it returns),
unmodified. Without the guard the local backend's 2 x 4 job of that shape sat 156-157 s at exit in
2 of 3 runs here (and bare `sbatch` + `srun` jobs on the dev cluster in 4 of 6: bench/exit_stall.py
measures both); with it, each must end within 20 s of its last line (taken from the last line,
not the start, so that 8 ranks starting on 2 cores beside the rest of the suite do not count
against the exit). And the job's exit status is the
one bare Python gives, every way a program ends. The dev cluster's runs are in
test_exitguard_cluster.py."""

from __future__ import annotations

import re
import sys
import time

import pytest

from conftest import DATA_DIR
from hpcjax.job.spec import JobSpec, Layout
from hpcjax.launch import submit
from test_exitguard import WAYS, assert_each_ends_as_bare_python

PROGRAM = str(DATA_DIR / "exit_stall_program.py")
STALL_BOUND_S = 20  # from the last line to the job's end; the stall it removes was ~150 s
LAST_LINE = re.compile(r"last line at ([0-9.]+): process \d+")

pytestmark = pytest.mark.jax


def job(tmp_path, nodes: int, gpus: int, **env):
    spec = JobSpec(command=(sys.executable, PROGRAM), layout=Layout(nodes=nodes, gpus_per_node=gpus),
                   output_dir=str(tmp_path / "logs"), env=tuple((k, str(v)) for k, v in env.items()),
                   time="00:05:00")
    return submit(spec, "local")


def test_the_usual_shape_ends_within_seconds_of_its_start(tmp_path, hpcjax_home):
    """2 nodes x 4 ranks per node, three jobs in a row."""
    for _ in range(3):
        run = job(tmp_path, 2, 4)
        outcome = run.wait(progress=False)
        ended = time.time()
        assert (outcome.state, outcome.exit_code) == ("COMPLETED", 0), outcome.report()
        lines = [float(LAST_LINE.search(run.logs(rank))[1]) for rank in run.rank_logs()]
        assert len(lines) == 8 and all("shape (256, 256)" in run.logs(rank) for rank in run.rank_logs())
        assert ended - max(lines) < STALL_BOUND_S, f"job {run.job_id} stalled at exit"


def test_the_jobs_exit_status_is_bare_pythons_every_way_a_program_ends(tmp_path, hpcjax_home):
    """Every process of a 2-process job ends the same way; three jobs side by side at a time. All nine
    at once (18 JAX processes starting together on 2 cores, beside the rest of the suite) once had a
    rank's slow first contact retried and refused by JAX's coordination service ("a different
    incarnation", a SIGABRT: CI 4 of 2026-12-06), a starved machine's doing, not the exit's."""
    for batch in (WAYS[:3], WAYS[3:6], WAYS[6:]):
        assert_each_ends_as_bare_python({how: job(tmp_path / how, 1, 2, END=how) for how in batch})


def test_an_unmodified_script_that_hangs_at_exit_is_named_after_the_floor(tmp_path, hpcjax_home):
    """No progress() anywhere: the exit is watched from the program's return, with the floor."""
    run = job(tmp_path, 1, 2, HANG_AT_EXIT=1, HPCJAX_HANG_FLOOR=4, HPCJAX_HANG_CEILING=60)
    outcome = run.wait(progress=False)
    assert (outcome.state, outcome.exit_code) == ("FAILED", 124), outcome.report()
    assert outcome.cause.cause == "hang" and "every rank had finished its program, then hung at exit" in \
        outcome.cause.evidence, outcome.report()
    assert any("its program returned" in run.logs(rank) and "it hangs at exit" in run.logs(rank)
               for rank in run.rank_logs())
