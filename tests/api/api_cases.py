"""The Python API's cases, run on both backends by tests/api/test_api_local.py and
tests/api/test_api_cluster.py (2 nodes). The functions here are pickled by reference:
the worker imports this module through the caller's import path, as a user's own
module would be."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import hpcjax
from conftest import REPO
from hpcjax.api import session
from hpcjax.catalog import records

EXAMPLE = REPO / "examples" / "ray_train_jax.py"
REMOTE_EXAMPLE = REPO / "examples" / "remote_jax.py"

# --- functions that run on the ranks ---------------------------------------------------

def rank_3_raises(word):
    import jax

    if jax.process_index() == 3:
        raise ValueError(f"rank three says {word}")
    time.sleep(30)  # the others would go on: the failing rank must end them
    return "too late"


def rank_1_dies():
    import jax

    if jax.process_index() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(30)


def square_or_fail(x):
    import jax  # an import inside the function, as seed 003 writes them

    if x == 3:
        raise RuntimeError("three is not welcome")
    return x * x + jax.process_count()


def list_data(path, suffix):
    import jax

    return (type(path).__name__, path, sorted(os.listdir(path)), suffix, jax.process_count())


def hang_on_rank_3(config):
    """A Trainer loop: a collective of every rank each step, then a report; rank 3 blocks before
    step 12's collective (sleeps) while the others wait in it. Rank 2 aborts (134) once every rank
    has answered the hang watch, as waiting ranks did in CI 39 when the hung rank's end tore down
    Gloo's collective under them (tests/data/hang_program.py behind-abort, the same from a script)."""
    import glob

    import numpy as np
    from jax.experimental import multihost_utils

    import jax
    from hpcjax.protocol import contract

    def abort_once_every_rank_answered_the_hang_watch():
        answers = os.path.join(os.environ[contract.LOG_DIR_ENV], contract.RANK_HANG.replace("%j", "*")
                               .replace("%t", "*"))
        while len(glob.glob(answers)) < jax.process_count():
            time.sleep(0.01)
        os.abort()

    if jax.process_index() == 2:
        threading.Thread(target=abort_once_every_rank_answered_the_hang_watch, daemon=True).start()
    for step in range(1000):
        if jax.process_index() == 3 and step == 12:
            time.sleep(3600)
        time.sleep(config["pause"])
        total = multihost_utils.process_allgather(np.int32(step)).sum()
        hpcjax.report({"step": step, "total": int(total)})


EPOCHS, EVERY = 30, 5


def counting_loop(config):
    """A loop that resumes exactly from its checkpoints: state after epoch e is a pure
    function of e, so the history of a resumed run must equal an uninterrupted one's."""
    import numpy as np

    import jax

    start, value = 0, config["start"]
    # a program through hpcjax.compiled: the resumed attempt loads what the first one compiled
    halve = hpcjax.compiled(jax.jit(lambda x: x * 0.5), np.ones(4, np.float32), name="halve")
    checkpoint = hpcjax.get_checkpoint()
    if checkpoint:
        saved = json.loads((Path(checkpoint.path) / "state.json").read_text())
        start, value = saved["epoch"] + 1, saved["value"]
    context = hpcjax.get_context()
    for epoch in range(start, EPOCHS):
        value = float(np.float64(value) * 0.5 + epoch)
        time.sleep(config["pause"])
        metrics = {"epoch": epoch, "value": value, "ranks": context.get_world_size(),
                   "devices": jax.device_count(), "halved": float(halve(np.ones(4, np.float32)).sum())}
        if epoch % EVERY == EVERY - 1 and context.get_world_rank() == 0:
            where = Path(config["scratch"]) / f"epoch{epoch}"  # outside the run: report copies it in
            where.mkdir(parents=True, exist_ok=True)
            (where / "state.json").write_text(json.dumps({"epoch": epoch, "value": value}))
            hpcjax.report(metrics, checkpoint=hpcjax.Checkpoint.from_directory(where))
        else:
            hpcjax.report(metrics)


def expected_counting(start):
    value, out = start, []
    for epoch in range(EPOCHS):
        value = value * 0.5 + epoch
        out.append(value)
    return out


