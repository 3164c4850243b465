"""With slurmdbd stopped (an accounting outage, or a cluster without accounting), hpcjax
follows jobs through the controller: smoke, submit --wait, status and logs all work and
report the right outcome, and the user is told once what that limits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, DEVCLUSTER_CONF, run_hpcjax

# It stops slurmdbd: no other job may be followed meanwhile.
pytestmark = [pytest.mark.cluster, pytest.mark.serial]

PIDFILE = DEVCLUSTER_CONF.parent.parent / "run" / "slurmdbd.pid"


@pytest.fixture
def accounting_down(slurm_cluster):
    pid = int(PIDFILE.read_text().strip())
    subprocess.run(["kill", str(pid)], check=True)
    probe = subprocess.run(["sacct", "-n", "-X", "-j", "1"], capture_output=True, text=True)
    for _ in range(50):
        if probe.returncode != 0:
            break
        probe = subprocess.run(["sacct", "-n", "-X", "-j", "1"], capture_output=True, text=True)
    assert probe.returncode != 0, "sacct still answers with slurmdbd stopped"
    try:
        yield
    finally:  # the other tests need accounting back
        subprocess.run(["bash", str(REPO / "slurm/devcluster/up.sh")], check=True, capture_output=True)


FAIL_RANK_3 = 'if [ "$SLURM_PROCID" = 3 ]; then echo "rank three gives up"; exit 3; fi; sleep 5'


def test_jobs_are_followed_without_accounting(tmp_path, accounting_down, hpcjax_home):
    smoke = run_hpcjax("smoke", "--nodes", "2", "--gpus-per-node", "2", cwd=tmp_path)
    assert smoke.returncode == 0, smoke.stderr
    assert "4 of 4 ranks passed" in smoke.stdout + smoke.stderr
    assert smoke.stderr.count("warning: SLURM accounting is unavailable") == 1

    passing = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--wait", "--",
                         sys.executable, "-c", "print('fine')", cwd=tmp_path)
    assert passing.returncode == 0, passing.stderr
    assert "COMPLETED" in passing.stderr

    failing = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--wait", "--", "bash", "-c",
                         FAIL_RANK_3, cwd=tmp_path)
    assert failing.returncode == 3, failing.stderr
    assert "rank 3 on node2 failed: Exited with exit code 3" in failing.stderr
    job = failing.stdout.strip()

    status = run_hpcjax("status", job, "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["state"] == "FAILED" and data["outcome"]["exit_code"] == 3
    assert [f["rank"] for f in data["outcome"]["failed"]] == [3]
    assert "accounting is unavailable" in status.stderr

    logs = run_hpcjax("logs", job, "--rank", "3", cwd=tmp_path)
    assert logs.returncode == 0 and logs.stdout == "rank three gives up\n", logs.stderr
    every = run_hpcjax("logs", job, cwd=tmp_path).stdout
    assert "[rank 3 node2] rank three gives up" in every  # hosts from the controller's node list
    assert not Path(tmp_path / "hpcjax-logs" / f"{job}-stopped").exists()
