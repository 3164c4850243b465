"""End to end on the dev cluster: real sbatch, srun, sacct, squeue and submitit."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import run_hpcjax
from hpcjax.values.errors import HpcjaxError

pytestmark = pytest.mark.cluster

# Each rank prints one JSON line: what SLURM gave it.
REPORT = ("import json, os, sys; print(json.dumps({'rank': int(os.environ['SLURM_PROCID']), "
          "'node': os.environ['SLURMD_NODENAME'], 'cvd': os.environ.get('CUDA_VISIBLE_DEVICES', ''), "
          "'k': os.environ['HPCJAX_GPUS_PER_PROCESS'], 'argv': sys.argv[1:]}))")


def submit(tmp_path, *options, command, timeout=300):
    result = run_hpcjax("submit", *options, "--", *command, cwd=tmp_path, timeout=timeout)
    job_id = result.stdout.strip().splitlines()[0] if result.stdout.strip() else None
    return result, job_id


def rank_reports(tmp_path, job_id, ranks):
    reports = []
    for rank in range(ranks):
        log = run_hpcjax("logs", job_id, "--rank", str(rank), cwd=tmp_path)
        assert log.returncode == 0, log.stderr
        reports.append(json.loads(log.stdout.strip().splitlines()[-1]))
    return reports


def test_one_process_per_gpu_runs_8_ranks_4_per_node_each_with_its_gpu(tmp_path, slurm_cluster, hpcjax_home):
    result, job_id = submit(tmp_path, "--nodes", "2", "--gpus-per-node", "4", "--wait",
                            command=[sys.executable, "-c", REPORT])
    assert result.returncode == 0, result.stderr
    assert f"job {job_id}: COMPLETED" in result.stderr
    reports = rank_reports(tmp_path, job_id, 8)
    assert [r["rank"] for r in reports] == list(range(8))
    by_node = {}
    for r in reports:
        by_node.setdefault(r["node"], []).append(r["cvd"])
        assert r["k"] == "1"
    assert sorted(by_node) == ["node1", "node2"]
    for node, visible in by_node.items():
        assert sorted(visible) == ["0", "1", "2", "3"], (node, visible)  # one distinct GPU per rank


def test_one_process_per_node_sees_all_four_gpus(tmp_path, slurm_cluster, hpcjax_home):
    result, job_id = submit(tmp_path, "--nodes", "2", "--gpus-per-node", "4", "--gpus-per-process", "4",
                            "--wait", command=[sys.executable, "-c", REPORT])
    assert result.returncode == 0, result.stderr
    reports = rank_reports(tmp_path, job_id, 2)
    assert sorted(r["node"] for r in reports) == ["node1", "node2"]
    assert all(r["cvd"].split(",") == ["0", "1", "2", "3"] and r["k"] == "4" for r in reports)


def test_a_failing_rank_is_named_with_its_node_and_log_tail(tmp_path, slurm_cluster, hpcjax_home):
    script = ("import os, sys, time\nrank = int(os.environ['SLURM_PROCID'])\n"
              "if rank == 5:\n    print('rank five gives up', flush=True)\n    sys.exit(3)\ntime.sleep(60)\n")
    result, job_id = submit(tmp_path, "--nodes", "2", "--gpus-per-node", "4", "--wait",
                            command=[sys.executable, "-c", script])
    assert result.returncode == 3, result.stderr
    assert "rank 5 on node2 failed: Exited with exit code 3" in result.stderr
    assert "rank five gives up" in result.stderr
    # The other ranks were stopped by srun (--kill-on-bad-exit), not left to sleep on.
    assert "ranks stopped by srun after the failure: 0-4,6-7" in result.stderr
    status = run_hpcjax("status", job_id, "--json", cwd=tmp_path)
    assert json.loads(status.stdout)["state"] == "FAILED"


def test_status_logs_and_cancel(tmp_path, slurm_cluster, hpcjax_home, monkeypatch, capsys):
    result, job_id = submit(tmp_path, "--nodes", "2", "--gpus-per-node", "2", "--wait",
                            command=["bash", "-c", 'echo "hello from $SLURM_PROCID"'])
    assert result.returncode == 0, result.stderr
    status = run_hpcjax("status", job_id, cwd=tmp_path)
    assert status.returncode == 0 and f"job {job_id} (hpcjax): COMPLETED" in status.stdout
    deadline = time.monotonic() + 15  # accounting records steps asynchronously
    while f"step {job_id}.0: COMPLETED" not in status.stdout and time.monotonic() < deadline:
        time.sleep(1)
        status = run_hpcjax("status", job_id, cwd=tmp_path)
    assert f"step {job_id}.0: COMPLETED exit 0:0 tasks 4 on node[1-2]" in status.stdout
    # The status poll's squeue and sacct start before the verb's imports (cli.submitted.ask_slurm_early),
    # and the poll takes both answers: none asked twice, none left over.
    from hpcjax.cli import main
    from hpcjax.hosts import here
    from hpcjax.slurm import commands, controller

    started, start = [], here.start_early
    monkeypatch.setattr(here, "start_early", lambda *argvs: (started.extend(argvs), start(*argvs)))
    monkeypatch.setattr(controller, "_by_host", {})  # as `hpcjax status` starts: following nothing yet
    monkeypatch.chdir(tmp_path)
    assert main(["status", job_id]) == 0
    shown = capsys.readouterr().out
    assert f"job {job_id} (hpcjax): COMPLETED" in shown and f"step {job_id}.0: COMPLETED exit 0:0 tasks 4" in shown
    assert started == commands.poll([job_id]) and here._early == {}
    # main() in a process that already follows jobs (CI of cde6629: an earlier test's in the same worker):
    # its poll asks about them too, or not at all for a job already ended; the early start is that poll's.
    other = subprocess.run(["sbatch", "--parsable", "-p", "gpu", "--wrap", "sleep 120"], capture_output=True,
                           text=True, check=True).stdout.strip()
    try:
        monkeypatch.setattr(controller, "_by_host", {})
        controller.slurm_on().watcher.follow(other)
        for asked in ([other, job_id], []):  # the second: the first poll found the job ended for good
            started.clear()
            assert main(["status", job_id]) == 0 and f"job {job_id} (hpcjax): COMPLETED" in capsys.readouterr().out
            assert started == (commands.poll(asked) if asked else []) and here._early == {}
    finally:
        subprocess.run(["scancel", other])
    logs = run_hpcjax("logs", job_id, cwd=tmp_path).stdout.splitlines()
    assert logs == ["[rank 0 node1] hello from 0", "[rank 1 node1] hello from 1",
                    "[rank 2 node2] hello from 2", "[rank 3 node2] hello from 3"]

    result, job_id = submit(tmp_path, "--gpus-per-node", "1", command=["sleep", "300"])
    assert result.returncode == 0, result.stderr
    assert run_hpcjax("cancel", job_id, cwd=tmp_path).returncode == 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = json.loads(run_hpcjax("status", job_id, "--json", cwd=tmp_path).stdout)["state"]
        if state == "CANCELLED":
            break
        time.sleep(1)
    assert state == "CANCELLED"


def test_more_gpus_than_a_node_has_fails_at_submission(tmp_path, slurm_cluster, hpcjax_home):
    # Read from sinfo before sbatch (hpcjax/slurm/fit.py): the partition's nodes and their GPUs named.
    result, _ = submit(tmp_path, "--gpus-per-node", "9", command=["hostname"], timeout=60)
    assert result.returncode == 2, result.stderr
    assert "the job needs 1 node(s) with 9 GPUs each; partition gpu of this machine has 0 such node(s) (at most 4 " \
           "GPUs on a node)" in result.stderr
    # What only the scheduler knows (CPUs per node: hpcjax does not read them) is sbatch's own refusal, said
    # with its hint; the submit's --test-only is the first to meet it.
    result, _ = submit(tmp_path, "--gpus-per-node", "4", "--cpus-per-task", "64", command=["hostname"], timeout=60)
    assert result.returncode == 1, result.stderr
    assert "error: sbatch --test-only refused the job (G4N1p4)" in result.stderr
    assert "Requested node configuration is not available" in result.stderr
    assert "hint: the cluster has:" in result.stderr and "gpu:4" in result.stderr
    assert "(or CPUs per task)" in result.stderr  # --test-only names no cause: the hint names both


def test_more_nodes_than_the_partition_has_is_refused_before_anything_is_queued(tmp_path, slurm_cluster, hpcjax_home):
    """Read from sinfo before sbatch (fit); a list of partitions, which hpcjax leaves to SLURM to place, is
    refused by the submit's sbatch --test-only. Either way nothing is queued. (A job SLURM takes and then
    holds for a reason that can never clear is cancelled at once with the reason in words: on the dev
    cluster these two checks now meet every such request first; the path is tested on SLURM's recorded
    reasons in tests/launch/test_reasons_and_states.py.)"""
    refused = run_hpcjax("submit", "--nodes", "3", "--gpus-per-node", "1", "-J", f"big-{os.getpid()}", "--",
                         "hostname", cwd=tmp_path)
    assert refused.returncode == 2 and "the job needs 3 node(s) with 1 GPUs each; partition gpu of this machine has " \
        "2 such node(s)" in refused.stderr, refused.stderr
    listed = run_hpcjax("submit", "--partition", "gpu,a100", "--nodes", "3", "--gpus-per-node", "1", "-J",
                        f"big-{os.getpid()}", "--wait", "--", "hostname", cwd=tmp_path, timeout=60)
    assert listed.returncode == 1 and listed.stdout == "", listed.stderr
    assert "sbatch --test-only refused the job (G3N3p3)" in listed.stderr
    assert "Requested node configuration is not available" in listed.stderr
    queue = subprocess.run(["squeue", "-h", "-t", "all", "-n", f"big-{os.getpid()}"], capture_output=True, text=True)
    assert queue.stdout.strip() == ""  # never queued

def test_hostile_strings_reach_the_ranks_verbatim_on_the_cluster(tmp_path, slurm_cluster, hpcjax_home):
    marker = tmp_path / "pwned"
    hostile = [f"$(touch {marker})", f"`touch {marker}`", f"'; touch {marker}; '", "two\nlines"]
    result, job_id = submit(tmp_path, "--nodes", "1", "--gpus-per-node", "1", "--wait",
                            "--job-name", f"$(touch {marker})", "--env", f"HOSTILE=$(touch {marker})",
                            command=[sys.executable, "-c", REPORT + "; print(os.environ['HOSTILE'])",
                                     *hostile])
    assert result.returncode == 0, result.stderr
    log = run_hpcjax("logs", job_id, "--rank", "0", cwd=tmp_path).stdout.splitlines()
    assert json.loads(log[0])["argv"] == hostile
    assert log[1] == f"$(touch {marker})"
    assert not marker.exists()


def test_a_killed_rank_ends_the_job_and_is_named(tmp_path, slurm_cluster, hpcjax_home):
    """SIGKILL one rank in the middle of training (a node's OOM killer, a crash): srun stops
    the others at once (JAX's SIGTERM handler is off), and the report names the dead rank. Two
    ranks per node (2 x 4 took 58 CPU-s here: eight ranks training)."""
    outcome = {}

    def run():
        outcome["result"] = run_hpcjax(
            "submit", "--nodes", "2", "--gpus-per-node", "2", "--wait", "--", sys.executable, "-m", "hpcjax",
            "train", "--steps", "100000", "--seq-len", "32", "--d-model", "64", "--layers", "1", "--d-ff", "128",
            "--batch-size", "16", "--checkpoint-every", "0", "--run-dir", str(tmp_path / "run"),
            cwd=tmp_path, timeout=300)

    thread = threading.Thread(target=run)
    thread.start()
    log_dir, pid = tmp_path / "hpcjax-logs", None
    deadline = time.monotonic() + 120
    while pid is None and time.monotonic() < deadline:
        logs = list(log_dir.glob("*-rank3.log")) if log_dir.is_dir() else []
        metrics = tmp_path / "run" / "metrics.jsonl"
        if logs and metrics.exists() and metrics.read_text().count("\n") >= 3:
            pid = int(re.search(r"\(pid (\d+)\)", logs[0].read_text()).group(1))
        time.sleep(0.5)
    assert pid is not None, "training did not start"
    os.kill(pid, signal.SIGKILL)
    thread.join(240)
    result = outcome["result"]
    assert result.returncode != 0
    assert "rank 3 on node2 failed: Killed" in result.stderr
    assert "likely cause: killed by a signal" in result.stderr
    assert "ranks stopped by srun after the failure: 0-2" in result.stderr
    assert json.loads(run_hpcjax("status", result.stdout.strip(), "--json", cwd=tmp_path).stdout)["state"] == "FAILED"


def test_python_api_submits_and_waits(tmp_path, slurm_cluster, hpcjax_home, monkeypatch):
    from hpcjax.launch import submit
    from hpcjax.job.spec import JobSpec, Layout

    monkeypatch.chdir(tmp_path)
    layout = Layout(nodes=2, gpus_per_node=1)
    good = submit(JobSpec(command=("true",), layout=layout, output_dir=str(tmp_path / "a")), "slurm").wait()
    assert good.ok and good.exit_code == 0
    bad = submit(JobSpec(command=("false",), layout=layout, output_dir=str(tmp_path / "b")), "slurm").wait()
    assert (bad.state, bad.exit_code) == ("FAILED", 1)
    assert {f.reason for f in bad.failed} == {"Exited with exit code 1"}


def test_unknown_job_ids_are_clear_errors(tmp_path, slurm_cluster, hpcjax_home):
    for verb in ("status", "logs"):
        result = run_hpcjax(verb, "987654", cwd=tmp_path)
        assert result.returncode == 1 and "error: SLURM knows no job 987654" in result.stderr, result.stderr


def test_ids_squeue_cannot_read_do_not_hide_a_job_just_submitted(tmp_path, slurm_cluster, hpcjax_home):
    """In one process, an id asked for earlier that squeue refuses as no job number (0, 4294967294
    and up; `hpcjax status 0` with SLURM unreachable left one followed) once made the next poll
    answer for no job at all: a job just submitted was 'a job SLURM knows not' (CI, 2026-11-27)."""
    from hpcjax.slurm.controller import slurm_on

    slurm = slurm_on()
    for unreadable in ("0", "4294967294"):
        slurm.watcher.follow(unreadable)
    job = subprocess.run(["sbatch", "--parsable", "--wrap", "sleep 1", "-o", str(tmp_path / "out")],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert slurm.watcher.status(job, fresh=True).state in ("PENDING", "RUNNING", "COMPLETED")
    for unreadable in ("0", "4294967294"):
        with pytest.raises(HpcjaxError, match=f"SLURM knows no job {unreadable}"):
            slurm.watcher.status(unreadable, fresh=True)


def test_a_dry_run_asks_sbatch_for_its_verdict_and_estimate_and_submits_nothing(tmp_path, slurm_cluster, hpcjax_home):
    """`submit --dry-run` gives sbatch the very script with --test-only: what the scheduler would refuse
    is refused (found in a trial: 5 GPUs per node on 4-GPU nodes passed a dry run), else its estimate."""
    fits = run_hpcjax("submit", "--dry-run", "--nodes", "2", "--", "true", cwd=tmp_path)
    assert fits.returncode == 0 and "#SBATCH --nodes=2" in fits.stdout, fits.stderr
    assert re.search(r"SLURM's estimate \(sbatch --test-only, nothing submitted\): it would start (now|at 20|not known)",
                     fits.stderr), fits.stderr
    too_big = run_hpcjax("submit", "--dry-run", "--gpus-per-node", "5", "--", "true", cwd=tmp_path)
    assert too_big.returncode == 2 and too_big.stdout == "", too_big.stderr  # sinfo's GPUs per node, before sbatch
    assert "(at most 4 GPUs on a node)" in too_big.stderr
    too_many_cpus = run_hpcjax("submit", "--dry-run", "--cpus-per-task", "64", "--", "true", cwd=tmp_path)
    assert too_many_cpus.returncode == 1 and too_many_cpus.stdout == "", too_many_cpus.stderr
    assert "sbatch --test-only refused the job (G1N1p1)" in too_many_cpus.stderr and "gres gpu:4" in too_many_cpus.stderr
    assert not (tmp_path / "hpcjax-logs").exists()  # nothing made
