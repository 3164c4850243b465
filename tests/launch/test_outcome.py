"""The failure analysis both backends share: srun's reports, the cause, the exit code."""

from pathlib import Path

import pytest

from hpcjax.follow.outcome import Outcome, TaskEvent, analyze, srun_events, tail_lines

BATCH_LOG = """\
srun: error: node2: task 5: Exited with exit code 3
srun: launch/slurm: _step_signal: Terminating StepId=8.0
slurmstepd-node1: error: *** STEP 8.0 ON node1 CANCELLED AT 2026-11-22T05:07:15 ***
srun: error: node1: tasks 0-3: Terminated
srun: error: node2: tasks 4,6-7: Killed
"""


def test_srun_task_errors_are_parsed_with_ranges_and_marked_before_or_after_the_stop():
    assert srun_events(BATCH_LOG) == [
        TaskEvent((5,), "node2", "Exited with exit code 3", before_stop=True),
        TaskEvent((0, 1, 2, 3), "node1", "Terminated", before_stop=False),
        TaskEvent((4, 6, 7), "node2", "Killed", before_stop=False),
    ]


def test_no_errors_in_a_clean_log():
    assert srun_events("hello\nworld\n") == []


@pytest.mark.parametrize("count, expected", [(None, "a\nb\nc\n"), (2, "b\nc\n"), (0, ""), (10, "a\nb\nc\n")])
def test_tail_lines(count, expected):
    assert tail_lines("a\nb\nc\n", count) == expected


def test_the_rank_that_failed_first_is_the_cause_and_its_code_the_exit_code(tmp_path):
    (tmp_path / "r5.log").write_text("line 1\nTraceback: boom\n")
    outcome = analyze("8", "FAILED", srun_events(BATCH_LOG), lambda r: tmp_path / f"r{r}.log", job_exit_code=1)
    assert [(f.rank, f.host, f.reason) for f in outcome.failed] == [(5, "node2", "Exited with exit code 3")]
    assert outcome.failed[0].log_tail.endswith("Traceback: boom\n")
    assert outcome.stopped == (0, 1, 2, 3, 4, 6, 7) and outcome.exit_code == 3 and not outcome.ok
    text = outcome.report()
    assert text.splitlines()[0] == "job 8 ended FAILED (exit code 3)"
    assert "rank 5 on node2 failed: Exited with exit code 3" in text and "Traceback: boom" in text
    assert "ranks stopped by srun after the failure: 0-4,6-7" in text


def test_a_killed_rank_is_128_plus_the_signal_whatever_the_jobs_code(tmp_path):
    events = [TaskEvent((3,), "node1", "Killed", before_stop=True)]
    outcome = analyze("9", "FAILED", events, lambda r: tmp_path / "nonexistent", job_exit_code=9)  # srun exits 9
    assert outcome.exit_code == 137
    assert outcome.failed[0].reason == "Killed" and outcome.failed[0].log_tail == ""
    # SLURM's 0:9 (no code, a signal): still SIGKILL's status
    assert analyze("9", "FAILED", events, lambda r: tmp_path / "x", job_exit_code=0).exit_code == 137


def test_words_that_name_no_status_fall_back_to_the_jobs_code_never_success(tmp_path):
    events = [TaskEvent((3,), "node1", "Some new srun words", before_stop=True)]
    assert analyze("9", "FAILED", events, lambda r: tmp_path / "x", job_exit_code=4).exit_code == 4
    assert analyze("9", "FAILED", events, lambda r: tmp_path / "x", job_exit_code=0).exit_code == 1


def test_a_job_that_was_only_stopped_blames_no_rank(tmp_path):
    events = [TaskEvent((0, 1), "node1", "Terminated", before_stop=False)]
    outcome = analyze("10", "CANCELLED", events, lambda r: tmp_path / "x", note="the job was cancelled")
    assert outcome.failed == () and outcome.stopped == (0, 1) and "the job was cancelled" in outcome.report()


def test_completed_is_ok_with_exit_code_0(tmp_path):
    outcome = analyze("11", "COMPLETED", [], lambda r: tmp_path / "x")
    assert outcome.ok and outcome.exit_code == 0 and outcome.as_dict()["ok"] is True


