"""The Run handle on the dev cluster (real sbatch, srun, squeue, sacct, scancel,
submitit): the same interface tests/launch/test_run_local.py proves on the local backend."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import assert_rank_3_of_4_failed_alone, run_hpcjax
from hpcjax.launch import attach, submit
from hpcjax.job.spec import JobSpec, Layout

pytestmark = pytest.mark.cluster

RANK = ("import os, sys, time; r = int(os.environ['SLURM_PROCID']); print(f'hello from {r}', flush=True)\n"
        "if sys.argv[1] == 'exit' and r == 3: print('rank three gives up', flush=True); sys.exit(3)\n"
        "if sys.argv[1] != 'ok': time.sleep(120)\n")


def spec(tmp_path, mode, nodes=2, gpus=2):
    return JobSpec(command=(sys.executable, "-c", RANK, mode), layout=Layout(nodes=nodes, gpus_per_node=gpus),
                   output_dir=str(tmp_path / "logs"), time="00:05:00")


def wait_for(predicate, what, limit_s=300):
    """The dev cluster is shared by three groups of tests at once: a job may queue for a while."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


def test_a_passing_job(tmp_path, slurm_cluster, hpcjax_home):
    run = submit(spec(tmp_path, "ok"), "slurm")
    outcome = run.wait(progress=False)
    assert outcome.ok and outcome.exit_code == 0
    assert run.logs(rank=2) == "hello from 2\n"
    again = attach(run.job_id)
    assert again.backend == "slurm" and again.outcome.ok
    wait_for(lambda: again.logs().splitlines() == ["[rank 0 node1] hello from 0", "[rank 1 node1] hello from 1",
                                                   "[rank 2 node2] hello from 2", "[rank 3 node2] hello from 3"],
             "accounting never showed the step's nodes", 20)


def test_a_failing_rank_is_named_with_its_node(tmp_path, slurm_cluster, hpcjax_home):
    outcome = submit(spec(tmp_path, "exit"), "slurm").wait(progress=False)
    assert_rank_3_of_4_failed_alone(outcome, "node2", "srun")


def test_cancel_a_running_job(tmp_path, slurm_cluster, hpcjax_home):
    run = submit(spec(tmp_path, "sleep", nodes=1), "slurm")
    wait_for(lambda: run.state() == "RUNNING" and len(run.rank_logs()) == 2, "the job did not start")
    run.cancel()
    outcome = run.wait(progress=False)
    assert outcome.state == "CANCELLED" and outcome.failed == () and outcome.exit_code != 0
    # Cancelling it again, or a job SLURM never had, is an error that says so.
    again = run_hpcjax("cancel", run.job_id, cwd=tmp_path)
    assert again.returncode == 1 and "has already ended (CANCELLED)" in again.stderr, again.stderr
    unknown = run_hpcjax("cancel", "99999", cwd=tmp_path)
    assert unknown.returncode == 1 and "SLURM knows no job 99999" in unknown.stderr, unknown.stderr


def test_ctrl_c_on_submit_wait_leaves_the_job_running_and_says_how_to_follow_it(tmp_path, slurm_cluster,
                                                                                hpcjax_home):
    proc = subprocess.Popen([sys.executable, "-m", "hpcjax", "submit", "--wait", "--gpus-per-node", "1", "--",
                             sys.executable, "-c", RANK, "sleep"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, env={**os.environ, "HPCJAX_HOME": str(hpcjax_home)})
    job_id = proc.stdout.readline().strip()
    run = attach(job_id)
    wait_for(lambda: run.state() == "RUNNING", "the job did not start")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert f"job {job_id} keeps running on the cluster" in err and f"hpcjax cancel {job_id}" in err
    assert run.state() == "RUNNING"
    status = json.loads(run_hpcjax("status", job_id, "--json", cwd=tmp_path).stdout)
    assert status["state"] == "RUNNING"
    run.cancel()
    assert run.wait(progress=False).state == "CANCELLED"