# --- the cases -----------------------------------------------------------------------

def by_hand_losses() -> list[float]:
    """Seed 000's train_func run by hand on one process, its reports collected."""
    program = (
        "import json, sys, types\n"
        f"text = open({str(EXAMPLE)!r}).read().split('# Define the hardware configuration')[0]\n"
        "space = {}\nexec(compile(text, 'example', 'exec'), space)\n"
        "losses = []\n"
        "space['hpcjax'] = types.SimpleNamespace(report=lambda m: losses.append(m['loss']))\n"
        "space['train_func']()\nprint(json.dumps(losses))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "JAX_", "HPCJAX_"))}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def seed_example(backend: str, cwd: Path) -> None:
    """The example runs as a user runs it, reports every epoch, and its losses equal the
    same function's run by hand on one process (rank 0 is process 0: the same data)."""
    done = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, cwd=cwd, timeout=600,
                          env={**os.environ, "HPCJAX_BACKEND": backend})
    assert done.returncode == 0, done.stderr[-3000:]
    [run_dir] = (cwd / "hpcjax-results").iterdir()
    history = session.history(run_dir)
    assert [m["epoch"] for m in history] == list(range(100))
    hand = by_hand_losses()
    assert [m["loss"] for m in history] == hand
    assert f"Training finished. Final loss: {hand[-1]:.4f}" in done.stdout
    assert "COMPLETED" in done.stderr and "G8N2p8" in done.stderr


def exception_on_rank_3(backend: str, storage: Path, host: str) -> None:
    # 2 nodes x 2 ranks: rank 3 is the second node's last (4 ranks cost half what 8 do, and no
    # claim here needs more).
    scaling = hpcjax.ScalingConfig(nodes=2, gpus_per_node=2, time="00:05:00")
    trainer = hpcjax.Trainer(lambda: rank_3_raises("no"), scaling_config=scaling,
                             run_config=hpcjax.RunConfig(storage_path=str(storage), name="raise", backend=backend))
    result = trainer.fit()
    error = result.error
    assert isinstance(error, hpcjax.RemoteError)
    assert (error.rank, error.host) == (3, host)
    assert "ValueError: rank three says no" in str(error) and "rank_3_raises" in error.remote_traceback
    assert isinstance(error.__cause__, ValueError)
    assert 3 not in error.outcome.stopped and len(error.outcome.stopped) >= 1  # the others were stopped
    assert not any("too late" in log.read_text() for log in (storage / "raise" / "logs").glob("*-rank*.log"))
    decorated = hpcjax.remote(nodes=2, gpus_per_node=2, backend=backend, storage_path=str(storage))(rank_3_raises)
    try:
        decorated("again")
    except hpcjax.RemoteError as raised:
        assert (raised.rank, raised.host) == (3, host)
        assert "rank three says again" in str(raised)
    else:
        raise AssertionError("the decorated function did not raise")


def killed_rank(backend: str, storage: Path, host: str) -> None:
    decorated = hpcjax.remote(nodes=2, gpus_per_node=1, backend=backend, storage_path=str(storage))(rank_1_dies)
    try:
        decorated()
    except hpcjax.RemoteError as raised:
        assert (raised.rank, raised.host) == (1, host)
        assert raised.__cause__ is None and "signal" in str(raised).lower(), str(raised)
    else:
        raise AssertionError("a killed rank was not reported")


def resume_after_failure(backend: str, storage: Path, interrupt) -> None:
    """max_failures=1: the first job is interrupted mid-run (interrupt(job_id, run_dir)),
    the second resumes from the last reported checkpoint; the history is complete.
    The run keeps its own compilation cache (the test session's shared one is taken away:
    the other backend's case stores the same program there, and the first attempt here
    must find nothing)."""
    import pytest

    from hpcjax.protocol.contract import COMPILE_CACHE_ENV

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(COMPILE_CACHE_ENV, raising=False)
        fit_interrupted_once(backend, storage, interrupt)