def test_ranks_terminated_by_a_cancel_or_timeout_are_stopped_not_failed(tmp_path):
    # scancel: srun reports the terminated tasks with no "Terminating StepId" line before them
    events = srun_events("srun: error: node1: tasks 0-1: Terminated\n")
    for state in ("CANCELLED", "TIMEOUT"):
        outcome = analyze("12", state, events, lambda r: tmp_path / "x")
        assert outcome.failed == () and outcome.stopped == (0, 1), state
    # the same words in a FAILED job: those ranks are the cause
    assert [f.rank for f in analyze("12", "FAILED", events, lambda r: tmp_path / "x").failed] == [0, 1]


def test_the_failed_ranks_own_evidence_comes_before_the_consequences_in_the_others_logs(tmp_path):
    """Rank 3 was SIGKILLed (srun: Killed); the others saw gloo's connection reset. The
    likely cause is the kill; the collective error is only 'also seen'."""
    for rank in range(4):
        (tmp_path / f"r{rank}.log").write_text(
            "step 10 loss 2.1\n" + ("" if rank == 3 else "[enforce fail at gloo/transport/tcp/pair.cc:538] Read "
                                    "error [127.0.0.1]:36231: Connection reset by peer\n"))
    log = ("srun: error: node1: task 3: Killed\nsrun: launch/slurm: _step_signal: Terminating StepId=9.0\n"
           "srun: error: node1: tasks 0-2: Terminated\n")
    outcome = analyze("9", "FAILED", srun_events(log), lambda r: tmp_path / f"r{r}.log", batch_log=log)
    assert [f.rank for f in outcome.failed] == [3]
    assert [c.cause for c in outcome.causes] == ["killed by a signal", "collective error"]
    assert outcome.causes[0].evidence == "srun: task 3: Killed"
    report = outcome.report()
    assert "likely cause: killed by a signal" in report and "also seen: collective error (rank 0 log:" in report


def test_ranks_that_stopped_sending_heartbeats_are_blamed_over_the_ranks_that_aborted(tmp_path):
    heartbeat = ("F1122 client.h:80] Terminating process because the JAX distributed service detected fatal "
                 "errors. absl::Status: UNAVAILABLE: The following tasks are unhealthy (stopped sending "
                 "heartbeats):\n2\nThe tasks have crashed.\n")
    for rank in range(4):
        (tmp_path / f"r{rank}.log").write_text("" if rank == 2 else heartbeat)
    log = ("srun: error: node1: tasks 0-1,3: Aborted\nsrun: launch/slurm: _step_signal: Terminating StepId=9.0\n"
           "srun: error: node1: task 2: Killed\n")
    outcome = analyze("9", "FAILED", srun_events(log), lambda r: tmp_path / f"r{r}.log", batch_log=log)
    assert [(f.rank, f.host) for f in outcome.failed] == [(2, "node1")]
    assert outcome.stopped == (0, 1, 3) and outcome.stopped_by == "JAX's coordination service"
    assert outcome.causes[0].cause == "frozen rank"


def _hang_entry(rank: int, step: int, *frames: tuple[str, str]) -> dict:
    return {"rank": rank, "host": f"node{rank + 1}", "step": step, "threads": [
        {"thread_name": "MainThread", "frames": [{"name": n, "short_filename": f, "line": 1} for n, f in frames]}]}


def test_of_two_ranks_the_one_outside_jax_held_the_one_waiting_in_a_collective():
    """Two ranks at the same step, stacks of one each: no majority, so the rank that is not inside JAX
    (stuck in its own code) is the one the other waits for in the collective (the seam matrix's cell
    trainer-slurm-hang_short: it said "every rank stopped at the same place")."""
    from hpcjax.follow import hangs

    waiting = _hang_entry(0, 6, ("_handle_array_process_allgather", "jax/experimental/multihost_utils.py"),
                          ("loop", "probe.py"))
    holding = _hang_entry(1, 6, ("wait_for_data_that_never_comes", "probe.py"), ("loop", "probe.py"),
                          ("run_train_loop", "hpcjax/api/worker.py"))  # hpcjax's frames are not JAX's
    hang = hangs.judge([waiting, holding], 2, {"rank": 0, "host": "node1"})
    assert hang.held_by == (1,) and "stuck elsewhere than the others, which wait in _handle_array" in hang.why
    both_in_jax = _hang_entry(1, 6, ("block_until_ready", "jax/_src/array.py"))
    assert hangs.judge([waiting, both_in_jax], 2, {"rank": 0}).held_by == ()


