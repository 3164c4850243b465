"""A job that waits, on the dev cluster with its queue made busy on purpose: one job holds every GPU
of the default partition's 2 nodes; the next one pends (its submit said SLURM's estimate, not now), and `hpcjax status` says why in words, with what to change, and
when SLURM expects it to start once the backfill scheduler has computed it (from squeue's %S, what
`squeue --start` shows); `hpcjax free` shows no GPU free and SLURM's estimate of a start. Serial:
the filler holds every GPU, so nothing else could run beside it."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from conftest import run_hpcjax

pytestmark = [pytest.mark.cluster, pytest.mark.serial]


def test_a_pending_job_says_why_in_words_and_when_slurm_expects_it_to_start(tmp_path, slurm_cluster, hpcjax_home):
    filler = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "4", "--time", "3", "-J", "filler", "--",
                        "sleep", "170", cwd=tmp_path)
    assert filler.returncode == 0, filler.stderr
    busy = filler.stdout.strip()
    waiting = None
    try:
        deadline = time.monotonic() + 60
        while json.loads(run_hpcjax("status", busy, "--json", cwd=tmp_path).stdout)["state"] != "RUNNING":
            assert time.monotonic() < deadline
            time.sleep(0.5)
        done = run_hpcjax("submit", "--nodes", "1", "--gpus-per-node", "1", "--time", "1", "--", "true", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "SLURM's estimate (sbatch --test-only): it would start at 20" in done.stderr, done.stderr
        waiting = done.stdout.strip()
        # The backfill scheduler computes an expected start within its interval (30 s by default).
        deadline, status = time.monotonic() + 90, {}
        while time.monotonic() < deadline:
            status = json.loads(run_hpcjax("status", waiting, "--json", cwd=tmp_path).stdout)
            if status["state"] == "PENDING" and status.get("reason") == "Resources" and status.get("start"):
                break
            time.sleep(2)
        assert status["state"] == "PENDING" and status["reason"] == "Resources" and status["start"], status
        text = run_hpcjax("status", waiting, cwd=tmp_path).stdout
        assert "PENDING: it waits for the nodes and GPUs it asked for to be free (Resources); SLURM expects it " \
               f"to start at {status['start'].replace('T', ' ')}" in text, text
        assert "to start sooner: fewer nodes or GPUs" in text
        expected = time.mktime(time.strptime(status["start"], "%Y-%m-%dT%H:%M:%S"))
        # the filler's end (its 3-minute limit from its start) or sooner: never a guess of hpcjax's own
        assert time.time() - 5 <= expected <= time.time() + 3 * 60 + 5, status["start"]
        print(f"expected start {status['start']} (a figure, not asserted beyond the filler's limit)")

        # `hpcjax free` sees the same: no GPU free now, a start for 1 GPU, never for 3 nodes.
        rows = {row["partition"]: row for row in json.loads(run_hpcjax("free", "--json", cwd=tmp_path).stdout)}
        row = rows["gpu"]
        assert (row["partition"], row["kind"], row["nodes"], row["total"], row["free"], row["fitting"]) == \
            ("gpu", "", 2, 8, 0, 0), row
        assert row["start"][:4].isdigit(), row  # a time, from sbatch --test-only
        typed = rows["a100"]  # the other partition, its own node idle: free now
        assert (typed["kind"], typed["nodes"], typed["total"], typed["free"], typed["fitting"], typed["start"]) == \
            ("a100", 1, 2, 2, 1, "now"), typed
        nevers = json.loads(run_hpcjax("free", "--nodes", "3", "--json", cwd=tmp_path).stdout)
        assert sorted(r["partition"] for r in nevers) == ["a100", "gpu"]
        assert all(r["start"].startswith("never: ") for r in nevers), nevers
        dry = run_hpcjax("submit", "--dry-run", "--nodes", "1", "--gpus-per-node", "1", "--time", "1", "--", "true",
                         cwd=tmp_path)
        assert "it would start at 20" in dry.stderr, dry.stderr  # not now: every GPU is held
        table = run_hpcjax("free", cwd=tmp_path).stdout
        assert [line.split()[:5] for line in table.splitlines()[1:]] == [["a100", "a100", "1", "2/2", "1"],
                                                                         ["gpu", "gpu", "2", "0/8", "0"]], table
    finally:
        subprocess.run(["scancel", busy] + ([waiting] if waiting else []), capture_output=True)
