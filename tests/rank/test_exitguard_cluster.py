"""The exit guard (issue 36, part 4) with real multi-process JAX, on the local backend and the dev
cluster, from every entry point: an unmodified script (`hpcjax submit`) on both, a Trainer and an
@remote function on the dev cluster (tests/containers/test_containers_cluster.py: in a container). The ~150 s stall the issue saw at exit did not happen by itself here (in 13
runs of the demo last session, and 10 more in the first test below each CI run), so the stall
is a stand-in: JAX's own shutdown delayed by 600 s in the program (STALL_S, see
tests/data/exit_stall_program.py). Without the guard each such job would run into its time limit."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from datetime import datetime

import pytest

import hpcjax
from conftest import DATA_DIR
from hpcjax.job.spec import JobSpec, Layout
from hpcjax.launch import submit

PROGRAM = str(DATA_DIR / "exit_stall_program.py")
CUT = "JAX's distributed shutdown had not finished"
LAST_LINE = re.compile(r"last line at ([0-9.]+): process (\d+) of (\d+)")


def stalls_at_exit() -> int:
    """A Trainer loop or @remote function whose process's JAX shutdown stalls for 600 s."""
    import jax
    from jax._src import distributed

    jax_shutdown = distributed.State.shutdown

    def stalled_shutdown(self):
        time.sleep(600)
        jax_shutdown(self)

    distributed.State.shutdown = stalled_shutdown
    return jax.process_count()


def job(tmp_path, backend, nodes, gpus, **env):
    env.setdefault("HPCJAX_EXIT_BOUND", 3)  # the default (10 s) is what bench/exit_stall.py runs with
    spec = JobSpec(command=(sys.executable, PROGRAM), layout=Layout(nodes=nodes, gpus_per_node=gpus),
                   output_dir=str(tmp_path / "logs"), env=tuple((k, str(v)) for k, v in env.items()),
                   time="00:05:00")
    return submit(spec, backend)


def sacct_end(job_id: str) -> float:
    """When SLURM says the job ended (seconds since the epoch; sacct gives local time, whole seconds)."""
    text = subprocess.run(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "End"], capture_output=True, text=True,
                          check=True).stdout.strip()
    return datetime.fromisoformat(text).timestamp() + 1  # the end of that second


def last_lines(run) -> dict[int, float]:
    found = {}
    for rank in run.rank_logs():
        match = LAST_LINE.search(run.logs(rank))
        assert match, run.logs(rank)
        found[int(match.group(2))] = float(match.group(1))
    return found


@pytest.mark.jax
def test_local_a_stalled_exit_ends_with_the_programs_status(tmp_path, hpcjax_home):
    run = job(tmp_path, "local", 1, 2, STALL_S=600, EXIT_CODE=3)  # exit 0: the Trainer and @remote below
    outcome = run.wait(progress=False)
    assert (outcome.state, outcome.exit_code) == ("FAILED", 3), outcome.report()
    assert sorted(last_lines(run)) == [0, 1]
    assert any(CUT in run.logs(rank) for rank in run.rank_logs())


@pytest.mark.jax
def test_local_an_unmodified_script_that_hangs_at_exit_is_named_after_the_floor(tmp_path, hpcjax_home):
    """No progress() anywhere: the exit is watched from the program's return, with the floor."""
    run = job(tmp_path, "local", 1, 2, HANG_AT_EXIT=1, HPCJAX_HANG_FLOOR=4, HPCJAX_HANG_CEILING=60)
    outcome = run.wait(progress=False)
    assert (outcome.state, outcome.exit_code) == ("FAILED", 124), outcome.report()
    assert outcome.cause.cause == "hang" and "every rank had finished its program, then hung at exit" in \
        outcome.cause.evidence, outcome.report()
    assert sorted(last_lines(run)) == [0, 1]
    assert any("its program returned" in run.logs(rank) and "it hangs at exit" in run.logs(rank)
               for rank in run.rank_logs())


def test_cluster_a_trainer_and_a_remote_function_end_despite_a_stalled_exit(tmp_path, slurm_cluster, hpcjax_home,
                                                                            shared_storage, monkeypatch):
    """The Python API's worker (hpcjax's runtime installs the guard): a Trainer, then an @remote
    function, 2 nodes x 1 GPU, each process's JAX shutdown stalled."""
    monkeypatch.setenv("HPCJAX_EXIT_BOUND", "3")  # the job's environment is the caller's
    scaling = hpcjax.ScalingConfig(nodes=2, gpus_per_node=1, time="00:05:00")
    result = hpcjax.Trainer(stalls_at_exit, scaling_config=scaling, run_config=hpcjax.RunConfig(
        storage_path=str(shared_storage), name="stall", backend="slurm")).fit()
    assert result.error is None, result.error
    logs = list((shared_storage / "stall" / "logs").glob("*-rank*.log"))
    assert len(logs) == 2 and all(CUT in log.read_text() for log in logs)
    remote = hpcjax.remote(nodes=2, gpus_per_node=1, backend="slurm", storage_path=str(shared_storage),
                           time="00:05:00")(stalls_at_exit)
    assert remote() == 2


def test_cluster_the_demo_ends_within_seconds_of_its_last_line_ten_times(tmp_path, slurm_cluster, hpcjax_home):
    """The issue's test: the demo's shape, unmodified, 10 jobs (2 nodes x 1 GPU, so four run at
    once), every one COMPLETED with exit 0 and ended seconds after its last line: the stall seen was
    ~150 s, and JAX's heartbeat timeout (the bound of any wait for a lost process) is 100 s."""
    runs = [job(tmp_path, "slurm", 2, 1) for _ in range(10)]
    for run in runs:
        outcome = run.wait(progress=False)
        assert (outcome.state, outcome.exit_code) == ("COMPLETED", 0), outcome.report()
        lines = last_lines(run)
        assert sorted(lines) == [0, 1]
        ended = sacct_end(run.job_id)
        assert ended - max(lines.values()) < 60, (run.job_id, ended, lines)
        assert not any(CUT in run.logs(rank) for rank in run.rank_logs())


def test_cluster_a_stalled_exit_waits_for_a_process_still_working_then_ends(tmp_path, slurm_cluster, hpcjax_home):
    """Process 0 works 8 s after the others ended (its results): they wait for it at the guard's
    barrier, not cut; then every process's stalled shutdown is cut, and the job is COMPLETED."""
    run = job(tmp_path, "slurm", 2, 2, STALL_S=600, RANK0_WORK_S=8)
    outcome = run.wait(progress=False)
    assert (outcome.state, outcome.exit_code) == ("COMPLETED", 0), outcome.report()
    lines = last_lines(run)
    assert sorted(lines) == list(range(4))
    assert lines[0] - max(t for rank, t in lines.items() if rank) >= 7  # process 0 finished its work
    assert all(CUT in run.logs(rank) for rank in run.rank_logs())