def test_a_cancelled_jobs_stopped_ranks_are_not_said_to_follow_a_failure():
    """Seen on the local backend: a cancelled job's report said 'after the failure' of no failure."""
    text = Outcome(job_id="5", state="CANCELLED", exit_code=143, stopped=(0, 1), stopped_by="hpcjax",
                   note="the job was cancelled: every rank was stopped").report()
    assert "ranks stopped by hpcjax: 0-1" in text and "failure" not in text, text


@pytest.mark.parametrize("state, said", [("CANCELLED", "2 cancelled on node1"), ("TIMEOUT", "2 timed out on node1"),
                                         ("FAILED", "2 failed (exit 143) on node1")])
def test_the_last_attempt_of_a_cancelled_or_timed_out_job_is_not_called_failed(tmp_path, state, said):
    """The batch script (and a hold's agent) sees a cancel as exit 143: the attempts line said
    'failed (exit 143)' of a job hpcjax cancelled."""
    import json

    from hpcjax.protocol.contract import attempts_log_path
    from hpcjax.follow.run import Run

    lines = [{"attempt": 1, "ended": "stopped", "nodes": "node1"},
             {"attempt": 2, "ended": "failed", "exit_code": 143, "nodes": "node1"}]
    attempts_log_path(tmp_path, "9").write_text("".join(json.dumps(line) + "\n" for line in lines))
    text = Run("9", tmp_path, 1).describe_attempts(state)
    assert text == f"  attempts: 2 ended: 1 stopped on node1; {said}"



def scripted_run(tmp_path, states, remote=False):
    """A Run whose job moves through `states`, one per poll (the last stays), its files in tmp_path."""
    from types import SimpleNamespace

    from hpcjax.follow.run import Run

    class Scripted(Run):
        backend, poll_s = "scripted", 2.0

        def poll(self):
            state = states.pop(0) if len(states) > 1 else states[0]
            return state, state

        def _ended(self, state):
            return Outcome(job_id=self.job_id, state=state, exit_code=0)

    run = Scripted("77", tmp_path, 1)
    if remote:
        run.host = SimpleNamespace(remote=True)
    return run


def test_polls_come_every_poll_s_and_soon_only_after_an_attempts_line(tmp_path, monkeypatch):
    """Each poll is a squeue and a sacct: quick ones only once the batch script wrote its attempt's
    end (the state changes as the script exits), never after each change of state."""
    from hpcjax.follow import run as follow_run
    asked, lines = [], iter([False, False, True, False, False, False, False, False])
    run = scripted_run(tmp_path, ["PENDING", "RUNNING"] + ["RUNNING"] * 6 + ["COMPLETED"])
    monkeypatch.setattr(run, "pause", lambda soon: asked.append(soon) or next(lines))
    assert run.wait(progress=False).state == "COMPLETED"
    assert asked == [0, 0, 0, 3, 2, 1, 0, 0]  # the quick polls left, after the third pause saw the line
    slept = []
    monkeypatch.setattr(follow_run.time, "sleep", slept.append)
    far = scripted_run(tmp_path, ["RUNNING"], remote=True)  # no files here to watch: the waits alone
    for soon in (0, 3, 2, 1):
        assert far.pause(soon) is False
    assert slept == [2.0, 0.25, 0.5, 1.0]


def test_the_attempts_line_of_a_job_on_this_machine_ends_the_pause_at_once(tmp_path):
    import threading
    import time

    from hpcjax.follow.run import SOON_S
    run = scripted_run(tmp_path, ["RUNNING"])
    attempts = tmp_path / "77-attempts.jsonl"
    line = tmp_path / "line"
    line.write_text('{"attempt": 1, "ended": "completed"}\n')
    # in one step (a rename): write_text creates the file empty first, and a pause that looks then sees
    # it appear, and the next one its line (CI: the second pause cut short, "nothing written")
    threading.Timer(0.3, lambda: line.replace(attempts)).start()
    started = time.monotonic()
    assert run.pause() is True  # a pause of poll_s (2 s), cut short
    assert time.monotonic() - started < 1.5
    started = time.monotonic()
    assert run.pause(len(SOON_S)) is False  # nothing written: the whole (short) pause
    assert 0.2 <= time.monotonic() - started < 1.0
