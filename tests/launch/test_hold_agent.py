"""The held allocation's agent (templates/hold-agent.sh.j2) and its queue (hpcjax.slurm.holds), with
real bash and no SLURM: the rendered hold script runs here with the variables sbatch would give it,
and plain scripts are queued in it. What they prove: jobs run one at a time in the order queued,
each in its own directory with its own name (HPCJAX_JOB_KEY) and log; a failing job never ends the
hold; a queued job can be withdrawn and a running one stopped; SIGTERM to the hold (its time limit,
a release) says so to the job that was running. The same with srun and real jobs inside a SLURM
allocation: tests/launch/test_holds_cluster.py."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hpcjax.protocol.contract import Layout
from hpcjax.hosts import this_machine
from hpcjax.job.spec import JobSpec
from hpcjax.slurm import holds
from hpcjax.slurm.script import render_sbatch


def wait_for(test, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = test()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.fixture
def agent(tmp_path):
    """The hold's script, started as sbatch would start it (job 77 on node1)."""
    logs = tmp_path / "logs"
    spec = JobSpec(command=("hpcjax-hold",), layout=Layout(nodes=2, gpus_per_node=4), output_dir=str(logs),
                   job_name="dev")
    script = tmp_path / "hold.sh"
    script.write_text(render_sbatch(spec, hold=True))
    # squeue's word on the hold's end time, a stand-in: what tmp_path/end says, else a day from now
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text(f'#!/bin/bash\ncat "{tmp_path}/end" 2>/dev/null || date -d tomorrow +%Y-%m-%dT%H:%M:%S\n')
    (bin_dir / "squeue").chmod(0o755)
    env = {**os.environ, "SLURM_JOB_ID": "77", "SLURMD_NODENAME": "node1", "SLURM_JOB_NODELIST": "node[1-2]",
           "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.Popen(["bash", str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    hold = holds.Hold("dev", "77", str(logs), Layout(nodes=2, gpus_per_node=4), "77", None)
    wait_for(lambda: Path(hold.spool, "ready").exists())
    yield proc, hold
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def queue(hold, tmp_path, body: str, name: str):
    workdir = tmp_path / name
    workdir.mkdir()
    return holds.queue(this_machine(), hold, f"#!/bin/bash\n{body}\n", str(workdir), str(tmp_path / "logs"))


def test_jobs_run_one_at_a_time_in_order_each_with_its_name_log_and_directory(agent, tmp_path):
    _, hold = agent
    first, ahead = queue(hold, tmp_path, 'echo "first $HPCJAX_JOB_KEY in $PWD"; sleep 0.3; exit 3', "a")
    second, ahead2 = queue(hold, tmp_path, 'echo "second $HPCJAX_JOB_KEY"; date +%s.%N > started', "b")
    assert (first, second) == ("77.s1", "77.s2")
    assert ahead2 == ["77.s1"]  # the second is told what it waits for
    wait_for(lambda: holds.state_of(this_machine(), hold.spool, second).get("rc"))
    one, two = (holds.state_of(this_machine(), hold.spool, key) for key in (first, second))
    assert (one["rc"], two["rc"]) == ("3", "0")  # the failure did not end the hold: the next ran
    assert (tmp_path / "logs" / "77.s1-batch.log").read_text() == f"first 77.s1 in {tmp_path / 'a'}\n"
    assert (tmp_path / "logs" / "77.s2-batch.log").read_text() == "second 77.s2\n"
    finished_first = (Path(hold.spool) / "000001.rc").stat().st_mtime
    assert float((tmp_path / "b" / "started").read_text()) >= finished_first - 0.01


def test_a_queued_job_is_withdrawn_and_a_running_one_stopped_without_ending_the_hold(agent, tmp_path):
    proc, hold = agent
    running, _ = queue(hold, tmp_path, "trap 'echo stopped; exit 143' TERM; sleep 60 & wait", "a")
    queued, _ = queue(hold, tmp_path, "echo never", "b")
    wait_for(lambda: "running" in holds.state_of(this_machine(), hold.spool, running)["files"])
    assert holds.cancel(this_machine(), hold.spool, queued) == "withdrawn"
    assert holds.cancel(this_machine(), hold.spool, running) == "stopping"
    state = wait_for(lambda: (s := holds.state_of(this_machine(), hold.spool, running)).get("rc") and s)
    assert state["rc"] == "143" and "cancel" in state["files"]
    withdrawn = holds.state_of(this_machine(), hold.spool, queued)
    assert withdrawn["rc"] == "143" and "withdrawn" in withdrawn["files"] and "running" not in withdrawn["files"]
    assert not (tmp_path / "logs" / "77.s2-batch.log").exists()  # it never started
    after, _ = queue(hold, tmp_path, "echo after", "c")  # the hold still runs jobs
    wait_for(lambda: holds.state_of(this_machine(), hold.spool, after).get("rc") == "0")
    assert proc.poll() is None


def test_the_end_of_the_hold_is_said_to_the_job_running_in_it(agent, tmp_path):
    proc, hold = agent
    key, _ = queue(hold, tmp_path, "sleep 60", "a")
    wait_for(lambda: "running" in holds.state_of(this_machine(), hold.spool, key)["files"])
    os.killpg(proc.pid, signal.SIGTERM)  # what SLURM sends at the time limit, or on `hpcjax release`
    proc.wait(timeout=20)
    state = holds.state_of(this_machine(), hold.spool, key)
    assert "rc" not in state and state["why"].startswith("SLURM ended the hold")
    assert "the hold ends: SLURM ended the hold" in proc.stdout.read()


def test_a_job_that_fails_once_the_holds_time_is_up_ended_with_the_hold(agent, tmp_path):
    """At the hold's time limit SLURM kills the job's steps a moment before it signals the agent
    (seen in CI: the job's rc was written, and it was called a failure of its own). A job that fails
    once squeue's end time has come ended with the hold; one that fails before it failed itself."""
    proc, hold = agent
    early, _ = queue(hold, tmp_path, "exit 1", "a")
    wait_for(lambda: holds.state_of(this_machine(), hold.spool, early).get("rc"))
    (tmp_path / "end").write_text(time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 1)) + "\n")
    late, _ = queue(hold, tmp_path, "exit 1", "b")
    proc.wait(timeout=20)
    assert holds.state_of(this_machine(), hold.spool, early)["rc"] == "1"
    state = holds.state_of(this_machine(), hold.spool, late)
    assert "rc" not in state and state["why"] == "SLURM ended the hold (its time limit)", state
    assert "the hold ends: SLURM ended the hold (its time limit)" in proc.stdout.read()


