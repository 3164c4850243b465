"""The seam matrix (issue 34): every entry point x target x follow-up pair that can meet, in a
pairwise covering set (matrix.py), each cell a real job: on this machine's CPU (the local
backend), on the dev cluster, or on the dev cluster from a laptop through the tests' own sshd.

Each cell starts its job as a user would (entries.py), follows it up one way while it runs (its
follow-up), then checks what every job must answer to after it ends: `status` and `status
--json`, `logs`, the catalog (`runs --json`, `runs show`), `fetch`, and `report` (a page for a run
with a run directory, a clear refusal for one without)."""

from __future__ import annotations

import json
import re
import shutil
import time
from types import SimpleNamespace

import pytest

from conftest import shared_directory
from entries import ENTRY, Started
from matrix import CELLS, cost, name
from targets import RANKS, Held, Local, Slurm, Ssh

FINAL = {"watch": "COMPLETED", "follow": "COMPLETED", "stacks": "COMPLETED", "requeue": "COMPLETED",
         "cancel": "CANCELLED", "hang_short": "FAILED", "hang_default": "FAILED"}
GROUPS = ("cluster-a", "cluster-b", "cluster-c")
# Cells that only wait for the hang watch's default floor: started together by the first test of
# group cluster-a and followed through by its last, not by test_seam.
WAITING_TOGETHER = [cell for cell in CELLS if cell["follow_up"] == "hang_default"]
# In the cost units of matrix.py: the hang_default jobs end about 330 s after they start, and group
# cluster-a should be busy until then. With 120 (CI 17: 572 units took 226 s), once the probe requeues
# went to the waits lane, cluster-a's cells (510 units) took 225 s and its last test waited 107 s for
# the jobs; at about 2.3 units a second, 450 gave it ~730 units (~320 s) and the others ~280 each.
# Once the probes' hang_short cells went to the waits lane too (288 units), 590 keeps it at ~730.
HANG_WAIT_CREDIT = 590
# Cells that mostly wait: a probe requeued by SLURM waits out cred_expire (20 s) before its next attempt
# (trainer-ssh-requeue: 7 CPU-s in 27 s alone), and a probe's hang waited out to the watch's short
# floor (submit-local-hang_short: 3 CPU-s in 14 s alone; 7 cells, 28 CPU-s in 107 s). They run in the
# waits lane (scripts/test.sh), off the main run's workers; a training run's requeue or hang
# (train-slurm-requeue: 33 CPU-s in 39 s; train-ssh-hang_short: 21 CPU-s in 26 s) stays there.
IN_THE_LANE = [cell for cell in CELLS if cell["follow_up"] in ("requeue", "hang_short") and cell["entry"] != "train"]


def groups_by_cost() -> dict[str, str]:
    """Each cell's xdist group: the costliest first, each to the group with the least so far. The
    hang_default cells' five minutes pass while the first group runs its cells, so it starts with
    a credit: in CI 17 its cells took 226 s and its last test then waited 86 s for the hang jobs."""
    load = dict.fromkeys(GROUPS, 0)
    load[GROUPS[0]] = -HANG_WAIT_CREDIT
    chosen = {}
    for cell in sorted((c for c in CELLS if c not in WAITING_TOGETHER + IN_THE_LANE), key=cost, reverse=True):
        group = min(load, key=load.get)
        chosen[name(cell)] = group
        load[group] += cost(cell)
    return chosen


GROUP_OF = groups_by_cost()


def params():
    for cell in CELLS:
        if cell in WAITING_TOGETHER:
            continue
        tier = pytest.mark.jax if cell["target"] == "local" else pytest.mark.cluster
        if cell in IN_THE_LANE:
            yield pytest.param(cell, id=name(cell), marks=[tier, pytest.mark.waits])
        else:
            yield pytest.param(cell, id=name(cell), marks=[tier, pytest.mark.xdist_group(GROUP_OF[name(cell)])])


