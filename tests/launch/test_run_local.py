"""The Run handle on the local backend, through the Python API as a caller holds it:
a passing job, a failing rank named with its node, a killed rank, cancel, logs of
one rank, and the same job found again from its id. tests/launch/test_run_cluster.py
runs the same on SLURM."""

import json
import signal
import sys
import time

import pytest

from conftest import assert_rank_3_of_4_failed_alone, run_hpcjax
from hpcjax.launch import attach, submit, submit_array
from hpcjax.job.spec import JobSpec, Layout

# Each rank says who it is; rank FAIL exits with code 3 (or kills itself) after a word.
RANK = ("import os, signal, sys, time; r = int(os.environ['SUBMITIT_LOCAL_GLOBALID']); "
        "print(f'hello from {r}', flush=True); mode = sys.argv[1]\n"
        "if mode == 'exit' and r == 3: print('rank three gives up', flush=True); sys.exit(3)\n"
        "if mode == 'kill' and r == 1: os.kill(os.getpid(), signal.SIGKILL)\n"
        "if mode != 'ok': time.sleep(60)\n")


def spec(tmp_path, mode, nodes=2, gpus=2):
    return JobSpec(command=(sys.executable, "-c", RANK, mode), layout=Layout(nodes=nodes, gpus_per_node=gpus),
                   output_dir=str(tmp_path / "logs"))


def test_a_passing_job(tmp_path, hpcjax_home):
    run = submit(spec(tmp_path, "ok"), "local")
    outcome = run.wait(progress=False)
    assert outcome.ok and outcome.exit_code == 0 and outcome.failed == ()
    assert run.state() == "COMPLETED"
    assert run.logs(rank=2) == "hello from 2\n"
    assert run.logs().splitlines() == ["[rank 0 local0] hello from 0", "[rank 1 local0] hello from 1",
                                       "[rank 2 local1] hello from 2", "[rank 3 local1] hello from 3"]
    again = attach(run.job_id)  # from its id alone, as `hpcjax status/logs` do
    assert again.backend == "local" and again.state() == "COMPLETED" and again.outcome.ok
    assert again.logs(rank=1, tail=1) == "hello from 1\n"
    status = run_hpcjax("status", run.job_id, "--json", env={"HPCJAX_HOME": str(hpcjax_home)})
    assert json.loads(status.stdout)["state"] == "COMPLETED", status.stderr


def test_a_failing_rank_is_named_with_its_node_and_the_others_stopped(tmp_path, hpcjax_home):
    outcome = submit(spec(tmp_path, "exit"), "local").wait(progress=False)
    assert_rank_3_of_4_failed_alone(outcome, "local1", "hpcjax")


def test_a_rank_killed_by_a_signal_is_reported_as_such(tmp_path, hpcjax_home):
    outcome = submit(spec(tmp_path, "kill"), "local").wait(progress=False)
    assert outcome.state == "FAILED" and outcome.exit_code == 137  # 128 + SIGKILL, as a shell says
    assert [(f.rank, f.host, f.reason) for f in outcome.failed] == [(1, "local0", "Killed by signal SIGKILL")]


def test_cancel_stops_every_rank_and_blames_none(tmp_path, hpcjax_home):
    run = submit(spec(tmp_path, "sleep", nodes=1), "local")
    deadline = time.monotonic() + 30
    while len(run.rank_logs()) < 2 or "hello" not in run.logs(rank=1):
        assert time.monotonic() < deadline, "ranks did not start"
        time.sleep(0.1)
    watcher = attach(run.job_id)  # as `hpcjax status` in another shell sees it
    assert watcher.state() == "RUNNING"
    run.cancel()
    assert run.state() == "CANCELLED" and watcher.state() == "CANCELLED"
    assert all(proc.poll() is not None for proc in run.procs.values())
    outcome = run.outcome
    assert outcome.failed == () and outcome.stopped == (0, 1) and outcome.exit_code != 0
    assert attach(run.job_id).state() == "CANCELLED"


def test_a_cancelled_local_job_cannot_be_cancelled_again(tmp_path, hpcjax_home):
    run = submit(spec(tmp_path, "ok", nodes=1), "local")
    run.wait(progress=False)
    result = run_hpcjax("cancel", run.job_id, env={"HPCJAX_HOME": str(hpcjax_home)})
    assert result.returncode == 1 and "has already ended (COMPLETED)" in result.stderr