def test_a_job_that_does_not_fit_the_hold_is_named_with_the_holds_size():
    hold = holds.Hold("dev", "77", "/x", Layout(nodes=2, gpus_per_node=4), "77", None)
    assert hold.fits(Layout(nodes=2, gpus_per_node=4, gpus_per_process=4)) is None
    assert hold.fits(Layout(nodes=3, gpus_per_node=1)) == (
        "the job asks for 3 node(s) x 1 GPU(s); hold dev (job 77) has 2 node(s) x 4 GPU(s)")


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="scripts/test.sh installs shellcheck")
@pytest.mark.parametrize("runtime", ["none", "charliecloud"])
def test_the_holds_script_is_what_shellcheck_accepts(runtime):
    from hpcjax.job import profiles

    spec = profiles.build_spec(["hpcjax-hold"], {"nodes": 2, "gpus_per_node": 4, "runtime": runtime,
                                                 **({"image": "/images/jax"} if runtime != "none" else {})})
    text = render_sbatch(spec, hold=True)
    assert "hpcjax_spool=" in text and "srun --kill-on-bad-exit" not in text  # the agent, not a launch
    checked = subprocess.run(["shellcheck", "-s", "bash", "-"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


def test_a_job_killed_by_the_holds_warning_is_reported_as_the_hold_ending(monkeypatch):
    """The warning SLURM sends every job of a hold before its time limit (USR2) kills a program that
    does not catch it: the report names the hold's end, not the program (the rest of the report as
    the failure analysis made it). The same on the dev cluster when the hold's limit itself ends a
    job: tests/launch/test_holds_cluster.py."""
    from hpcjax.follow.outcome import Finding, Outcome
    from hpcjax.slurm import inhold
    from hpcjax.slurm.job import SlurmRun

    analysed = Outcome("77.s3", "FAILED", 140, causes=(
        Finding(inhold.WARNED, "srun: task 0: User defined signal 2", "catch SIGUSR2"),
        Finding("a rank failed", "rank 1", "")))
    monkeypatch.setattr(SlurmRun, "_finish", lambda self, state: analysed)
    run = object.__new__(inhold.InHoldRun)
    run.hold_name, run.hold_job, run._queue, run._status = "dev", "77", {"files": {"running", "rc"}}, None
    outcome = run._finish("FAILED")
    assert outcome.cause.cause.startswith("the hold is ending: SLURM's warning before its time limit (USR2)")
    assert "the program did not fail on its own" in outcome.cause.hint and "hpcjax status 77" in outcome.cause.evidence
    assert outcome.causes[1:] == analysed.causes[1:] and outcome.exit_code == 140
    run._queue = {"files": {"running"}}  # no exit code: the hold ended while it ran
    run._status = type("S", (), {"reason": "SLURM ended the hold (its time limit, a release, or the node)"})()
    ended = run._finish("TIMEOUT")
    assert ended.cause.cause == "the hold ended: SLURM ended the hold (its time limit, a release, or the node)"
    assert ended.failed == () and len(ended.causes) == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's file takes root (CI runs as root)")
def test_a_job_queued_by_someone_else_is_not_run(agent, tmp_path):
    """The agent runs what it finds in its queue as the hold's user: the queue is that user's
    alone (mode 700), and files another user owns there are never run."""
    _, hold = agent
    assert Path(hold.spool).stat().st_mode & 0o777 == 0o700
    planted = Path(hold.spool) / "000009.sh"
    planted.write_text("#!/bin/bash\ntouch ran-by-the-hold\n")
    (Path(hold.spool) / "000009.request.part").write_text(f"{tmp_path}\n{tmp_path}/planted.log\n")
    for path in (planted, Path(hold.spool) / "000009.request.part"):
        os.chown(path, 65534, 65534)  # nobody's
    os.rename(Path(hold.spool) / "000009.request.part", Path(hold.spool) / "000009.request")
    state = wait_for(lambda: (s := holds.state_of(this_machine(), hold.spool, "77.s9")).get("rc") and s)
    assert state["rc"] == "126" and not (tmp_path / "ran-by-the-hold").exists()
    mine, _ = queue(hold, tmp_path, "echo mine", "a")  # the hold goes on with its user's jobs
    wait_for(lambda: holds.state_of(this_machine(), hold.spool, mine).get("rc") == "0")
