"""Ctrl-C at the worst moment of a submission: the job exists (its id, its record) and the entry
point has not yet said so. The submission holds SIGINT until the id is announced (launch.steps);
then it lands, and every entry point says what became of the job, as it does for a Ctrl-C while
it waits: `submit` and `relaunch` name a job SLURM holds (it keeps running) and stop the local
backend's ranks; `smoke` cancels its job; `hold` leaves the hold queued and names it; the Trainer
(and @remote, tests/api/api_cases.py) cancels the job and names it; hpcjax.launch.submit raises the
interrupt with the Runs, and a script that ends on it stops its local ranks at exit. On this
machine's CPU, on the dev cluster (real sbatch), and from a laptop over the tests' own sshd.

The SIGINT is real: this process sends it to itself as the job's record is written
(support.ctrl_c_once_recorded), the moment a loaded CI machine once hit by chance (the submit
said 'nothing runs' of a job that ran, and then waited a minute for ranks it had left running)."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hpcjax
from conftest import REPO
from hpcjax.launch import attach
from support import cli, ctrl_c_once_recorded

SLEEPER = ("sleep", "120")  # found on every target (a laptop's Python path is not the cluster user's)
ONE_GPU = ("--nodes", "1", "--gpus-per-node", "1")


def ended_as(job: str, state: str) -> None:
    run = attach(job)
    deadline = time.monotonic() + 60
    while run.state() != state and time.monotonic() < deadline:
        time.sleep(0.3)
    assert run.state() == state


def processes_gone(job: str) -> None:
    """Every rank a local job started has ended (its record names their pids)."""
    from hpcjax.catalog import records
    from hpcjax.localjobs.environment import local_job_of

    pids = records.load(job)["pids"]
    assert pids and all(local_job_of(pid) != job for pid in pids)


def submitted(code: int, out: str, err: str) -> str:
    job = out.strip().splitlines()[-1] if out.strip() else ""
    assert code == 130 and job.isdigit(), err
    return job


def said_as_a_job_that_runs_on(where, job: str, err: str) -> None:
    target, _, reach = where
    if target == "local":
        assert f"interrupted: stopped every process of local job {job}" in err, err
        ended_as(job, "CANCELLED")
        processes_gone(job)
        return
    assert f"interrupted: job {job} keeps running on the cluster" in err and f"hpcjax cancel {job}" in err, err
    code, out, err = cli(Path.cwd(), "status", job, "--json", *reach)  # as the user is told to
    assert code == 0 and json.loads(out)["state"] in ("PENDING", "RUNNING", "CONFIGURING"), (out, err)
    code, out, err = cli(Path.cwd(), "cancel", job, *reach)
    assert code == 0, err


@pytest.fixture
def where(request, tmp_path, hpcjax_home):
    """(target, the options that submit there, those that reach the job there), as a user gives them."""
    if request.param == "local":
        return "local", ["--backend", "local"], []
    request.getfixturevalue("slurm_cluster")
    if request.param == "slurm":
        return "slurm", ["--backend", "slurm"], []
    ssh_cluster, laptop = request.getfixturevalue("ssh_cluster"), request.getfixturevalue("laptop")
    reach = ["--cluster", "devcluster", "--profile-file", str(ssh_cluster.profiles(laptop / "profiles.toml"))]
    return "laptop", reach, reach


TARGETS = [pytest.param("local"), pytest.param("slurm", marks=pytest.mark.cluster),
           pytest.param("laptop", marks=pytest.mark.cluster)]


@pytest.mark.parametrize("where", TARGETS, indirect=True)
def test_submit(where, tmp_path, monkeypatch):
    ctrl_c_once_recorded(monkeypatch)
    code, out, err = cli(tmp_path, "submit", *where[1], *ONE_GPU, "--", *SLEEPER)
    said_as_a_job_that_runs_on(where, submitted(code, out, err), err)


@pytest.mark.parametrize("where", TARGETS[:2], indirect=True)
def test_relaunch(where, tmp_path, monkeypatch):
    # A recorded run is relaunched whatever its state: no --wait for the first one (on a busy cluster
    # it queued for two minutes of CI); the local backend follows it to its end, as always.
    code, first, err = cli(tmp_path, "submit", *where[1], *ONE_GPU, "--", "true")
    assert code == 0, err
    ctrl_c_once_recorded(monkeypatch)
    code, out, err = cli(tmp_path, "relaunch", first.strip(), "--", *SLEEPER)
    said_as_a_job_that_runs_on(where, submitted(code, out, err), err)


@pytest.mark.parametrize("where", TARGETS[:2], indirect=True)
def test_smoke_cancels_its_job(where, tmp_path, monkeypatch):
    ctrl_c_once_recorded(monkeypatch)
    code, out, err = cli(tmp_path, "smoke", *where[1], *ONE_GPU)
    assert code == 130, err
    job = err.split("interrupted: cancelled smoke job ")[1].split()[0]
    ended_as(job, "CANCELLED")


@pytest.mark.cluster
def test_a_hold_stays_queued_and_is_named(tmp_path, slurm_cluster, hpcjax_home, monkeypatch):
    ctrl_c_once_recorded(monkeypatch)
    name = f"ctrlc{tmp_path.name[-4:]}".replace("_", "")
    code, out, err = cli(tmp_path, "hold", "--name", name, *ONE_GPU, "--time", "00:05:00")
    job = submitted(code, out, err)
    try:
        assert f"interrupted: hold {name} (job {job}) stays queued" in err and f"hpcjax release {name}" in err, err
        assert attach(job).state() in ("PENDING", "RUNNING", "CONFIGURING")
    finally:
        cli(tmp_path, "release", name)


@pytest.mark.parametrize("backend", ["local", pytest.param("slurm", marks=pytest.mark.cluster)])
def test_the_trainer_cancels_its_job_and_names_it(backend, request, tmp_path, hpcjax_home, monkeypatch, capsys):
    storage = request.getfixturevalue("shared_storage") if backend == "slurm" else tmp_path
    ctrl_c_once_recorded(monkeypatch)
    scaling = hpcjax.ScalingConfig(nodes=1, gpus_per_node=1, time="00:05:00")
    trainer = hpcjax.Trainer(functools.partial(time.sleep, 120), scaling_config=scaling,
                             run_config=hpcjax.RunConfig(storage_path=str(storage), name="ctrlc", backend=backend))
    with pytest.raises(KeyboardInterrupt) as interrupt:
        trainer.fit()
    job = str(interrupt.value).split("interrupted: job ")[1].split()[0]
    assert str(interrupt.value) == f"interrupted: job {job} was cancelled"
    assert f"interrupted: cancelled job {job}" in capsys.readouterr().err
    ended_as(job, "CANCELLED")


SCRIPT = """\
import sys
import pytest
from support import ctrl_c_once_recorded
from hpcjax.launch import runs_of, submit
from hpcjax.job.spec import JobSpec, Layout

