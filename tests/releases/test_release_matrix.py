"""The release matrix (issue 62): the same claims on SLURM 20.11, 22.05, 24.11 and 26.05, each
release's own slurmctld, slurmd, slurmdbd and client commands (slurm/devcluster/up.sh --release R;
every release but this machine's 22.05 in a Debian root of its own, releases.sh). hpcjax runs on
each cluster's login side (on.sh R), its ranks in that release's jobs, with this machine's Python,
JAX and hpcjax.

Per release: `site` learns the cluster and `site --check` proves it with its profile (smoke of both
layouts, a preflight, the exit of an unmodified script, logs, stacks and cancel); a failure named
with its rank and node; a job that stopped on the warning, requeued, resuming; a hold with a job in it; a
sweep array and an `--after` chain; typed GPUs; a pending job's reason and SLURM's start estimate,
and `free`. Each release's tests run in order on one worker (its xdist group): its cluster is its
own, so the pending test may fill it. Differences the matrix found are rows of
docs/slurm-versions.md, each with its test here or in test_release_differences.py."""

from __future__ import annotations

import json
import re
import sys
import time

import pytest

from conftest import SHARED_MACHINE_PROFILE
from releases_support import RELEASES, hpcjax_on, on_release

pytestmark = pytest.mark.cluster

REPORT_WHERE = [sys.executable, "-c", "import os; print('rank', os.environ['SLURM_PROCID'], 'on',"
                " os.environ['SLURMD_NODENAME'], 'sees', os.environ.get('CUDA_VISIBLE_DEVICES'))"]


def on_releases(releases):
    """One test per release, each release's in one xdist group (one worker, in file order)."""
    cases = [pytest.param(r, id=r, marks=pytest.mark.xdist_group(f"release-{r}")) for r in releases]
    return pytest.mark.parametrize("release", cases)


# The releases whose clusters this matrix has to itself. 22.05's is the dev cluster, which the whole
# suite shares: each claim below has its own tests there (docs/testing.md names them), and the
# matrix's cells would only queue behind them (CI: up to 141 s for a node's 4 GPUs, and a pending
# job's estimate taken by the other tests' jobs). What the matrix found on 22.05 is tested there too.
per_release = on_releases(tuple(r for r in RELEASES if r != "22.05"))
every_release = on_releases(RELEASES)