@pytest.fixture
def target(request, tmp_path):
    cell = request.node.callspec.params["cell"]
    home = tmp_path / "hpcjax-home"
    if cell["target"] == "local":
        return Local(tmp_path / "project", home)
    if cell["target"] in ("slurm", "hold"):
        storage = request.getfixturevalue("shared_storage")  # the nodes see it; a multi-node API job needs that
        if cell["target"] == "slurm":
            return Slurm(storage / "project", home)
        held = Held(storage / "project", home)
        held.up()
        request.addfinalizer(held.down)
        return held
    return Ssh(tmp_path / "project", home, request.getfixturevalue("ssh_cluster"))


@pytest.fixture(scope="module")
def hang_default_running(slurm_cluster):
    """The hang_default cells' shared storage and started jobs, (cell, target, Started) each: the
    first test of group cluster-a starts them, its last follows them through. Any still there at
    the module's end (the last test failed or was not selected) are cancelled."""
    cells = SimpleNamespace(storage=shared_directory("seam-hang-default"), running=[])
    yield cells
    for _, target, started in cells.running:
        target.hpcjax("cancel", started.job)
    shutil.rmtree(cells.storage, ignore_errors=True)


def start_hang_default_cells(cells: SimpleNamespace) -> None:
    for cell in WAITING_TOGETHER:
        target = Slurm(cells.storage / name(cell) / "project", cells.storage / name(cell) / "hpcjax-home")
        cells.running.append((cell, target, ENTRY[cell["entry"]](target, cell["follow_up"],
                                                                  target.release_path(f"release-{name(cell)}"))))


@pytest.mark.xdist_group(GROUPS[0])
def test_seam_hang_default_cells_start_together(hang_default_running):
    """The hang_default cells (a plain script's and a Trainer's, each ending only at the watch's
    300 s floor) start at once, here, and are followed through by the last test of their group
    (test_seam_hang_default_cells_end_at_the_floor): the same cells as test_seam would run, but
    their five minutes are spent while their worker runs the group's other cells, not waited out.

    Defined first, so it starts its group and the run: the other workers run the other groups'
    cells, two-rank jobs that fit beside it (the jobs ask a two-hour limit, so that SLURM's
    backfill starts the tests' one-hour jobs beside them: entries.walltime)."""
    assert len(WAITING_TOGETHER) == 2, WAITING_TOGETHER
    start_hang_default_cells(hang_default_running)
    assert all(started.job for _, _, started in hang_default_running.running)


@pytest.mark.parametrize("cell", list(params()))
def test_seam(cell, target):
    release = target.release_path(f"release-{name(cell)}")
    follow_through(cell, target, ENTRY[cell["entry"]](target, cell["follow_up"], release))


@pytest.mark.xdist_group(GROUPS[0])
def test_seam_hang_default_cells_end_at_the_floor(hang_default_running):
    """The last of group cluster-a: the hang_default cells started by its first test, each
    followed through (started here, if that test did not run: -k)."""
    if not hang_default_running.running:
        start_hang_default_cells(hang_default_running)
    while hang_default_running.running:
        cell, target, started = hang_default_running.running[0]
        follow_through(cell, target, started)
        hang_default_running.running.pop(0)


def follow_through(cell: dict, target, started: Started) -> None:
    """Follow a started cell up its way, then check what every job answers to after it ends."""
    try:
        if cell["follow_up"] != "cancel":  # a chain's first link ends at once (cancel: its second waits)
            release_others(target, started)
        FOLLOW_UP[cell["follow_up"]](target, started)
        release_others(target, started)
        code, out, err = started.finish()
    except BaseException:
        target.hpcjax("cancel", started.job)
        raise
    expected = FINAL[cell["follow_up"]]
    ended = observe(target, started, expected, err)
    if cell["follow_up"].startswith("hang"):
        assert_hang_named(target, started, cell, out, err, ended)
    if started.kind == "api":
        answer = json.loads(out.strip().splitlines()[-1])
        assert answer["state"] == expected and answer["ok"] == (expected == "COMPLETED"), (answer, err[-3000:])
        if expected == "COMPLETED" and cell["entry"] != "trainer":
            assert answer["value"][1] == RANKS and "probe rank 0 of 2" in answer["value"][0], answer
    else:
        assert code == {"COMPLETED": 0, "CANCELLED": 1}.get(expected, code), (code, err[-3000:])