ctrl_c_once_recorded(pytest.MonkeyPatch())
try:
    submit(JobSpec(command={command!r}, layout=Layout(nodes=1, gpus_per_node=2), output_dir=sys.argv[1]),
           {backend!r})
except KeyboardInterrupt as interrupt:
    print("carried", *[run.job_id for run in runs_of(interrupt)], file=sys.stderr, flush=True)
    raise
print("not reached")
"""


@pytest.mark.parametrize("backend", ["local", pytest.param("slurm", marks=pytest.mark.cluster)])
def test_a_script_of_the_run_api_ends_on_the_interrupt_and_stops_its_local_ranks(backend, request, tmp_path,
                                                                                 hpcjax_home):
    if backend == "slurm":
        request.getfixturevalue("slurm_cluster")
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(command=SLEEPER, backend=backend))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "logs")], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO / "tests")})
    assert done.returncode == -signal.SIGINT and "not reached" not in done.stdout, done.stderr  # as CPython ends on one
    said = done.stderr.strip().splitlines()
    job = next(line for line in said if line.startswith("KeyboardInterrupt: ")).split("interrupted once job ")[1]
    job = job.split()[0]
    assert f"carried {job}\n" in done.stderr
    if backend == "local":
        assert f"interrupted: stopped every process of local job {job}" in done.stderr, done.stderr
        ended_as(job, "CANCELLED")
        processes_gone(job)
        assert json.loads((hpcjax_home / "jobs" / f"{job}.json").read_text())["state"] == "CANCELLED"
    else:
        assert attach(job).state() in ("PENDING", "RUNNING", "CONFIGURING")
        attach(job).cancel()


@pytest.mark.parametrize("verb", ["submit", "smoke"])
def test_before_the_job_exists_nothing_runs_and_it_is_said(verb, tmp_path, hpcjax_home, monkeypatch):
    """The other side of the moment: a Ctrl-C while the job is staged, before it is handed over."""
    from hpcjax.launch import staging

    staged = staging.stage

    def ctrl_c_then_stage(sub, probe):
        signal.raise_signal(signal.SIGINT)  # not held yet: it lands here
        return staged(sub, probe)

    monkeypatch.setattr(staging, "stage", ctrl_c_then_stage)
    command = ["--", *SLEEPER] if verb == "submit" else []
    code, out, err = cli(tmp_path, verb, "--backend", "local", *ONE_GPU, *command)
    assert (code, out) == (130, "") and "interrupted before the job was submitted: nothing runs" in err, err
    assert not (hpcjax_home / "jobs").exists() or not list((hpcjax_home / "jobs").iterdir())
