"""Sweeps and chains on the dev cluster (issue 25, part 2): a 2x2 sweep of `hpcjax train` is one
job array of four whose values and final losses `hpcjax runs --sweep` lists; a chain of three
whose second link fails leaves the third cancelled by SLURM, not pending, with a report that says
why; a chain that succeeds runs in order. The local backend's cases:
tests/launch/test_sweeps_chains.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import run_hpcjax
from hpcjax.launch import attach
from hpcjax.slurm.controller import run_slurm
from support import MODEL, wait_until

pytestmark = pytest.mark.cluster

TINY = [m for m in MODEL if m not in ("--layers", "1")]  # the sweep sets --layers


def test_a_2x2_sweep_is_one_array_of_four_with_values_and_losses(tmp_path, slurm_cluster, hpcjax_home):
    done = run_hpcjax("submit", "--wait", "--sweep", "lr=3e-3,1e-3", "--sweep", "layers=1,2", "--", sys.executable,
                      "-m", "hpcjax", "train", "--steps", "6", "--learning-rate", "{lr}", "--layers", "{layers}",
                      "--run-dir", "runs/lr{lr}-layers{layers}", *TINY, cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    array = done.stdout.split()[0]
    rows = json.loads(run_hpcjax("runs", "--sweep", array, "--json", cwd=tmp_path).stdout)
    assert sorted(r["key"] for r in rows) == [f"{array}_{i}" for i in range(4)]  # one job array of four
    values = {r["key"]: r["sweep_values"] for r in rows}
    assert values[f"{array}_0"] == {"lr": "3e-3", "layers": "1"} and values[f"{array}_3"] == {"lr": "1e-3", "layers": "2"}
    for row in rows:
        record = [json.loads(line) for line in
                  (tmp_path / "runs" / f"lr{row['sweep_values']['lr']}-layers{row['sweep_values']['layers']}"
                   / "metrics.jsonl").read_text().splitlines()]
        assert row["state"] == "COMPLETED" and row["metrics"]["loss"] == [r for r in record if "loss" in r][-1]["loss"]
    config = json.loads((tmp_path / "runs" / "lr1e-3-layers2" / "config.json").read_text())
    assert config["learning_rate"] == 1e-3 and config["model"]["layers"] == 2  # the values reached the program
    table = run_hpcjax("runs", "--sweep", array, "--sort", "val_loss", cwd=tmp_path).stdout.splitlines()
    assert table[0].split() == ["ID", "lr", "layers", "STATE", "VAL_LOSS"] and len(table) == 5
    losses = [float(line.split()[-1]) for line in table[1:]]
    assert losses == sorted(losses)  # which setting won comes first


def link(cwd, name: str, code: int, *after: str, gate: str = "") -> str:
    """A job of the chain: it waits for the gate file (when given), then for 2 s, then ends with code."""
    wait = f"while not os.path.exists({gate!r}): time.sleep(0.2)\n" if gate else ""
    program = f"import os, sys, time\n{wait}time.sleep(2); print('{name} ran'); sys.exit({code})"
    done = run_hpcjax("submit", "-J", name, *[a for job in after for a in ("--after", job)], "--",
                      sys.executable, "-c", program, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[0]


def test_a_chain_whose_second_link_fails_cancels_the_third_with_the_reason(tmp_path, slurm_cluster, hpcjax_home):
    # the chain starts once all three are queued: under load, a second link that failed before the third was
    # submitted had the third refused (test_after_a_job_that_already_failed_is_refused_...), not cancelled
    gate = tmp_path / "go"
    first = link(tmp_path, "first", 0, gate=str(gate))
    second = link(tmp_path, "second", 3, first)
    third = link(tmp_path, "third", 0, second)
    gate.touch()
    outcome = attach(third).wait(progress=False)
    assert outcome.state == "CANCELLED", outcome.report()
    assert f"not started: job {second} failed (--after {second}:ok), so SLURM cancelled this one" in outcome.report()
    assert attach(second).wait(progress=False).exit_code == 3 and attach(first).outcome.ok
    rows = {r["key"]: r for r in json.loads(run_hpcjax("runs", "--json", cwd=tmp_path).stdout)}
    assert rows[third]["state"] == "CANCELLED" and rows[third]["attempts"][0]["start"] is None
    assert "third ran" not in "".join(p.read_text() for p in (tmp_path / "hpcjax-logs").glob(f"{third}-*"))
    status = run_hpcjax("status", third, cwd=tmp_path)
    assert "not started: job" in status.stdout + status.stderr


def test_a_chain_that_succeeds_runs_in_order(tmp_path, slurm_cluster, hpcjax_home):
    first = link(tmp_path, "first", 0)
    second = link(tmp_path, "second", 0, first)
    third = link(tmp_path, "third", 0, f"{second}:any")
    assert all(attach(job).wait(progress=False).ok for job in (first, second, third))
    rows = run_slurm(["sacct", "-X", "-n", "-P", "-j", f"{first},{second},{third}", "-o", "JobID,Start,End"])
    times = {job: (start, end) for job, start, end in (line.split("|") for line in rows.splitlines())}
    assert times[first][1] <= times[second][0] and times[second][1] <= times[third][0]


def test_after_a_job_slurm_does_not_know_is_refused_before_sbatch(tmp_path, slurm_cluster, hpcjax_home):
    """SLURM drops a dependency on an unknown job and starts the job at once (issue 34)."""
    done = run_hpcjax("submit", "--after", "987654321", "--job-name", "never-runs", "--", "true", cwd=tmp_path)
    assert done.returncode == 2 and "SLURM on this machine knows no job 987654321" in done.stderr, done.stderr
    assert done.stdout == ""
    listed = subprocess.run(["squeue", "-h", "-n", "never-runs"], capture_output=True, text=True)
    assert listed.stdout.strip() == ""


def failed_job(tmp_path) -> str:
    """A job that failed a moment ago, as the controller has it (squeue -t all says FAILED)."""
    job = run_slurm(["sbatch", "--parsable", "-o", str(tmp_path / "failed-%j.out"), "--wrap", "exit 3"]).strip()
    wait_until(lambda: run_slurm(["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"]).strip() == "FAILED")
    return job


def lagging_accounting(tmp_path, squeue_first: str = "", sacct_says: str = "") -> dict:
    """PATH with a `sacct` that knows nothing yet (or only sacct_says), as slurmdbd under load (seconds
    behind the controller), and, given squeue_first, a `squeue` whose first answer is that (the controller's
    view a moment earlier); every other command, sbatch --test-only included, is SLURM's own. The stand-ins
    are the lag only."""
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "sacct").write_text(f'#!/bin/sh\necho "{sacct_says}"\n' if sacct_says else "#!/bin/sh\nexit 0\n")
    if squeue_first:
        real = shutil.which("squeue")
        (shims / "squeue").write_text(f'#!/bin/sh\nif [ ! -e "{shims}/asked" ]; then touch "{shims}/asked"; '
                                      f'echo "{squeue_first}"; exit 0; fi\nexec {real} "$@"\n')
    for shim in shims.iterdir():
        shim.chmod(0o755)
    return {"PATH": f"{shims}:{os.environ['PATH']}"}


def test_after_a_job_that_already_failed_is_refused_though_accounting_lags(tmp_path, slurm_cluster, hpcjax_home):
    """CI's failure of the chain test, reproduced: the second link had failed, the controller knew it,
    accounting did not yet; the check let it through and sbatch --test-only answered "allocation failure:
    Requested operation is presently disabled" (SLURM cancels at once a job whose :ok dependency failed)."""
    job = failed_job(tmp_path)
    done = run_hpcjax("submit", "--after", job, "--", "true", cwd=tmp_path, env=lagging_accounting(tmp_path))
    assert done.returncode == 2 and f"--after {job}:ok: job {job} has already ended FAILED" in done.stderr, done.stderr
    assert f"--after {job}:any" in done.stderr and done.stdout == ""