def release_others(target, started: Started) -> None:
    if started.others_released:
        return
    for path, process in started.others:  # a chain's first link
        target.release(path)
        process.communicate(timeout=600)
    started.others_released = True


# --- follow-ups: while the job runs ----------------------------------------------------------------
# Each look is a command line (a Python start, and squeue and sacct for status: 0.1-0.3 s of CPU):
# every second, three cells waiting at once took a good part of a core from the jobs they wait for.
POLL_S = 2.0


def wait_running(t, job: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        shown = t.hpcjax("status", job, "--json")
        state = json.loads(shown.stdout)["state"] if shown.returncode == 0 else shown.stderr
        if state == "RUNNING":
            return
        assert time.monotonic() < deadline and state in ("PENDING", "REQUEUED") or "knows no job" in state, state
        time.sleep(POLL_S)


def wait_said(t, started: Started, words: str, ranks: int = RANKS, timeout: float = 300) -> None:
    """Until every rank's log holds `words` (what the ranks print when they reach a point)."""
    deadline = time.monotonic() + timeout
    while True:
        logs = t.hpcjax("logs", started.job)
        if logs.returncode == 0 and len({m for m in re.findall(rf"\[rank (\d+) [^\]]*\].*{words}", logs.stdout)}) >= ranks:
            return
        assert time.monotonic() < deadline, (logs.stdout[-2000:], logs.stderr[-2000:])
        time.sleep(POLL_S)


def watch(t, started: Started) -> None:
    if started.release:
        t.release(started.release)


def follow(t, started: Started) -> None:
    """`hpcjax logs --follow` from the start: every rank's lines as they come, until the job ends."""
    followed = t.hpcjax("logs", started.job, "--follow", timeout=900)
    assert followed.returncode == 0, followed.stderr[-3000:]
    assert re.search(rf"job {re.escape(started.job)} ended COMPLETED", followed.stderr), followed.stderr[-2000:]
    if started.probe:
        for rank in range(RANKS):
            assert re.search(rf"\[rank {rank} \S+\] probe rank {rank} of {RANKS} on \S+ ok", followed.stdout), \
                followed.stdout[-3000:]


def stacks(t, started: Started) -> None:
    """`hpcjax stacks` while every rank waits in a known place (a training run: while it trains)."""
    wait_running(t, started.job)
    if started.probe:
        wait_said(t, started, "waits")
    else:
        wait_said(t, started, r"step \d+", ranks=1)
    shown = t.hpcjax("stacks", started.job, timeout=180)
    assert shown.returncode == 0, (shown.stdout[-3000:], shown.stderr[-3000:])
    assert f"stacks of {RANKS} rank(s)" in shown.stdout, shown.stdout[-3000:]
    if started.probe:
        assert "wait_for_release" in shown.stdout, shown.stdout[-3000:]
    as_json = json.loads(t.hpcjax("stacks", started.job, "--json", timeout=180).stdout)
    assert sorted(r["rank"] for r in as_json["ranks"] if "threads" in r) == list(range(RANKS))
    watch(t, started)


def requeue(t, started: Started) -> None:
    """SLURM requeues the job while it runs; its next attempt ends it (a probe), or resumes (training)."""
    wait_running(t, started.job)
    wait_said(t, started, "waits" if started.probe else r"step \d+", ranks=RANKS if started.probe else 1)
    if not started.probe:  # a training run: requeued once a checkpoint was written
        wait_said(t, started, r"step 1\d", ranks=1)
    t.requeue(started.job)


def cancel(t, started: Started) -> None:
    """`hpcjax cancel` while it runs (a chain's second link, or a smoke test: while it waits to start)."""
    if not started.pending:
        wait_running(t, started.job)
        wait_said(t, started, "waits" if started.probe else r"step \d+", ranks=RANKS if started.probe else 1)
    done = t.hpcjax("cancel", started.job)
    assert done.returncode == 0 and f"cancelled job {started.job}" in done.stderr, done.stderr


def hang(t, started: Started) -> None:
    """Nothing to do: the hang watch ends the job (its verdict is checked after)."""


FOLLOW_UP = {"watch": watch, "follow": follow, "stacks": stacks, "requeue": requeue, "cancel": cancel,
             "hang_short": hang, "hang_default": hang}


# --- what every job answers to after it ends -------------------------------------------------------
def observe(t, started: Started, expected: str, said: str) -> dict:
    """status, logs, the catalog, fetch and report, each as the user types it. Returns status --json."""
    job = started.job
    status = t.hpcjax("status", job)
    assert status.returncode == 0 and expected in status.stdout, \
        (status.stdout, status.stderr, said[-3000:], t.hpcjax("logs", job, "--tail", "40").stdout)
    ended = json.loads(t.hpcjax("status", job, "--json").stdout)
    assert ended["state"] == expected, (ended, said[-3000:])
    never_ran = started.pending  # cancelled while it waited to start
    logs = t.hpcjax("logs", job)
    if never_ran:
        assert logs.returncode == 1 and "no rank logs of job" in logs.stderr and "Traceback" not in logs.stderr
    else:
        assert logs.returncode == 0, logs.stderr
        if started.probe:
            for rank in range(RANKS):
                assert re.search(rf"\[rank {rank} \S+\] probe rank {rank} of {RANKS}", logs.stdout), logs.stdout[-2000:]
    rows = json.loads(t.hpcjax("runs", "--json").stdout)
    [row] = [r for r in rows if r["job_id"] == job]
    assert (row["state"], row["kind"]) == (expected, "step" if t.name == "hold" else started.kind), row
    if never_ran:
        assert all(a["start"] is None for a in row["attempts"]), row["attempts"]
    shown = t.hpcjax("runs", "show", row["key"])
    assert shown.returncode == 0 and f"run {row['key']} (" in shown.stdout, shown.stderr
    fetched = t.hpcjax("fetch", job, "--to", f"back-{job}")
    if never_ran:
        assert fetched.returncode != 0 and "Traceback" not in fetched.stderr, fetched.stderr
    else:
        assert fetched.returncode == 0, fetched.stderr
        assert list((t.project / f"back-{job}" / "logs").glob("*-rank*.log")), fetched.stderr
    report = t.hpcjax("report", job, "--to", f"report-{job}")
    if started.run_dir and not never_ran:
        assert report.returncode == 0 and report.stdout.strip().endswith("report.html"), report.stderr[-2000:]
    else:
        assert report.returncode == 2 and "names no run directory" in report.stderr, report.stderr[-2000:]
    return ended


def assert_hang_named(t, started: Started, cell: dict, out: str, said: str, ended: dict) -> None:
    """The rank that held the others (rank 1) is named, with its stack, however the job was started."""
    outcome = ended["outcome"]
    assert outcome and outcome["failed"] and outcome["failed"][0]["rank"] == 1, (outcome, said[-3000:])
    assert outcome["causes"][0]["cause"] == "hang", outcome["causes"]
    assert "wait_for_data_that_never_comes" in outcome["failed"][0]["reason"], outcome["failed"][0]
    if started.kind == "api":
        answer = json.loads(out.strip().splitlines()[-1])
        assert answer["rank"] == 1 and "rank 1 on" in answer["error"], answer
