"""The preflight on the dev cluster (real sbatch/srun, 2 nodes, emulated GPUs): a job that passes
starts its program in the same allocation; a node whose GPU reports an uncorrectable ECC error (a
stand-in nvidia-smi on the job's PATH: no GPU here) is named, and the job requeues itself without
it and runs on the other node; a node really slowed (its slurmd in a cgroup with a CPU quota, so
every step it starts is slow) is named by its throughput and the program never starts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DEVCLUSTER_CONF, SHARED_MACHINE, SHARED_MACHINE_ENV, run_hpcjax

pytestmark = pytest.mark.cluster

PROGRAM = [sys.executable, "-c", "import os; open('ran-' + os.environ['SLURM_JOB_ID'], 'a').write("
           "os.environ['SLURMD_NODENAME'] + '\\n')"]


def batch_log(cwd: Path, job: str) -> str:
    return (cwd / "hpcjax-logs" / f"{job}-batch.log").read_text()


def test_a_preflight_that_passes_starts_the_program_in_the_same_allocation(tmp_path, slurm_cluster, hpcjax_home):
    started = time.monotonic()
    done = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--time", "00:05:00", "--preflight", "--wait",
                      *SHARED_MACHINE, "--", *PROGRAM, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    job = done.stdout.split()[0]
    line = re.search(r"preflight: 2 node\(s\), 4 device\(s\), passed in (\d+) s; slowest node ([\d.]+)x median",
                     batch_log(tmp_path, job))
    assert line, batch_log(tmp_path, job)
    print(f"preflight on 2 nodes x 2: {line.group(1)} s by its own clock; the job took "
          f"{time.monotonic() - started:.0f} s (figures, not asserted)")
    assert sorted((tmp_path / f"ran-{job}").read_text().split()) == ["node1", "node1", "node2", "node2"]
    report = json.loads((tmp_path / "hpcjax-logs" / f"{job}-preflight.json").read_text())
    assert report["passed"] and sorted(report["nodes"]) == ["node1", "node2"]
    assert [p["nodes"] for p in report["pairs"]] == [["node1", "node2"]] and report["pairs"][0]["busbw_gbps"] > 0
    assert all(n["gflops"] > 0 and n["free_gb"] > 0 for n in report["nodes"].values())
    status = json.loads(run_hpcjax("status", job, "--json", cwd=tmp_path).stdout)
    assert status["attempts"][0]["preflight"].startswith("preflight: 2 node(s), 4 device(s), passed")
    assert "; preflight: 2 node(s)" in run_hpcjax("status", job, cwd=tmp_path).stdout


STAND_IN = """#!/bin/sh
# A stand-in for nvidia-smi (no GPU here): the first node that asks reports an uncorrectable ECC
# error on GPU 1, every other node is healthy. Answers the preflight's query only.
case "$*" in *--query-gpu=*) ;; *) exit 6 ;; esac
claim={claim}
( set -o noclobber; echo "$SLURMD_NODENAME" > "$claim" ) 2>/dev/null
bad=$(cat "$claim")
for i in 0 1; do
  ecc=0; [ "$SLURMD_NODENAME" = "$bad" ] && [ $i = 1 ] && ecc=2
  echo "$i, NVIDIA H100 80GB HBM3, $ecc, No, No, No, Not Active, Not Active, 16, 16"
done
"""


def submit_with_a_bad_gpu(tmp_path: Path, nodes: int):
    """`submit --wait` of PROGRAM after a preflight, with --requeue 1 --retry-failed, its nodes' nvidia-smi
    the stand-in above: (the finished submit, the node that reported the ECC error)."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "nvidia-smi").write_text(STAND_IN.format(claim=tmp_path / "bad-node"))
    (tools / "nvidia-smi").chmod(0o755)
    done = run_hpcjax("submit", "--nodes", str(nodes), "--gpus-per-node", "2", "--time", "00:05:00", "--preflight",
                      "--requeue", "1", "--retry-failed", "--env", f"PATH={tools}:$PATH", *SHARED_MACHINE,
                      "--wait", "--", *PROGRAM, cwd=tmp_path, timeout=400)
    return done, (tmp_path / "bad-node").read_text().strip()


