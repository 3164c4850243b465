"""The compilation cache across jobs on the dev cluster: two jobs writing one cache at
once, then a third job whose first step comes from it, all with the same losses; and
hybrid sharding on the two nodes."""

from __future__ import annotations

import sys

import pytest

from conftest import run_hpcjax
from support import MODEL, summary_in

pytestmark = pytest.mark.cluster


def submit(tmp_path, name: str, *options: str, wait: bool = False):
    # 2 processes of 2 GPUs, one per node: what these claims need (a mesh axis across the nodes and
    # one within), at half the processes (and compiles) of one per GPU, which other tests run
    result = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--gpus-per-process", "2",
                        *(["--wait"] if wait else []), "--",
                        sys.executable, "-m", "hpcjax", "train", "--steps", "8", "--checkpoint-every", "0", "--json",
                        "--run-dir", str(tmp_path / name), *MODEL, *options, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def wait_for(tmp_path, job: str) -> tuple[dict, str]:
    from hpcjax.launch import attach

    outcome = attach(job).wait(progress=False)
    assert outcome.ok, outcome.report()
    log = run_hpcjax("logs", job, "--rank", "0", cwd=tmp_path).stdout
    return summary_in(log), log


def test_concurrent_jobs_share_the_cache_and_a_later_job_starts_from_it(tmp_path, slurm_cluster, hpcjax_home):
    cache = str(tmp_path / "shared-cache")
    first, second = (submit(tmp_path, name, "--compile-cache", cache) for name in ("a", "b"))
    (summary_a, _), (summary_b, _) = wait_for(tmp_path, first), wait_for(tmp_path, second)
    warm_job = submit(tmp_path, "c", "--compile-cache", cache)
    summary_c, log_c = wait_for(tmp_path, warm_job)
    assert summary_a["losses"] == summary_b["losses"] == summary_c["losses"]
    assert f"(warm: executable loaded from {cache}/executables/train_step/" in log_c
    assert summary_c["time_to_first_step"]["compile_cache"].startswith(f"warm: executable loaded from {cache}/")


def test_hybrid_sharding_on_two_nodes(tmp_path, slurm_cluster, hpcjax_home):
    summary, log = wait_for(tmp_path, submit(tmp_path, "h", "--strategy", "hsdp"))
    assert "mesh replica 2 (across 2 nodes) x data 2 (within a node) x tensor 1" in log
    assert summary["last_loss"] < summary["first_loss"]
