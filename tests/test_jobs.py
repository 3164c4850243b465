import pytest

from hpcjax.errors import UsageError
from hpcjax.jobs import check_job_id, task_errors, tail_lines

BATCH_LOG = """\
srun: error: node2: task 5: Exited with exit code 3
srun: launch/slurm: _step_signal: Terminating StepId=8.0
slurmstepd-node1: error: *** STEP 8.0 ON node1 CANCELLED AT 2026-11-22T05:07:15 ***
srun: error: node1: tasks 0-3: Terminated
srun: error: node2: tasks 4,6-7: Killed
"""


def test_srun_task_errors_are_parsed_with_ranges():
    errors = task_errors(BATCH_LOG)
    assert errors == [
        {"host": "node2", "tasks": [5], "what": "Exited with exit code 3"},
        {"host": "node1", "tasks": [0, 1, 2, 3], "what": "Terminated"},
        {"host": "node2", "tasks": [4, 6, 7], "what": "Killed"},
    ]


def test_no_errors_in_a_clean_log():
    assert task_errors("hello\nworld\n") == []


@pytest.mark.parametrize("count, expected", [(None, "a\nb\nc\n"), (2, "b\nc\n"), (0, ""), (10, "a\nb\nc\n")])
def test_tail_lines(count, expected):
    assert tail_lines("a\nb\nc\n", count) == expected


@pytest.mark.parametrize("bad", ["12a", "", "1;rm", "-1"])
def test_job_ids_are_numbers(bad):
    with pytest.raises(UsageError):
        check_job_id(bad)


def test_status_of_a_job_the_controller_has_forgotten_comes_from_accounting(monkeypatch):
    """After MinJobAge squeue says 'Invalid job id'; sacct still knows the job."""
    from hpcjax import jobs
    from hpcjax.errors import HpcjaxError

    def fake(argv):
        if argv[0] == "squeue":
            raise HpcjaxError("`squeue ...` failed: slurm_load_jobs error: Invalid job id specified")
        return "7|train|COMPLETED|0:0|00:01:02|node[1-2]||None|/work\n7.0|python|COMPLETED|0:0|00:01:01|node[1-2]|8||\n"

    monkeypatch.setattr(jobs, "run_slurm", fake)
    status = jobs.job_status("7")
    assert (status.state, status.name, status.nodelist, status.workdir) == ("COMPLETED", "train", "node[1-2]", "/work")
    assert status.steps[0]["NTasks"] == "8"


def test_unknown_job_is_a_clear_error(monkeypatch):
    from hpcjax import jobs
    from hpcjax.errors import HpcjaxError

    def fake(argv):
        if argv[0] == "squeue":
            raise HpcjaxError("`squeue ...` failed: slurm_load_jobs error: Invalid job id specified")
        return ""

    monkeypatch.setattr(jobs, "run_slurm", fake)
    with pytest.raises(HpcjaxError, match="SLURM knows no job 99"):
        jobs.job_status("99")