@pytest.mark.waits  # a node drained and a job requeued: 13 CPU-s in 31 s alone
def test_a_gpu_with_ecc_errors_fails_its_node_and_the_job_runs_without_it(tmp_path, slurm_cluster, hpcjax_home):
    done, bad = submit_with_a_bad_gpu(tmp_path, nodes=1)
    job = done.stdout.split()[0]
    assert done.returncode == 0, done.stderr + batch_log(tmp_path, job)
    ran_on = set((tmp_path / f"ran-{job}").read_text().split())
    assert ran_on and bad not in ran_on  # the program ran once, on the other node
    status = json.loads(run_hpcjax("status", job, "--json", cwd=tmp_path).stdout)
    first, second = status["attempts"]
    assert first["failed_node"] == bad and first["exit_code"] == 75
    assert first["preflight"].startswith(f"preflight: FAILED on {bad} ({bad}: GPU 1: 2 uncorrectable ECC error(s))")
    assert second["preflight"].startswith("preflight: 1 node(s), 2 device(s), passed")
    assert f"the next attempts leave out node(s) {bad} (" in batch_log(tmp_path, job) or \
        f"ExcNodeList={bad}" in subprocess.run(["scontrol", "show", "job", job], capture_output=True,
                                                text=True).stdout
    listed = json.loads(run_hpcjax("nodes", "--json", cwd=tmp_path).stdout)
    assert [(r["node"], r["job_id"], r["attempt"]) for r in listed] == [(bad, job, 1)]
    assert "uncorrectable ECC" in listed[0]["what"]


def test_a_failed_preflight_that_leaves_too_few_nodes_is_not_retried_into_a_job_that_can_never_start(
        tmp_path, slurm_cluster, hpcjax_home):
    """Issue 44: with --requeue --retry-failed, a 2-node job whose preflight failed one of the dev
    cluster's 2 nodes was requeued without it, and then pended for ever. It ends FAILED instead,
    its attempt saying why it was not retried."""
    done, bad = submit_with_a_bad_gpu(tmp_path, nodes=2)
    job = done.stdout.split()[0]
    assert done.returncode == 75, done.stderr + batch_log(tmp_path, job)
    assert not (tmp_path / f"ran-{job}").exists()  # the program never ran
    status = json.loads(run_hpcjax("status", job, "--json", cwd=tmp_path).stdout)
    assert status["state"] == "FAILED"
    [only] = status["attempts"]
    assert only["failed_node"] == bad and only["not_retried"] == (
        f"without node(s) {bad} the partition has 1 for a job of 2: a retry could never start"), only
    assert f"not retrying job {job} after attempt 1" in batch_log(tmp_path, job)


def slowed(node: str, share: float, period_us: int = 100000):
    """Put the node's slurmd (and so every step it starts from now) in a CPU cgroup with a quota of
    `share` of one CPU per `period_us` (the kernel's default period is 100 ms); cgroup v1's cpu
    controller, or v2's cpu.max. Returns the undo."""
    # by the dev cluster's own pid file: the other releases' clusters run a slurmd of that node name too
    pid_file = DEVCLUSTER_CONF.parent.parent / "run" / f"slurmd.{node}.pid"
    pid = pid_file.read_text().split() if pid_file.exists() else []
    assert len(pid) == 1 and Path(f"/proc/{pid[0]}").exists(), f"no slurmd for {node} in {pid_file}: {pid}"
    v1 = Path("/sys/fs/cgroup/cpu")
    if (v1 / "cgroup.procs").exists():
        group, quota = v1 / f"hpcjax-test-slow-{node}", [("cpu.cfs_period_us", str(period_us)),
                                                          ("cpu.cfs_quota_us", str(int(period_us * share)))]
        root = v1
    else:
        root = Path("/sys/fs/cgroup")
        group, quota = root / f"hpcjax-test-slow-{node}", [("cpu.max", f"{int(period_us * share)} {period_us}")]
    group.mkdir(exist_ok=True)
    for name, value in quota:
        (group / name).write_text(value)
    (group / "cgroup.procs").write_text(pid[0])

    def undo():
        (root / "cgroup.procs").write_text(pid[0])
        for leftover in (group / "cgroup.procs").read_text().split():  # steps still running there
            try:
                (root / "cgroup.procs").write_text(leftover)
            except OSError:
                pass
        group.rmdir()
    return undo


@pytest.mark.serial  # a slowed node slows every other test's ranks there
@pytest.mark.skipif(not os.access("/sys/fs/cgroup/cpu", os.W_OK) and not os.access("/sys/fs/cgroup/cgroup.procs",
                                                                                     os.W_OK),
                    reason="needs a writable CPU cgroup (root, cgroup v1 cpu or v2)")