def fit_interrupted_once(backend: str, storage: Path, interrupt) -> None:
    run_config = hpcjax.RunConfig(storage_path=str(storage), name="resume", backend=backend, max_failures=1)
    trainer = hpcjax.Trainer(counting_loop, train_loop_config={"start": 1.0, "pause": 0.3, "scratch": str(storage / "scratch")},
                             scaling_config=hpcjax.ScalingConfig(nodes=2, gpus_per_node=1, time="00:05:00"),
                             run_config=run_config)
    run_dir = storage / "resume"
    fired = {}

    def interrupt_when_past_first_checkpoint():
        while len(session.history(run_dir)) < EVERY + 3:
            time.sleep(0.2)
        [job] = {p.name.split("-rank")[0] for p in (run_dir / "logs").glob("*-rank0.log")}
        fired["job"], fired["at"] = job, len(session.history(run_dir))
        interrupt(job, run_dir)

    thread = threading.Thread(target=interrupt_when_past_first_checkpoint, daemon=True)
    thread.start()
    result = trainer.fit()
    assert result.error is None, result.error
    assert len(result.jobs) == 2 and result.jobs[0] == fired["job"]
    assert fired["at"] < EPOCHS  # the first job really was cut short
    assert [m["epoch"] for m in result.metrics_history] == list(range(EPOCHS))
    assert [m["value"] for m in result.metrics_history] == expected_counting(1.0)
    assert result.metrics == result.metrics_history[-1]
    assert {m["ranks"] for m in result.metrics_history} == {2}
    assert result.checkpoint.path == str((run_dir / "checkpoints" / f"checkpoint_{EPOCHS:06d}").resolve())
    attempts = [json.loads(x) for x in (run_dir / session.REPORTS).read_text().splitlines() if "start" in x]
    assert [a["attempt"] for a in attempts] == [1, 2] and attempts[1]["start"] % EVERY == 0 and attempts[1]["start"] > 0
    # each attempt's start: the first compiled the loop's program, the resumed one loaded it
    assert [s["attempt"] for s in result.starts] == [1, 2] and {m["halved"] for m in result.metrics_history} == {2.0}
    [first], [second] = (s["compiled"] for s in result.starts)
    assert first["how"].startswith("cold: compiled (no stored executable yet)"), first
    assert second["how"].startswith("warm: executable loaded from "), second
    assert "/resume/compile-cache/executables/halve/" in second["how"], second  # the run's own cache
    assert all(s["total_s"] > s["initialized_s"] > 0 for s in result.starts)
    # TensorBoard (its own reader): every report once, the replayed ones purged. Imported
    # here, not at the top: the ranks import this module for its functions.
    import pytest
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    values = events.Scalars("report/value")
    assert [e.step for e in values] == list(range(EPOCHS))
    assert [e.value for e in values] == pytest.approx(expected_counting(1.0), rel=1e-6)


def kill_local_rank(job: str, run_dir: Path) -> None:
    os.kill(records.load(job)["pids"][1], signal.SIGKILL)


def map_with_one_failure(backend: str, storage: Path) -> None:
    decorated = hpcjax.remote(nodes=2, gpus_per_node=1, backend=backend, storage_path=str(storage))(square_or_fail)
    calls = decorated.map([1, 2, 3, 4], max_parallel=2)
    assert len(calls) == 4 and len({c.job_id for c in calls}) == 4
    outcomes = [c.exception() for c in calls]
    assert [c.result() for c in (calls[0], calls[1], calls[3])] == [3, 6, 18]
    assert outcomes[0] is None and outcomes[1] is None and outcomes[3] is None
    assert isinstance(outcomes[2], hpcjax.RemoteError) and "three is not welcome" in str(outcomes[2])
    assert isinstance(outcomes[2].__cause__, RuntimeError)
    assert [c.state() for c in calls] == ["COMPLETED", "COMPLETED", "FAILED", "COMPLETED"]


def data_with_a_space(backend: str, storage: Path) -> None:
    where = storage / "my data set"
    where.mkdir(parents=True)
    (where / "part 1.txt").write_text("x")
    decorated = hpcjax.remote(nodes=2, gpus_per_node=1, backend=backend, storage_path=str(storage))(list_data)
    call = decorated.submit(hpcjax.Data(where), suffix="!")
    assert call.result() == ("str", str(where.resolve()), ["part 1.txt"], "!", 2)
    assert call.state() == "COMPLETED" and call.logs(rank=1) is not None


