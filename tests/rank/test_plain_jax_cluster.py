"""Unmodified scripts under hpcjax's rendered scripts, on the dev cluster: what a plain
`jax.distributed.initialize()` resolves on every rank (JAX's own code) equals hpcjax's
mapping, and seed 002's allreduce.py runs unchanged."""

import json
import re
import os
import subprocess
import sys

import pytest

from conftest import DATA_DIR, REPO, run_hpcjax
from hpcjax.protocol.contract import derived_port

pytestmark = pytest.mark.cluster
DATA = DATA_DIR
ENV = {"PYTHONPATH": str(REPO)}


def submit_wait(tmp_path, nodes, gpus, k, *command):
    result = run_hpcjax("submit", "--nodes", str(nodes), "--gpus-per-node", str(gpus), "--gpus-per-process", str(k),
                        "--wait", "--", *command, cwd=tmp_path, env=ENV)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[0]


def rank_lines(tmp_path, job_id, ranks):
    return {r: run_hpcjax("logs", job_id, "--rank", str(r), cwd=tmp_path).stdout for r in range(ranks)}


@pytest.mark.parametrize("nodes, gpus, k", [(2, 4, 1), (2, 2, 2), (2, 4, 4)], ids=["G8N2p8", "G4N2p2", "G8N2p2"])
def test_plain_jax_resolves_what_hpcjax_maps_on_every_rank(tmp_path, slurm_cluster, hpcjax_home, nodes, gpus, k):
    ranks = nodes * gpus // k
    job_id = submit_wait(tmp_path, nodes, gpus, k, sys.executable, str(DATA / "probe_plain_jax.py"))
    probes = [json.loads(text.strip().splitlines()[-1]) for text in rank_lines(tmp_path, job_id, ranks).values()]
    for rank, probe in enumerate(probes):
        plain, ours = probe["plain"], probe["ours"]
        assert plain == ours, (rank, probe)
        assert plain["local_device_ids"] == list(range(k)) and len(probe["visible"].split(",")) == k
        assert (plain["num_processes"], plain["process_id"]) == (ranks, rank)
    assert {p["plain"]["coordinator_address"] for p in probes} == {f"node1:{derived_port(int(job_id), 0)}"}


def test_two_steps_at_once_in_one_job_get_different_ports(tmp_path, slurm_cluster, hpcjax_home):
    script = run_hpcjax("render", "--gpus-per-node", "2", "--output-dir", str(tmp_path / "logs"), "--",
                        sys.executable, str(DATA / "probe_plain_jax.py"), cwd=tmp_path).stdout
    start = re.search(r"^srun ", script, re.MULTILINE).start()  # the launch (`srun --version` comes before it)
    launch = script[start:].rstrip("\n")
    two = launch.replace("srun ", "srun --overlap ", 1).replace("%j-rank%t", "%j-step%s-rank%t")
    script = script[:start] + f"{two} &\n{two} &\nwait\n"
    (tmp_path / "logs").mkdir()
    (tmp_path / "two.sh").write_text(script)
    submitted = subprocess.run(["sbatch", "--parsable", "--wait", str(tmp_path / "two.sh")], capture_output=True,
                               text=True, cwd=tmp_path, env={**os.environ, **ENV}, timeout=300)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    addresses = {}
    for log in (tmp_path / "logs").glob(f"{job_id}-step*-rank*.log"):
        probe = json.loads(log.read_text().strip().splitlines()[-1])
        addresses.setdefault(probe["step"], set()).add(probe["plain"]["coordinator_address"])
    assert len(addresses) == 2, addresses
    for step, found in addresses.items():
        # every rank of a step meets at one address: the batch node (node1 or node2, whichever is free) and
        # the step's own port
        [address] = found
        assert address.split(":")[0] in ("node1", "node2"), (step, found)
        assert address.endswith(f":{derived_port(int(job_id), int(step))}"), (step, found)


@pytest.mark.parametrize("nodes, gpus, k, expected", [(2, 4, 1, "[8.]"), (2, 2, 2, "[4. 4.]")],
                         ids=["G8N2p8", "G4N2p2"])
def test_seed_allreduce_runs_unchanged(tmp_path, slurm_cluster, hpcjax_home, nodes, gpus, k, expected):
    ranks = nodes * gpus // k
    job_id = submit_wait(tmp_path, nodes, gpus, k, sys.executable, str(DATA / "allreduce.py"))
    for rank, text in rank_lines(tmp_path, job_id, ranks).items():
        assert f"Total devices: {nodes * gpus}  |  Devices per task: {k}" in text, (rank, text)
        assert f"Process {rank} has y={expected}" in text, (rank, text)