def test_a_node_slowed_through_its_cgroup_is_named_by_its_throughput(tmp_path, slurm_cluster, hpcjax_home):
    undo = slowed("node2", 0.25)
    try:
        done = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--time", "00:05:00", "--preflight",
                          "--wait", "--", *PROGRAM, cwd=tmp_path, timeout=400)
    finally:
        undo()
    job = done.stdout.split()[0]
    assert done.returncode == 75, done.stderr
    assert not (tmp_path / f"ran-{job}").exists()  # no step of the program was paid for
    assert "likely cause: node(s) node2 failed the preflight" in done.stderr, done.stderr
    assert re.search(r"preflight: FAILED on node2 \(node2: matmul [\d.]+ GFLOP/s per device \(slowest device\), "
                     r"0\.\d\dx the median of the allocation", done.stderr), done.stderr
    assert "the program was not started: the preflight failed" in batch_log(tmp_path, job)
    assert [r["node"] for r in json.loads(run_hpcjax("nodes", "--json", cwd=tmp_path).stdout)] == ["node2"]


def test_a_trainer_and_a_remote_function_run_after_their_preflight(shared_storage, hpcjax_home):
    """The other entry points: ScalingConfig(preflight=True) and @remote(preflight=True)."""
    import hpcjax

    def loop():
        import jax

        hpcjax.report({"devices": jax.device_count()})

    scaling = hpcjax.ScalingConfig(nodes=2, gpus_per_node=2, time="00:05:00", preflight=True,
                                   env=SHARED_MACHINE_ENV)
    result = hpcjax.Trainer(loop, scaling_config=scaling, run_config=hpcjax.RunConfig(
        storage_path=str(shared_storage), name="preflight", backend="slurm")).fit()
    assert result.error is None and result.metrics["devices"] == 4
    [log] = shared_storage.rglob("*-batch.log")
    assert re.search(r"preflight: 2 node\(s\), 4 device\(s\), passed in \d+ s", log.read_text()), log.read_text()

    @hpcjax.remote(nodes=1, gpus_per_node=2, time="00:05:00", preflight=True, backend="slurm",
                   storage_path=str(shared_storage / "calls"))
    def devices():
        import jax

        return jax.device_count()

    assert devices() == 2
    [call_log] = (shared_storage / "calls").rglob("*-batch.log")
    assert "preflight: 1 node(s), 2 device(s), passed" in call_log.read_text()


@pytest.mark.serial  # a slowed node slows every other test's ranks there
@pytest.mark.skipif(not os.access("/sys/fs/cgroup/cpu", os.W_OK) and not os.access("/sys/fs/cgroup/cgroup.procs",
                                                                                     os.W_OK),
                    reason="needs a writable CPU cgroup (root, cgroup v1 cpu or v2)")
def test_a_spare_node_takes_the_place_of_a_slow_one_without_a_requeue(tmp_path, slurm_cluster, hpcjax_home):
    """--spares 1: the job holds 2 nodes for a 1-node program. node1, the batch script's own node
    (so the coordinator must move), is slowed: the program runs on node2 and its collective works.
    Its quota comes in periods of 250 ms: when each matmul timing was 5 calls (~15 ms here), the
    slowed node measured 0.74-1.04x the median, 4 times of 4 (and 0.85-1.16x with the timings back
    to back, as before they went in rounds); CI met it once with the default 100 ms."""
    program = ["bash", "-c", f'echo "$SLURMD_NODENAME" >> ran; exec {sys.executable} -m hpcjax check allreduce']
    undo = slowed("node1", 0.25, period_us=250000)
    try:
        done = run_hpcjax("submit", "--nodes", "1", "--gpus-per-node", "2", "--time", "00:05:00", "--preflight",
                          "--spares", "1", "--wait", "--", *program, cwd=tmp_path, timeout=400)
    finally:
        undo()
    job = done.stdout.split()[0]
    assert done.returncode == 0, done.stderr + batch_log(tmp_path, job)
    assert (tmp_path / "ran").read_text().split() == ["node2", "node2"]
    log = batch_log(tmp_path, job)
    assert re.search(r"preflight: 2 node\(s\), 4 device\(s\), passed in \d+ s; slowest node [\d.]+x median; "
                     r"running on node2, left out node1 \(node1: matmul", log), log
    logs = "".join(p.read_text() for p in (tmp_path / "hpcjax-logs").glob(f"{job}-rank*.log"))
    assert logs.count("allreduce: ok") == 2, logs
    assert [r["node"] for r in json.loads(run_hpcjax("nodes", "--json", cwd=tmp_path).stdout)] == ["node1"]
