"""The catalog of runs on the dev cluster (issue 25): jobs of every kind (a CLI submit, a
failing one, a smoke test, a job that requeued itself once, a remote map of 3, a Trainer run) appear in
`hpcjax runs` with their states and attempts, and their GPU hours are sacct's elapsed
times x GPUs, summed over attempts."""

from __future__ import annotations

import json
import sys

import pytest

import api_cases
import hpcjax
from conftest import run_hpcjax, start_hpcjax
from hpcjax.slurm.controller import run_slurm

pytestmark = pytest.mark.cluster

SECOND_ATTEMPT_PASSES = "import os, sys, time; time.sleep(2); sys.exit(0 if os.environ.get('SLURM_RESTART_COUNT', '0') != '0' else 3)"


def submit(cwd, *argv):
    return start_hpcjax("submit", "--wait", *argv, cwd=cwd)


def key_of(started) -> str:
    done = started.result(timeout=600)
    return done.stdout.split()[0] if done.stdout.strip() else pytest.fail(done.stderr)


@pytest.mark.waits  # jobs queued and a chain: 13 CPU-s in 29 s alone
def test_every_kind_of_job_is_in_the_catalog_with_its_attempts_and_gpu_hours(tmp_path, slurm_cluster, hpcjax_home):
    # Started together (none depends on another), so that their queue waits overlap: one after
    # the other they held a worker 140 s (CI 38), mostly queued behind other tests' 8-GPU jobs.
    started = [submit(tmp_path, "-J", "plain", "--nodes", "2", "--gpus-per-node", "2", "--", "hostname"),
               submit(tmp_path, "-J", "failing", "--", sys.executable, "-c", "raise SystemExit(3)"),
               submit(tmp_path, "-J", "requeued", "--requeue", "1", "--retry-failed", "--gpus-per-node", "2", "--",
                      sys.executable, "-c", SECOND_ATTEMPT_PASSES)]
    smoke = start_hpcjax("smoke", "--nodes", "2", "--gpus-per-node", "2", cwd=tmp_path)
    square = hpcjax.remote(nodes=1, gpus_per_node=1, backend="slurm", storage_path=str(tmp_path / "calls"))(
        api_cases.square_or_fail)
    assert [c.result() for c in square.map([1, 2, 4])] == [2, 5, 17]
    trainer = hpcjax.Trainer(api_cases.counting_loop, train_loop_config={"start": 1.0, "pause": 0.0,
                                                                         "scratch": str(tmp_path / "scratch")},
                             scaling_config=hpcjax.ScalingConfig(nodes=1, gpus_per_node=2),
                             run_config=hpcjax.RunConfig(storage_path=str(tmp_path / "results"), name="count",
                                                         backend="slurm"))
    assert trainer.fit().error is None
    plain, failing, requeued = map(key_of, started)
    done = smoke.result(timeout=600)
    assert done.returncode == 0, done.stderr

    listed = run_hpcjax("runs", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = {r["key"]: r for r in json.loads(listed.stdout)}
    assert (rows[plain]["state"], rows[plain]["kind"], rows[plain]["name"]) == ("COMPLETED", "command", "plain")
    assert (rows[failing]["state"], rows[failing]["exit_code"]) == ("FAILED", 3)
    assert [a["state"] for a in rows[requeued]["attempts"]] == ["REQUEUED", "COMPLETED"]
    assert rows[requeued]["state"] == "COMPLETED"
    [smoke_run] = [r for r in rows.values() if r["kind"] == "smoke"]
    assert smoke_run["state"] == "COMPLETED" and smoke_run["nodes"] == 2
    mapped = sorted(k for k, r in rows.items() if r["kind"] == "api" and r["name"] == "square_or_fail")
    assert len(mapped) == 3 and all(rows[k]["state"] == "COMPLETED" for k in mapped)
    [trained] = [r for r in rows.values() if r["kind"] == "api" and r["name"] != "square_or_fail"]
    assert trained["state"] == "COMPLETED" and trained["gpus_per_node"] == 2
    assert len({k.split("_")[0] for k in mapped}) == 1  # one job array

    # GPU hours: sacct's elapsed seconds x the GPUs it allocated, summed over each job's attempts
    text = run_slurm(["sacct", "-X", "--duplicates", "-P", "-n", "-j", ",".join(sorted({k.split("_")[0] for k in rows})),
                      "-o", "JobID,ElapsedRaw,AllocTRES"])
    expected: dict[str, float] = {}
    for line in text.splitlines():
        job, elapsed, tres = line.split("|")
        gpus = next(int(p.split("=")[1]) for p in tres.split(",") if p.startswith("gres/gpu="))
        expected[job] = expected.get(job, 0.0) + gpus * int(elapsed) / 3600
    for key, row in rows.items():
        assert row["gpu_hours"] == pytest.approx(expected[key], abs=2 * row["nodes"] * row["gpus_per_node"] / 3600), key
    assert rows[requeued]["gpu_hours"] > 0

    shown = run_hpcjax("runs", "show", failing, cwd=tmp_path)
    node = run_slurm(["sacct", "-X", "-n", "-P", "-j", failing, "-o", "NodeList"]).strip()  # where SLURM put it
    assert f"rank 0 on {node} failed: Exited with exit code 3" in shown.stdout, shown.stdout + shown.stderr
    table = run_hpcjax("runs", "--state", "completed", cwd=tmp_path).stdout
    # by the ID column: job 12 was "in" a table of jobs submitted on 12-07 (CI of 2026-12-07, where this
    # test ran first in its lane and its jobs had two-digit ids)
    listed = [line.split()[0] for line in table.splitlines()[1:] if line.strip()]
    assert plain in listed and failing not in listed, table