def test_ctrl_c_on_a_local_submit_stops_its_processes_and_says_so(tmp_path, hpcjax_home):
    import subprocess
    import os
    proc = subprocess.Popen([sys.executable, "-m", "hpcjax", "submit", "--backend", "local", "--nodes", "1",
                             "--gpus-per-node", "2", "--output-dir", str(tmp_path / "logs"), "--",
                             sys.executable, "-c", RANK, "sleep"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "HPCJAX_HOME": str(hpcjax_home)})
    job_id = proc.stdout.readline().strip()
    deadline = time.monotonic() + 30
    while not all((tmp_path / "logs" / f"{job_id}-rank{r}.log").exists() and "hello" in
                  (tmp_path / "logs" / f"{job_id}-rank{r}.log").read_text() for r in (0, 1)):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert f"interrupted: stopped every process of local job {job_id}" in err
    record = json.loads((hpcjax_home / "jobs" / f"{job_id}.json").read_text())
    assert record["state"] == "CANCELLED"
    for pid in record["pids"]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_rank_gets_its_own_ctrl_c_although_the_submission_held_it(tmp_path, hpcjax_home):
    """The submission holds SIGINT while it starts the ranks (tests/launch/test_ctrl_c_once_submitted.py);
    a child keeps the signal mask it starts with, so without care a rank's own Ctrl-C handler would
    never run."""
    program = ("import os, signal, sys, time\n"
               "signal.signal(signal.SIGINT, lambda *_: (print('rank saw its Ctrl-C', flush=True), sys.exit(0)))\n"
               "os.kill(os.getpid(), signal.SIGINT)\n"
               "time.sleep(3)\nsys.exit('SIGINT stayed blocked')\n")
    run = submit(JobSpec(command=(sys.executable, "-c", program), layout=Layout(nodes=1, gpus_per_node=1),
                         output_dir=str(tmp_path / "logs")), "local")
    outcome = run.wait(progress=False)
    assert outcome.ok, run.logs()
    assert run.logs(rank=0) == "rank saw its Ctrl-C\n"


def test_ctrl_c_while_a_local_sweep_is_followed_stops_what_runs_and_what_waits_not_what_ended(tmp_path, hpcjax_home):
    """A sweep of three, one at a time: the first has ended, the second runs, the third waits for its
    turn. Ctrl-C stops the second and the third (a waiting one would start and be waited for at exit);
    the first keeps its own end."""
    import os
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "hpcjax", "submit", "--backend", "local", "--gpus-per-node", "1",
                             "--sweep", "S=0,60,61", "--max-parallel", "1", "--output-dir", str(tmp_path / "logs"),
                             "--", "sleep", "{S}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HPCJAX_HOME": str(hpcjax_home)})
    sweep = proc.stdout.readline().strip()
    deadline = time.monotonic() + 30
    while attach(f"{sweep}_1").state() != "RUNNING":
        assert time.monotonic() < deadline, "the second element did not start"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and f"interrupted: stopped every process of local job {sweep}" in err, err
    assert [attach(f"{sweep}_{i}").state() for i in range(3)] == ["COMPLETED", "CANCELLED", "CANCELLED"]


@pytest.mark.parametrize("array", [False, True])
def test_a_local_job_is_recorded_before_its_ranks_start(tmp_path, hpcjax_home, monkeypatch, array):
    """The record step comes before the backend's release (launch.steps): as its ranks are started,
    the job's record holds what was submitted, PENDING (before that order, a job that was not an
    array had only its claimed, empty record then); it ends COMPLETED."""
    from hpcjax.catalog import records
    from hpcjax.localjobs.processes import LocalRun

    seen, start = [], LocalRun.start
    monkeypatch.setattr(LocalRun, "start", lambda run: (seen.append(records.load(run.job_id)), start(run))[1])
    job = JobSpec(command=(sys.executable, "-c", "pass"), layout=Layout(nodes=1, gpus_per_node=2),
                  output_dir=str(tmp_path / "logs"), array=2 if array else 0)
    runs = submit_array(job, "local") if array else [submit(job, "local")]
    for run in runs:
        assert run.wait(progress=False).ok and attach(run.job_id).state() == "COMPLETED"
    assert len(seen) == len(runs)
    for record in seen:
        assert record is not None and record["kind"] == "command" and record["state"] == "PENDING", record
        assert record["command"] == [sys.executable, "-c", "pass"]