def ctrl_c_once_submitted_cancels_the_job(backend: str, storage: Path, monkeypatch, capsys) -> None:
    """Ctrl-C while a call is submitted, once its job exists (before the call returns a handle, so
    the caller has nothing to cancel it with): the job is cancelled, and the interrupt names it."""
    from hpcjax.launch import attach
    from support import ctrl_c_once_recorded

    ctrl_c_once_recorded(monkeypatch)
    decorated = hpcjax.remote(nodes=1, gpus_per_node=1, backend=backend, storage_path=str(storage))(time.sleep)
    try:
        decorated.submit(120)
    except KeyboardInterrupt as interrupt:
        said = str(interrupt)
    else:
        raise AssertionError("the Ctrl-C was lost")
    job = said.split("interrupted: job ")[1].split()[0]
    assert said == f"interrupted: job {job} was cancelled"
    assert f"interrupted: cancelled job {job}" in capsys.readouterr().err
    run = attach(job)
    deadline = time.monotonic() + 60
    while run.state() != "CANCELLED" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert run.state() == "CANCELLED"


def ctrl_c_cancels_the_job(backend: str, storage: Path) -> None:
    """Ctrl-C while a decorated function waits: the job is cancelled, and the caller says so."""
    from hpcjax.launch import attach

    program = ("import sys, time, hpcjax\n"
               f"@hpcjax.remote(nodes=2, gpus_per_node=1, backend={backend!r}, storage_path={str(storage)!r})\n"
               "def sleepy():\n    time.sleep(120)\n"
               "sleepy()\n")
    proc = subprocess.Popen([sys.executable, "-c", program], stderr=subprocess.PIPE, text=True, cwd=storage)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "RUNNING" in line:
            break
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=60)
    said = "".join(seen) + rest
    assert proc.returncode != 0 and "KeyboardInterrupt" in said
    job = said.split("interrupted: cancelled job ")[1].split()[0]
    run = attach(job)
    deadline = time.monotonic() + 60
    while run.state() not in ("CANCELLED",) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert run.state() == "CANCELLED"


def remote_example(backend: str, cwd: Path) -> None:
    """Seed 003's examples under @hpcjax.remote: a value back, and a sweep as a map."""
    done = subprocess.run([sys.executable, str(REMOTE_EXAMPLE)], capture_output=True, text=True, cwd=cwd,
                          timeout=600, env={**os.environ, "HPCJAX_BACKEND": backend})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "1000.0"
    losses = [float(line.split("final loss ")[1].split()[0]) for line in lines[1:]]
    assert len(losses) == 3 and all(0 < loss < 0.1 for loss in losses), lines


def trainer_hang(backend: str, storage: Path, nodes: int, gpus: int, host: str) -> None:
    """A Trainer run whose rank 3 hangs (and rank 2 then aborts) ends by itself with the hang's status:
    the report names rank 3 and shows its stack (the sleep) apart from the others' (the collective),
    within 60 s of the hang."""
    scaling = hpcjax.ScalingConfig(nodes=nodes, gpus_per_node=gpus, time="00:10:00",
                                   env={"HPCJAX_HANG_FLOOR": "10", "HPCJAX_HANG_CEILING": "120"})
    trainer = hpcjax.Trainer(hang_on_rank_3, train_loop_config={"pause": 0.3}, scaling_config=scaling,
                             run_config=hpcjax.RunConfig(storage_path=str(storage), name="hang", backend=backend))
    result = trainer.fit()
    ended = time.time()
    outcome = result.error.outcome
    # 124 (the hang watch's), not rank 2's abort, whichever end srun or the local backend saw first
    assert (outcome.state, outcome.exit_code, outcome.cause.cause) == ("FAILED", 124, "hang"), outcome.report()
    [held] = outcome.failed
    assert (held.rank, held.host) == (3, host), outcome.report()
    assert "stuck elsewhere than the others" in held.reason and "hang_on_rank_3" in held.reason
    report = outcome.report()
    others = "0-2" if nodes * gpus == 4 else f"0-2,4-{nodes * gpus - 1}"
    assert report.index("ranks 3 (") < report.index(f"ranks {others} (")
    hung_at = max(json.loads(p.read_text())["last_progress_at"]
                  for p in (storage / "hang" / "logs").glob("*.hang.json"))
    assert ended - hung_at < 60, (ended - hung_at, report)


