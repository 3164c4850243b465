"""The hang watch (issue 27, part 2): the adaptive timeout, a stuck process ending itself with
its stack, and on the local backend (real multi-process JAX on this CPU, a real collective
every step) a job whose rank 3 stops before step 12 ends by itself, naming rank 3 and showing
its stack apart from the others'. tests/launch/test_hang_cluster.py runs `hpcjax train` and a
Trainer on the dev cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import DATA_DIR, completed, run_hpcjax
from hpcjax.protocol import timeouts
from hpcjax.values.errors import ConfigError
from hpcjax.launch import submit
from hpcjax.job.spec import JobSpec, Layout
from hpcjax.protocol.timeouts import HangSettings

PROGRAM = str(DATA_DIR / "hang_program.py")  # the modes are described there
FAST = {"HPCJAX_HANG_FLOOR": "4", "HPCJAX_HANG_CEILING": "60"}


@pytest.mark.parametrize("intervals, longest, expected", [
    (0, 0.0, 3600.0),  # nothing seen yet: the ceiling (the first interval holds the compile)
    (3, 0.1, 3600.0),  # still warming up
    (4, 0.1, 300.0),  # fast steps: the floor
    (4, 100.0, 500.0),  # 5 x the longest interval
    (50, 500.0, 2500.0),
    (50, 1000.0, 3600.0),  # never above the ceiling...
    (50, 2400.0, 4800.0),  # ...unless the job has taken such an interval in health: twice it
    (3, 2400.0, 4800.0),
])
def test_the_timeout_is_a_multiple_of_the_longest_interval_within_floor_and_ceiling(intervals, longest, expected):
    assert HangSettings().timeout(intervals, longest) == expected


def test_the_knobs_and_the_older_fixed_timeout():
    assert HangSettings.from_env({"HPCJAX_HANG_FLOOR": "20", "HPCJAX_HANG_FACTOR": "3"}).timeout(9, 10.0) == 30
    fixed = HangSettings.from_env({"HPCJAX_STEP_TIMEOUT": "90"})
    assert fixed.timeout(0, 0) == fixed.timeout(20, 1.0) == fixed.timeout(20, 40.0) == 90
    assert HangSettings.from_env({"HPCJAX_HANG_CEILING": "0"}).off
    assert HangSettings.from_env({}).nccl_timeout_s == 3600 + 4 * timeouts.GRACE_S
    assert HangSettings.from_env({"HPCJAX_HANG_CEILING": "0"}).nccl_timeout_s is None


@pytest.mark.parametrize("env, words", [
    ({"HPCJAX_HANG_FLOOR": "ten"}, "HPCJAX_HANG_FLOOR='ten' is not a number of at least 1"),
    ({"HPCJAX_HANG_FACTOR": "0.5"}, "HPCJAX_HANG_FACTOR='0.5' is not a number of at least 1"),
    ({"HPCJAX_HANG_CEILING": "nan"}, "HPCJAX_HANG_CEILING='nan'"),
    ({"HPCJAX_HANG_CEILING": "10"}, "HPCJAX_HANG_CEILING=10 is below HPCJAX_HANG_FLOOR=300"),
    ({"HPCJAX_STEP_TIMEOUT": "-1"}, "HPCJAX_STEP_TIMEOUT='-1'"),
])
def test_a_bad_knob_is_refused_on_the_rank_and_before_submitting(env, words, tmp_path):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        HangSettings.from_env(env)
    [(key, value)] = env.items()
    done = run_hpcjax("render", "-o", str(tmp_path / "job.sh"), "--env", f"{key}={value}", "--", "python", "t.py")
    assert done.returncode == 2 and words in done.stderr and "hint:" in done.stderr
    assert not (tmp_path / "job.sh").exists()


def start_alone(program: str, env: dict, tmp_path) -> subprocess.Popen:
    """The program as rank 2 of a job of 3 whose ranks 0 and 1 have already left their stacks (so
    the first rank to see the hang does not wait its grace period for them)."""
    tmp_path.mkdir(exist_ok=True)
    for rank in (0, 1):
        (tmp_path / f"77-rank{rank}.hang.json").write_text("{}\n")
    return subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env, "SLURM_JOB_ID": "77", "SLURM_PROCID": "2", "SLURM_NTASKS": "3",
                                 "HPCJAX_LOG_DIR": str(tmp_path)})


STEPS = "import time\nfrom hpcjax.rank import hold, progress\nfrom hpcjax.rank.watch import hangwatch\n" \
        "for s in range(10):\n    progress(s)\n    time.sleep(0.05)\n"
# Three processes that each outlast the floor (1 s) and its poll: a stall, a pause inside hold(), the
# time after close(). They are started at once, by the first test of the module that needs them.
STALLS = {"stall": "def stuck_in_a_collective():\n    time.sleep(60)\nstuck_in_a_collective()\n",
          "hold": "with hold():\n    time.sleep(1.6)\nprogress(10)\ntime.sleep(0.05)\nprogress(11)\nprint('done')\n",
          "close": "hangwatch.close()\ntime.sleep(1.6)\nprint('done')\n"}


@pytest.fixture(scope="module")
def stalls(tmp_path_factory):
    root = tmp_path_factory.mktemp("stalls")
    started = time.monotonic()
    procs = {name: start_alone(STEPS + body, {"HPCJAX_HANG_FLOOR": "1", "HPCJAX_HANG_CEILING": "30"}, root / name)
             for name, body in STALLS.items()}
    yield {name: (completed(proc, 60), root / name, time.monotonic() - started) for name, proc in procs.items()}


def test_a_process_whose_progress_stops_ends_itself_and_leaves_its_stack(stalls):
    done, logs, seconds = stalls["stall"]
    assert done.returncode == 124, done.stderr
    assert seconds < 30  # ended by the adaptive timeout (1 s), not the ceiling
    assert "process 2 on" in done.stderr and "no progress for 1 s at step 9" in done.stderr
    assert "in stuck_in_a_collective" in done.stderr and "hang-watch" not in done.stderr
    marker = json.loads((logs / "77-hang").read_text())
    assert marker["rank"] == 2 and marker["ranks"] == 3
    state = json.loads((logs / "77-rank2.hang.json").read_text())
    assert state["step"] == 9 and state["saw_hang"] and state["progress_calls"] == 10
    assert state["threads"][0]["thread_name"] == "MainThread"
    assert state["threads"][0]["frames"][0]["name"] == "stuck_in_a_collective"


@pytest.mark.parametrize("name", ["hold", "close"])
def test_a_pause_inside_hold_and_the_time_after_close_are_not_watched(stalls, name):
    done, logs, _ = stalls[name]
    assert done.returncode == 0 and done.stdout == "done\n", done.stderr
    assert not (logs / "77-hang").exists()


def test_the_rank_that_saw_the_hang_names_the_held_ranks_node_not_its_own(tmp_path):
    """Stop 60's CI: rank 0, waiting on node1, saw the hang first, and the attempt's record named node1.
    Its watch now judges every rank's answer before it ends the job: the held rank is rank 3, on node2."""
    from hpcjax.rank.watch.hangwatch import Watch

    for rank, step in enumerate((12, 12, 12, 11)):
        answer = {"rank": rank, "host": f"node{1 + rank // 2}", "step": step, "threads": []}
        (tmp_path / f"77-rank{rank}.hang.json").write_text(json.dumps(answer) + "\n")
    environ = {"SLURM_JOB_ID": "77", "SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURMD_NODENAME": "node1",
               "HPCJAX_LOG_DIR": str(tmp_path)}
    Watch(HangSettings.from_env({}), environ)._write_blame()
    assert (tmp_path / "77-hang-nodes").read_text() == "node2\n"
    # rank 3 held Python's lock in native code (it could not answer), or its file was cut off: it is
    # held as the one that did not answer, on the node the job's layout placed it
    (tmp_path / "77-rank3.hang.json").write_text('{"rank": 3, "host": "no')
    layout = {"HPCJAX_NODES": "2", "HPCJAX_GPUS_PER_NODE": "2", "HPCJAX_GPUS_PER_PROCESS": "1"}
    Watch(HangSettings.from_env({}), {**environ, **layout, "SLURM_STEP_NODELIST": "node[1-2]"})._write_blame()
    assert (tmp_path / "77-hang-nodes").read_text() == "node2\n"
    Watch(HangSettings.from_env({}), environ)._write_blame()  # no layout to place it: no node to name
    assert (tmp_path / "77-hang-nodes").read_text() == "\n"
    assert sorted(p.name for p in tmp_path.iterdir())[-1] == "77-rank3.hang.json"  # no partial file left


