"""The checks with real multi-process JAX on this machine's CPU (the local backend)."""

import json
import re
import os
import subprocess
import sys

import pytest

from conftest import DATA_DIR, run_hpcjax

pytestmark = pytest.mark.jax  # runs JAX programs on this machine

SEED_LAYOUTS = [("G4N1p4", 1, 4, 1), ("G4N2p2", 2, 2, 2), ("G4N2p4", 2, 2, 1), ("G8N2p8", 2, 4, 1)]


@pytest.mark.parametrize("name, nodes, gpus, k", SEED_LAYOUTS, ids=[row[0] for row in SEED_LAYOUTS])
def test_local_smoke_passes_for_the_seed_layouts(tmp_path, name, nodes, gpus, k):
    result = run_hpcjax("smoke", "--backend", "local", "--json", "--nodes", str(nodes), "--gpus-per-node",
                        str(gpus), "--gpus-per-process", str(k), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["layout"] == name and verdict["ok"]
    processes, total = nodes * gpus // k, nodes * gpus
    assert len(verdict["ranks"]) == processes
    for row in verdict["ranks"]:
        assert (row["local_devices"], row["global_devices"]) == (k, total)
        assert row["allreduce"] == [float(total)] * k
        assert row["node"] == f"local{row['rank'] // (gpus // k)}"


def test_one_process_with_eight_emulated_gpus(tmp_path):
    env = {**os.environ, "HPCJAX_GPUS_PER_PROCESS": "8"}
    result = subprocess.run([sys.executable, "-m", "hpcjax", "check", "all", "--json"], capture_output=True,
                            text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    devices, allreduce = (json.loads(line) for line in result.stdout.splitlines())
    assert devices["local_device_count"] == devices["device_count"] == 8 and devices["processes"] == 1
    assert allreduce["seen"] == [8.0] * 8


def test_bandwidth_sweep_reports_nccl_tests_quantities(tmp_path):
    result = run_hpcjax("submit", "--backend", "local", "--nodes", "1", "--gpus-per-node", "4",
                        "--gpus-per-process", "2", "--", sys.executable, "-m", "hpcjax", "check", "bandwidth",
                        "--json", "--sizes", "4K:256K", "--iters", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    job = result.stdout.strip()
    log = (tmp_path / "hpcjax-logs" / f"{job}-rank0.log").read_text()
    report = json.loads(next(line for line in log.splitlines() if line.startswith('{"check"')))
    assert report["devices"] == 4 and [r["bytes"] for r in report["rows"]] == [4096, 16384, 65536, 262144]
    for row in report["rows"]:
        assert row["algbw_gbps"] == pytest.approx(row["bytes"] / (row["time_us"] * 1e-6) / 1e9)
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * 3 / 4)
    assert "average bus bandwidth" in log


def test_a_rank_that_never_arrives_is_named(tmp_path):
    script = ('if [ "$SUBMITIT_LOCAL_GLOBALID" = 2 ]; then sleep 120; else exec '
              f'{sys.executable} -m hpcjax check devices; fi')
    result = run_hpcjax("submit", "--backend", "local", "--nodes", "1", "--gpus-per-node", "4",
                        "--env", "HPCJAX_INIT_TIMEOUT=3", "--", "bash", "-c", script, cwd=tmp_path, timeout=60)
    assert result.returncode == 1
    # Whichever rank the launcher saw fail first, it says who is missing.
    assert re.search(r"rank [013] on local0 failed", result.stderr)
    assert "process(es) 2 of 4 did not arrive within 3 s (arrived: 0, 1, 3)" in result.stderr


def test_env_explains_the_mapping_without_initializing(tmp_path):
    env = {"SLURM_JOB_ID": "42", "SLURM_STEP_ID": "1", "SLURM_PROCID": "5", "SLURM_LOCALID": "1",
           "SLURM_STEP_NUM_TASKS": "8", "SLURM_STEP_NODELIST": "gpu[07-08]", "CUDA_VISIBLE_DEVICES": "1",
           "HPCJAX_NODES": "2", "HPCJAX_GPUS_PER_NODE": "4", "HPCJAX_GPUS_PER_PROCESS": "1"}
    text = run_hpcjax("env", cwd=tmp_path, env=env)
    assert text.returncode == 0 and "launcher: srun" in text.stdout and "gpu07:" in text.stdout
    data = json.loads(run_hpcjax("env", "--json", cwd=tmp_path, env=env).stdout)
    assert data["coordinator_address"] == f"gpu07:{10000 + 16 * 42 + 1}"
    assert (data["process_id"], data["num_processes"], data["local_device_ids"]) == (5, 8, [0])


def test_env_error_outside_srun_is_clear(tmp_path):
    result = run_hpcjax("env", cwd=tmp_path, env={"SLURM_JOB_ID": "42", "SLURM_PROCID": "0"})
    assert result.returncode == 1 and "outside an srun step" in result.stderr and "hint: " in result.stderr
    assert "Traceback" not in result.stderr


def test_seed_allreduce_runs_unchanged_on_the_local_backend(tmp_path, hpcjax_home):
    """A plain jax.distributed.initialize() with no arguments, 8 processes on this CPU."""

    script = DATA_DIR / "allreduce.py"
    result = run_hpcjax("submit", "--backend", "local", "--nodes", "2", "--gpus-per-node", "4", "--",
                        sys.executable, str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip()
    for rank in range(8):
        text = run_hpcjax("logs", job_id, "--rank", str(rank), cwd=tmp_path).stdout
        assert "Total devices: 8  |  Devices per task: 1" in text and f"Process {rank} has y=[8.]" in text, text


def test_plain_jax_resolves_what_hpcjax_maps_on_the_local_backend(tmp_path, hpcjax_home):

    probe = DATA_DIR / "probe_plain_jax.py"
    result = run_hpcjax("submit", "--backend", "local", "--nodes", "2", "--gpus-per-node", "2",
                        "--gpus-per-process", "2", "--", sys.executable, str(probe), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip()
    for rank in range(2):
        found = json.loads(run_hpcjax("logs", job_id, "--rank", str(rank), cwd=tmp_path).stdout.splitlines()[-1])
        plain, ours = found["plain"], found["ours"]
        for name in ("coordinator_address", "num_processes", "process_id"):
            assert plain[name] == ours[name], (rank, name, found)
        assert plain["local_device_ids"] == [0, 1] and plain["process_id"] == rank


@pytest.mark.parametrize("nodes", range(1, 10))
def test_the_pair_rounds_meet_every_pair_of_nodes_once_and_no_node_twice_a_round(nodes):
    from hpcjax.rank.prove.pairs import rounds

    schedule = rounds(nodes)
    met = [pair for pairs in schedule for pair in pairs]
    assert sorted(met) == [(a, b) for a in range(nodes) for b in range(a + 1, nodes)]
    for pairs in schedule:
        seen = [node for pair in pairs for node in pair]
        assert len(seen) == len(set(seen))
    assert len(schedule) == max(1, nodes - 1 if nodes % 2 == 0 else nodes)


def test_bandwidth_between_each_pair_of_nodes_with_a_plot(tmp_path):
    """3 emulated nodes: three pairs, each measured once, the data checked; a plot beside."""
    from support import not_blank

    result = run_hpcjax("smoke", "--backend", "local", "--nodes", "3", "--gpus-per-node", "2", "--bandwidth",
                        "--sizes", "4K:64K", "--json", "--plot", "plots/bw.png", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert [p["nodes"] for p in verdict["pairs"]] == [["local0", "local1"], ["local0", "local2"],
                                                      ["local1", "local2"]]
    for pair in verdict["pairs"]:
        assert [r["bytes"] for r in pair["rows"]] == [4096, 16384, 65536] and all(r["correct"] for r in pair["rows"])
        for row in pair["rows"]:
            assert row["busbw_gbps"] == pytest.approx(row["bytes"] / (row["time_us"] * 1e-6) / 1e9)
    assert not_blank(tmp_path / "plots" / "bw.png")
    assert f"bandwidth plot: {tmp_path / 'plots' / 'bw.png'}" in result.stderr
    text = run_hpcjax("submit", "--backend", "local", "--nodes", "2", "--gpus-per-node", "1", "--", sys.executable,
                      "-m", "hpcjax", "check", "bandwidth", "--sizes", "4K:16K", "--iters", "2", cwd=tmp_path)
    log = (tmp_path / "hpcjax-logs" / f"{text.stdout.strip()}-rank0.log").read_text()
    assert "between nodes, both ways at once (busbw GB/s):" in log and "local0 <-> local1" in log


def test_a_plot_without_the_bandwidth_sweep_is_refused_before_anything_runs(tmp_path):
    for args, message in ((["--plot", "bw.png"], "--bandwidth was not given"),
                          (["--bandwidth", "--plot", "bw.txt"], "a plot is written as .png, .svg, .pdf")):
        result = run_hpcjax("smoke", "--backend", "local", "--nodes", "1", "--gpus-per-node", "1", *args,
                            cwd=tmp_path)
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert not (tmp_path / "hpcjax-logs").exists()
