"""Asking SLURM about jobs: ids, and what squeue and sacct say (stubbed here; the cluster tests ask for real)."""

import pytest

from hpcjax.errors import UsageError
from hpcjax.launch.slurmctl import check_job_id

@pytest.mark.parametrize("bad", ["12a", "", "1;rm", "-1"])
def test_job_ids_are_numbers(bad):
    with pytest.raises(UsageError):
        check_job_id(bad)


def test_status_of_a_job_the_controller_has_forgotten_comes_from_accounting(monkeypatch):
    """After MinJobAge squeue says 'Invalid job id'; sacct still knows the job."""
    from hpcjax.launch import slurmctl as jobs
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
    from hpcjax.launch import slurmctl as jobs
    from hpcjax.errors import HpcjaxError

    def fake(argv):
        if argv[0] == "squeue":
            raise HpcjaxError("`squeue ...` failed: slurm_load_jobs error: Invalid job id specified")
        return ""

    monkeypatch.setattr(jobs, "run_slurm", fake)
    with pytest.raises(HpcjaxError, match="SLURM knows no job 99"):
        jobs.job_status("99")