def local_job(tmp_path, mode: str):
    spec = JobSpec(command=(sys.executable, PROGRAM, mode), layout=Layout(nodes=2, gpus_per_node=2),
                   output_dir=str(tmp_path / "logs"), env=tuple(FAST.items()), time="00:05:00")
    started = time.monotonic()
    run = submit(spec, "local")
    outcome = run.wait(progress=False)
    return run, outcome, time.monotonic() - started


@pytest.mark.jax
def test_a_rank_that_does_not_reach_the_step_the_others_reached_is_named_with_its_stack(tmp_path, hpcjax_home):
    run, outcome, seconds = local_job(tmp_path, "behind")
    assert outcome.state == "FAILED" and outcome.exit_code == 124, outcome.report()
    assert seconds < 60, outcome.report()  # steps of 0.2 s: the timeout is the floor (4 s), then the stacks
    [held] = outcome.failed
    assert (held.rank, held.host) == (3, "local1")
    assert "hung: did not reach step 12, which rank(s) 0-2 reached (rank 3 at step 11)" in held.reason
    assert "load_next_batch" in held.reason
    # the rank that saw the hang judged it the same way before it ended the job (its verdict, for SLURM's record)
    assert (tmp_path / "logs" / f"{run.job_id}-hang-nodes").read_text() == "local1\n"
    assert outcome.stopped == (0, 1, 2) and outcome.stopped_by == "hpcjax's hang watch"
    assert outcome.cause.cause == "hang"
    report = outcome.report()
    # the grouped stacks: rank 3 (the sleep) apart from, and before, the others (the collective)
    assert report.index("ranks 3 (local1): load_next_batch") < report.index("ranks 0-2 (local0, local1): ")
    assert "all_reduce" in report.split("ranks 0-2 (local0, local1): ")[1]
    status = run_hpcjax("status", run.job_id, env={"HPCJAX_HOME": str(hpcjax_home)})
    assert "likely cause: hang" in status.stdout + status.stderr and "rank 3 on local1" in status.stdout + status.stderr