def returns_a_lock():
    return threading.Lock()


def returns_bytes(size: int) -> bytes:
    return b"x" * size


def yields_items():
    yield 1


def results_that_cannot_come_back_or_are_big(backend: str, storage: Path) -> None:
    """Issue 63: a value that cannot be pickled came back as a tail of cloudpickle and submitit
    internals, after a 0-byte temporary file; a generator function was found only after its job ran;
    a big result stayed in the call folder (a laptop then shipped it with the next job's code)."""
    from hpcjax.values.errors import UsageError

    options = dict(nodes=1, gpus_per_node=1, backend=backend, storage_path=str(storage))
    try:
        hpcjax.remote(**options)(yields_items)
    except UsageError as refused:
        assert "yields_items is a generator function" in refused.message, refused.message
    else:
        raise AssertionError("a generator function was taken")
    assert not (storage / "calls").exists() or not any((storage / "calls").iterdir())  # nothing submitted
    locked = hpcjax.remote(**options)(returns_a_lock).submit()
    error = locked.exception()
    assert error is not None and "rank 0 returned a value of type _thread.lock, which cannot be pickled" in str(error)
    assert "submitit" not in str(error) and "cloudpickle" not in error.remote_traceback, error.remote_traceback
    left = sorted(p.name for p in (locked.call_dir / "0").iterdir())
    assert left == ["call.pkl", "rank0.pkl"], left  # no temporary file beside them
    size = 20_000_000
    big = hpcjax.remote(**options)(returns_bytes).submit(size)
    assert len(big.result()) == size and len(big.result()) == size  # read once, kept by the handle
    assert sorted(p.name for p in (big.call_dir / "0").iterdir()) == ["call.pkl"]


def ctrl_c_twice_still_cancels_the_job(backend: str, storage: Path, entry: str) -> None:
    """Issue 63: a SIGINT to the caller, then to its whole process group while the job's cancel runs,
    raised a KeyboardInterrupt from inside the cancel, and the job stayed RUNNING. The cancel is slowed
    (a scancel first on the PATH that waits 3 s, then runs SLURM's own) so that the second SIGINT lands
    while it runs, every time: before the fix the wrapper died of it, and the job ran on."""
    from hpcjax.launch import attach

    slow = storage / "slow-bin"
    slow.mkdir(parents=True, exist_ok=True)
    real = subprocess.run(["bash", "-c", "command -v scancel"], capture_output=True, text=True).stdout.strip()
    (slow / "scancel").write_text(f"#!/bin/bash\nsleep 3\nexec {real} \"$@\"\n")
    (slow / "scancel").chmod(0o755)
    where = f"backend={backend!r}, storage_path={str(storage)!r}"
    program = ("import time, hpcjax\n"
               "def sleepy(*config):\n    time.sleep(300)\n" +
               (f"hpcjax.remote(nodes=1, gpus_per_node=1, {where})(sleepy)()\n" if entry == "remote" else
                "hpcjax.Trainer(sleepy, scaling_config=hpcjax.ScalingConfig(nodes=1, gpus_per_node=1), "
                f"run_config=hpcjax.RunConfig({where}, name='twice')).fit()\n"))
    proc = subprocess.Popen([sys.executable, "-c", program], stderr=subprocess.PIPE, text=True, cwd=storage,
                            start_new_session=True, env={**os.environ, "PATH": f"{slow}:{os.environ['PATH']}"})
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "RUNNING" in line:
            break
    job = next(match.group(1) for line in seen if (match := re.search(r"\bjob (\d+)", line)))
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.5)  # the cancel has started: its scancel sleeps
    os.killpg(proc.pid, signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    said = "".join(seen) + rest
    assert proc.returncode != 0 and f"interrupted: cancelled job {job}" in said, said[-3000:]
    run = attach(job)
    deadline = time.monotonic() + 60
    while run.state() != "CANCELLED" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert run.state() == "CANCELLED", said[-3000:]
