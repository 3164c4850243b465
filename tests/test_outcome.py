"""The failure analysis both backends share: srun's reports, the cause, the exit code."""

from pathlib import Path

import pytest

from hpcjax.launch.outcome import TaskEvent, analyze, srun_events, tail_lines

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
    assert "ranks stopped by srun after the failure: 0, 1, 2, 3, 4, 6, 7" in text


def test_a_killed_rank_without_a_code_falls_back_to_the_jobs_code():
    events = [TaskEvent((3,), "node1", "Killed", before_stop=True)]
    outcome = analyze("9", "FAILED", events, lambda r: Path("/nonexistent"), job_exit_code=137)
    assert outcome.exit_code == 137
    assert outcome.failed[0].reason == "Killed" and outcome.failed[0].log_tail == ""
    # SLURM's 0:9 (no code, a signal) must still be a failure for the shell
    assert analyze("9", "FAILED", events, lambda r: Path("/x"), job_exit_code=0).exit_code == 1


def test_a_job_that_was_only_stopped_blames_no_rank():
    events = [TaskEvent((0, 1), "node1", "Terminated", before_stop=False)]
    outcome = analyze("10", "CANCELLED", events, lambda r: Path("/x"), note="the job was cancelled")
    assert outcome.failed == () and outcome.stopped == (0, 1) and "the job was cancelled" in outcome.report()


def test_completed_is_ok_with_exit_code_0():
    outcome = analyze("11", "COMPLETED", [], lambda r: Path("/x"))
    assert outcome.ok and outcome.exit_code == 0 and outcome.as_dict()["ok"] is True


def test_ranks_terminated_by_a_cancel_or_timeout_are_stopped_not_failed():
    # scancel: srun reports the terminated tasks with no "Terminating StepId" line before them
    events = srun_events("srun: error: node1: tasks 0-1: Terminated\n")
    for state in ("CANCELLED", "TIMEOUT"):
        outcome = analyze("12", state, events, lambda r: Path("/x"))
        assert outcome.failed == () and outcome.stopped == (0, 1), state
    # the same words in a FAILED job: those ranks are the cause
    assert [f.rank for f in analyze("12", "FAILED", events, lambda r: Path("/x")).failed] == [0, 1]