@pytest.mark.jax
def test_a_rank_that_aborts_once_the_hang_is_declared_leaves_the_hang_as_the_jobs_status(tmp_path, hpcjax_home):
    """Rank 2 aborts (134) once every rank has answered the hang watch, just before rank 3 ends (CI
    39's race on the dev cluster, here made certain): the job still ends 124, the hang's, rank 3 named."""
    _, outcome, _ = local_job(tmp_path, "behind-abort")
    assert (outcome.state, outcome.exit_code, outcome.cause.cause) == ("FAILED", 124, "hang"), outcome.report()
    assert [(f.rank, f.host) for f in outcome.failed] == [(3, "local1")], outcome.report()
    assert "task 2: Killed by signal SIGABRT" in outcome.report()  # rank 2's end is still said, as what followed


@pytest.mark.jax
@pytest.mark.waits  # a hang waited out: 6 CPU-s in 24 s alone
def test_a_rank_stuck_in_native_code_holding_pythons_lock_is_named_with_its_node(tmp_path, hpcjax_home):
    """Rank 3 cannot run its watch (it holds Python's lock in C): the others answer, and the rank that
    saw the hang names it, on the node the layout placed it, after waiting for it (GRACE_S)."""
    run, outcome, _ = local_job(tmp_path, "native")
    assert (outcome.state, outcome.exit_code, outcome.cause.cause) == ("FAILED", 124, "hang"), outcome.report()
    [held] = outcome.failed
    assert (held.rank, held.host) == (3, "local1") and "did not answer the hang watch" in held.reason
    assert (tmp_path / "logs" / f"{run.job_id}-hang-nodes").read_text() == "local1\n"


@pytest.mark.jax
def test_a_rank_stuck_at_the_same_step_is_named_by_its_stack(tmp_path, hpcjax_home):
    _, outcome, seconds = local_job(tmp_path, "same")
    assert outcome.state == "FAILED" and seconds < 60, outcome.report()
    [held] = outcome.failed
    assert held.rank == 3 and "stuck elsewhere than the others, which wait in" in held.reason
    assert "load_next_batch" in held.reason


@pytest.mark.jax
@pytest.mark.waits  # slow steps and a long save waited out: 7 CPU-s in 22 s alone
def test_a_healthy_job_with_slow_evaluations_and_a_long_save_is_not_ended(tmp_path, hpcjax_home):
    run, outcome, _ = local_job(tmp_path, "irregular")
    assert outcome.ok, outcome.report()
    assert all(f"finished {r}" in run.logs() for r in range(4))
    assert not (tmp_path / "logs" / f"{run.job_id}-hang").exists()


@pytest.mark.jax
@pytest.mark.waits  # a hang at exit waited out: 5 CPU-s in 15 s alone
def test_a_job_whose_ranks_all_finished_then_hung_at_exit_is_named_for_what_it_is(tmp_path, hpcjax_home):
    """Every rank did its work, then hung in an exit handler (JAX's distributed shutdown runs
    there): no rank is blamed, and the report says the work was done."""
    _, outcome, seconds = local_job(tmp_path, "exit")
    assert outcome.state == "FAILED" and outcome.failed == () and seconds < 60, outcome.report()
    assert outcome.cause.cause == "hang"
    assert "every rank had finished its program, then hung at exit" in outcome.cause.evidence
    assert "ranks 0-3 (local0, local1): shutdown_that_never_returns" in outcome.report()