def test_after_a_job_that_failed_during_the_check_is_refused_with_its_state(tmp_path, slurm_cluster, hpcjax_home):
    """The same job seen by the check while it was still completing (squeue's first answer), its end not
    yet in accounting: SLURM's own sbatch --test-only refuses it, and the refusal names the job and how it ended."""
    job = failed_job(tmp_path)
    done = run_hpcjax("submit", "--after", job, "--", "true", cwd=tmp_path,
                      env=lagging_accounting(tmp_path, squeue_first=f"{job}|COMPLETING"))
    assert done.returncode == 2, done.stderr
    assert f"job {job} has already ended FAILED" in done.stderr and "presently disabled" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_after_a_sweep_that_ended_is_known_by_its_elements_and_a_failed_one_named(tmp_path, slurm_cluster,
                                                                                  hpcjax_home):
    """Once a job array has run, squeue and sacct list its elements, not its id: `--after ARRAY` was
    refused as "SLURM knows no job" (found trying a chain after a sweep). Ended, with element 1 failed:
    :any is taken, :ok refused with the element that failed (SLURM's afterok needs every element)."""
    done = run_hpcjax("submit", "--wait", "--nodes", "1", "--gpus-per-node", "1", "--sweep", "code=0,3", "--",
                      "bash", "-c", "exit {code}", cwd=tmp_path)
    assert done.returncode != 0, done.stderr
    array = done.stdout.split()[0]
    refused = run_hpcjax("submit", "--after", array, "--", "true", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert f"--after {array}:ok: job {array} has already ended FAILED (its element {array}_1)" in refused.stderr
    assert refused.stdout == ""
    # accounting, seconds behind, has the array's own record without its element's number (what real sacct
    # answered here in 5 of 6 tries right after --wait; the stop of 2026-12-07 failed CI on it): the
    # controller's row names it
    lagging = run_hpcjax("submit", "--after", array, "--", "true", cwd=tmp_path,
                         env=lagging_accounting(tmp_path, sacct_says=f"{array}|FAILED"))
    assert lagging.returncode == 2, lagging.stderr
    assert f"job {array} has already ended FAILED (its element {array}_1)" in lagging.stderr, lagging.stderr
    after_any = run_hpcjax("submit", "--after", f"{array}:any", "--nodes", "1", "--gpus-per-node", "1", "--",
                           "true", cwd=tmp_path)
    assert after_any.returncode == 0, after_any.stderr
    assert attach(after_any.stdout.split()[0]).wait(progress=False).ok


def test_after_a_sweep_one_of_whose_elements_failed_is_refused_while_the_others_run(tmp_path, slurm_cluster,
                                                                                   hpcjax_home):
    """SLURM's afterok on an array waits for every element and then cancels the job if one failed:
    with element 1 failed and element 0 still running, `--after ARRAY` could only be cancelled."""
    done = run_hpcjax("submit", "--nodes", "1", "--gpus-per-node", "1", "--sweep", "code=0,3", "--",
                      "bash", "-c", "[ {code} = 0 ] && sleep 120; exit {code}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    array = done.stdout.split()[0]
    try:
        wait_until(lambda: run_slurm(["squeue", "-h", "-t", "all", "-j", f"{array}_1", "-o", "%T"]).strip() == "FAILED"
                   and run_slurm(["squeue", "-h", "-j", f"{array}_0", "-o", "%T"]).strip() == "RUNNING")
        refused = run_hpcjax("submit", "--after", array, "--", "true", cwd=tmp_path)
        assert refused.returncode == 2, refused.stderr
        # named by its element though accounting may have the failed element's row as the array's own for a
        # moment (the array's record is the last element SLURM started): the controller's row names it
        assert f"--after {array}:ok: job {array} has already ended FAILED (its element {array}_1)" in refused.stderr, \
            refused.stderr
        assert refused.stdout == ""
    finally:
        run_hpcjax("cancel", array, cwd=tmp_path)