def status_of(release: str, job: str, cwd) -> dict:
    done = hpcjax_on(release, "status", job, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def wait_state(release: str, job: str, cwd, states, timeout: float = 240) -> dict:
    deadline, status = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        status = status_of(release, job, cwd)
        if status["state"] in states:
            return status
        time.sleep(1)
    pytest.fail(f"job {job} on {release} did not reach {states} in {timeout} s: {status}")


@per_release
def test_site_learns_the_release_and_its_check_passes(release, release_cluster, shared_storage, hpcjax_home):
    profiles = shared_storage / "profiles.toml"
    learnt = hpcjax_on(release, "site", "--no-node", "--name", "rel", "--profile-file", str(profiles),
                       cwd=shared_storage)
    assert learnt.returncode == 0, learnt.stderr
    written = profiles.read_text()
    assert f"(SLURM {release}." in written, written  # the release's own controller answered
    assert 'partition = "gpu"' in written and "\ngpus_per_node = 4" in written, written
    profiles.write_text(written.replace("\ngpus_per_node = 4", "\ngpus_per_node = 2\n" + SHARED_MACHINE_PROFILE))
    done = hpcjax_on(release, "site", "--check", "--profile", "rel", "--profile-file", str(profiles), "--json",
                     cwd=shared_storage, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    verdicts = {r["check"]: (r["verdict"], r["detail"]) for r in json.loads(done.stdout)["results"]}
    assert verdicts["smoke, one process per GPU"] == ("passed", "4 of 4 ranks passed"), verdicts
    assert verdicts["smoke, one process per node"] == ("passed", "2 of 2 ranks passed"), verdicts
    assert verdicts["preflight"][0] == "passed", verdicts
    assert verdicts["an unmodified script's exit"][0] == "passed", verdicts
    assert "program's own status 3" in verdicts["an unmodified script's exit"][1], verdicts
    assert verdicts["logs, stacks, cancel"][0] == "passed", verdicts


@per_release
def test_a_failure_is_named_with_its_rank_and_node(release, release_cluster, tmp_path, hpcjax_home):
    program = ("import os, sys, time\nif os.environ['SLURM_PROCID'] == '3':\n"
               "    print('rank three gives up', flush=True)\n    sys.exit(3)\ntime.sleep(60)\n")
    done = hpcjax_on(release, "submit", "--nodes", "2", "--gpus-per-node", "2", "--wait", "--",
                     sys.executable, "-c", program, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "rank 3 on node2 failed: Exited with exit code 3" in done.stderr, done.stderr
    assert "rank three gives up" in done.stderr
    status = status_of(release, done.stdout.split()[0], tmp_path)
    assert (status["state"], status["exit_code"]) == ("FAILED", "3:0"), status


# A program that stops on SLURM's warning as `hpcjax train` does (it saves, and leaves the stop marker
# the batch script reads: hpcjax.protocol.contract.STOP_MARKER_ENV), without JAX: what differs between
# releases is SLURM's requeue, not the checkpoint (resuming `hpcjax train` from one: the 22.05 suite).
STOPS_ONCE = """import os, pathlib, sys
state = pathlib.Path(sys.argv[1])
if os.environ.get("SLURM_RESTART_COUNT", "0") == "0":
    state.write_text("4")
    pathlib.Path(os.environ["HPCJAX_STOP_MARKER"]).touch()
else:
    print("resumed from step", state.read_text(), "in attempt", int(os.environ["SLURM_RESTART_COUNT"]) + 1)
"""


@per_release
def test_a_job_that_stopped_is_requeued_and_resumes(release, release_cluster, shared_storage, hpcjax_home):
    done = hpcjax_on(release, "submit", "--nodes", "1", "--gpus-per-node", "1", "--requeue", "1", "--wait", "--",
                     sys.executable, "-c", STOPS_ONCE, str(shared_storage / "state"), cwd=shared_storage, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    status = status_of(release, done.stdout.split()[0], shared_storage)
    assert [(a["attempt"], a["ended"]) for a in status["attempts"]] == [(1, "stopped"), (2, "completed")], status
    log = hpcjax_on(release, "logs", done.stdout.split()[0], "--rank", "0", cwd=shared_storage).stdout
    assert "resumed from step 4 in attempt 2" in log, log[-2000:]


@per_release
def test_a_hold_runs_a_job_and_release_ends_it(release, release_cluster, tmp_path, hpcjax_home):
    name = f"m{release.replace('.', '')}"
    held = hpcjax_on(release, "hold", "--name", name, "--nodes", "2", "--gpus-per-node", "1", "--time", "00:05:00",
                     cwd=tmp_path)
    assert held.returncode == 0, held.stderr
    hold_job = held.stdout.strip()
    try:
        job = hpcjax_on(release, "submit", "--on", name, "--nodes", "2", "--wait", "--", *REPORT_WHERE, cwd=tmp_path)
        assert job.returncode == 0, job.stderr
        assert job.stdout.strip() == f"{hold_job}.s1", job.stdout
        logs = hpcjax_on(release, "logs", f"{hold_job}.s1", cwd=tmp_path).stdout
        assert "rank 0 on node1" in logs and "rank 1 on node2" in logs, logs
    finally:
        released = hpcjax_on(release, "release", name, cwd=tmp_path)
    assert released.returncode == 0, released.stderr
    assert on_release(release, "squeue", "-h", "-j", hold_job).stdout.strip() == ""


@per_release
def test_a_sweep_is_one_array_and_a_chain_runs_in_order(release, release_cluster, tmp_path, hpcjax_home):
    swept = hpcjax_on(release, "submit", "--wait", "--sweep", "x=1,2", "--", sys.executable, "-c",
                      "print('x is', {x})", cwd=tmp_path)
    assert swept.returncode == 0, swept.stderr
    array = swept.stdout.split()[0]
    rows = json.loads(hpcjax_on(release, "runs", "--sweep", array, "--json", cwd=tmp_path).stdout)
    assert sorted((r["key"], r["state"], r["sweep_values"]["x"]) for r in rows) == \
        [(f"{array}_0", "COMPLETED", "1"), (f"{array}_1", "COMPLETED", "2")], rows
    first = hpcjax_on(release, "submit", "-J", "first", "--", sys.executable, "-c", "import time; time.sleep(3)",
                      cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    second = hpcjax_on(release, "submit", "-J", "second", "--after", first.stdout.split()[0], "--wait", "--",
                       "true", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    ends = {key: status_of(release, key, tmp_path) for key in (first.stdout.split()[0], second.stdout.split()[0])}
    assert all(s["state"] == "COMPLETED" for s in ends.values()), ends


@every_release
def test_each_task_is_bound_to_its_own_gpus_typed_or_not(release, release_cluster, tmp_path, hpcjax_home):
    """Found by this matrix: --gpus-per-task alone binds nothing on 20.11, and on 22.05 leaves a typed
    job's tasks without CUDA_VISIBLE_DEVICES; the batch script binds them itself (slurm-versions.md)."""
    typed = hpcjax_on(release, "submit", "--partition", "a100", "--gpu-type", "a100", "--nodes", "1",
                      "--gpus-per-node", "2", "--wait", "--", *REPORT_WHERE, cwd=tmp_path)
    pairs = hpcjax_on(release, "submit", "--nodes", "1", "--gpus-per-node", "4", "--gpus-per-process", "2",
                      "--wait", "--", *REPORT_WHERE, cwd=tmp_path)
    assert typed.returncode == 0 and pairs.returncode == 0, typed.stderr + pairs.stderr
    logs = hpcjax_on(release, "logs", typed.stdout.split()[0], cwd=tmp_path).stdout
    assert "rank 0 on node3 sees 0\n" in logs and "rank 1 on node3 sees 1\n" in logs, logs
    logs = hpcjax_on(release, "logs", pairs.stdout.split()[0], cwd=tmp_path).stdout
    # on whichever gpu node is free (on 22.05, the dev cluster the other tests share, node1 may not be)
    assert re.search(r"rank 0 on (node[12]) sees 0,1\n(?:.*\n)*?.*rank 1 on \1 sees 2,3\n", logs), logs


@per_release
def test_a_pending_job_says_why_and_when_and_free_agrees(release, release_cluster, tmp_path, hpcjax_home):
    filler = hpcjax_on(release, "submit", "--partition", "a100", "--gpu-type", "a100", "--nodes", "1",
                       "--gpus-per-node", "2", "--time", "2", "--", "sleep", "100", cwd=tmp_path)
    assert filler.returncode == 0, filler.stderr
    busy, waiting = filler.stdout.split()[0], None
    try:
        wait_state(release, busy, tmp_path, ("RUNNING",), timeout=60)
        done = hpcjax_on(release, "submit", "--partition", "a100", "--gpu-type", "a100", "--nodes", "1",
                         "--gpus-per-node", "1", "--time", "1", "--", "true", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "SLURM's estimate (sbatch --test-only): it would start at 20" in done.stderr, done.stderr
        waiting = done.stdout.split()[0]
        deadline, status = time.monotonic() + 60, {}
        while time.monotonic() < deadline:
            status = status_of(release, waiting, tmp_path)
            if status.get("reason") == "Resources" and status.get("start"):
                break
            time.sleep(1)
        assert (status["state"], status["reason"]) == ("PENDING", "Resources") and status["start"], status
        text = hpcjax_on(release, "status", waiting, cwd=tmp_path).stdout
        assert "it waits for the nodes and GPUs it asked for to be free (Resources); SLURM expects it to start" \
               in text, text
        rows = {r["partition"]: r for r in json.loads(hpcjax_on(release, "free", "--json", cwd=tmp_path).stdout)}
        assert (rows["a100"]["free"], rows["a100"]["total"]) == (0, 2) and rows["a100"]["start"][:2] == "20", rows
        assert (rows["gpu"]["free"], rows["gpu"]["start"]) == (8, "now"), rows
    finally:
        on_release(release, "scancel", busy, *([waiting] if waiting else []))
