"""The runtime on the dev cluster: real srun steps, real multi-process JAX on CPU."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading

import pytest

from conftest import run_hpcjax

pytestmark = pytest.mark.cluster

SEED_LAYOUTS = [("G4N1p4", 1, 4, 1), ("G4N2p2", 2, 2, 2), ("G4N2p4", 2, 2, 1), ("G8N2p8", 2, 4, 1)]


@pytest.mark.parametrize("name, nodes, gpus, k", SEED_LAYOUTS, ids=[row[0] for row in SEED_LAYOUTS])
def test_smoke_on_slurm_for_the_seed_layouts(tmp_path, slurm_cluster, hpcjax_home, name, nodes, gpus, k):
    result = run_hpcjax("smoke", "--backend", "slurm", "--json", "--nodes", str(nodes), "--gpus-per-node",
                        str(gpus), "--gpus-per-process", str(k), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert re.search(r"job \d+: COMPLETED", result.stderr)
    verdict = json.loads(result.stdout)
    assert verdict["layout"] == name and verdict["backend"] == "slurm" and verdict["ok"]
    processes, total, per_node = nodes * gpus // k, nodes * gpus, gpus // k
    assert [row["rank"] for row in verdict["ranks"]] == list(range(processes))
    # SLURM placed ranks block-wise, on whichever nodes were free (a one-node job may get node2)
    in_order = list(dict.fromkeys(row["node"] for row in verdict["ranks"]))
    assert len(in_order) == nodes and set(in_order) <= {"node1", "node2"}, in_order
    for row in verdict["ranks"]:
        assert (row["local_devices"], row["global_devices"]) == (k, total)
        assert row["allreduce"] == [float(total)] * k  # the sum over every device, on every process
        assert row["node"] == in_order[row["rank"] // per_node]


def test_bandwidth_between_the_two_nodes_with_a_plot(tmp_path, slurm_cluster, hpcjax_home):
    from support import not_blank

    result = run_hpcjax("smoke", "--bandwidth", "--sizes", "4K:1M", "--plot", "bw.png", "--nodes", "2",
                        "--gpus-per-node", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "4 of 4 ranks passed" in result.stdout
    assert re.search(r"node1 <-> node2: \d+\.\d{3} GB/s at 1 MiB", result.stdout), result.stdout
    assert not_blank(tmp_path / "bw.png")
    rank0 = next((tmp_path / "hpcjax-logs").glob("*-rank0.log")).read_text()
    [report] = [json.loads(line) for line in rank0.splitlines() if line.startswith('{"check": "bandwidth"')]
    [pair] = report["pairs"]
    assert pair["nodes"] == ["node1", "node2"] and all(row["correct"] for row in pair["rows"])


def test_env_inside_an_srun_step(tmp_path, slurm_cluster, hpcjax_home):
    result = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--wait", "--",
                        sys.executable, "-m", "hpcjax", "env", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    job = result.stdout.strip()
    for rank in range(4):
        data = json.loads(run_hpcjax("logs", job, "--rank", str(rank), cwd=tmp_path).stdout)
        assert data["launcher"] == "srun" and data["process_id"] == rank and data["num_processes"] == 4
        assert data["coordinator_host"] == "node1" and data["local_device_ids"] == [0]
        assert data["coordinator_port"] == 10000 + 16 * (int(job) % 1400)


def test_python_outside_srun_fails_with_the_srun_line(tmp_path, slurm_cluster):
    out = tmp_path / "out.log"
    subprocess.run(["sbatch", "--wait", "--gpus-per-node=1", f"--output={out}", "--wrap",
                    f"{sys.executable} -m hpcjax env"], check=False, capture_output=True, cwd=tmp_path, timeout=120)
    text = out.read_text()
    assert "outside an srun step" in text and "srun --gpus-per-task=1" in text and "Traceback" not in text


@pytest.mark.serial  # its two jobs must run at once: 8 GPUs between them, never all free on a busy cluster
def test_two_jobs_on_the_same_nodes_at_once_use_different_ports(tmp_path, slurm_cluster, hpcjax_home):
    # Each rank sleeps first so the two jobs' initializations overlap in time.
    command = ["bash", "-c", f"sleep 4; exec {sys.executable} -m hpcjax check all --json"]
    results = {}

    def submit(name):
        (tmp_path / name).mkdir()
        results[name] = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--wait", "--",
                                   *command, cwd=tmp_path / name)

    threads = [threading.Thread(target=submit, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    ports, spans = {}, {}
    for name, result in results.items():
        assert result.returncode == 0, result.stderr
        job = result.stdout.strip()
        log = (tmp_path / name / "hpcjax-logs" / f"{job}-rank0.log").read_text()
        ports[name] = re.search(r"coordinator node1:(\d+)", log).group(1)
        times = subprocess.run(["sacct", "-j", f"{job}.0", "-n", "-P", "-o", "Start,End"], capture_output=True,
                               text=True).stdout.split()[0].split("|")
        spans[name] = times
    assert ports["a"] != ports["b"]
    (start_a, end_a), (start_b, end_b) = spans["a"], spans["b"]
    assert start_a < end_b and start_b < end_a, spans  # they really ran at the same time
