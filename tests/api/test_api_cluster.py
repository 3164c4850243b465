"""The Python API on the dev cluster (real sbatch/srun, 2 nodes): the cases of
tests/api/api_cases.py, as tests/api/test_api_local.py runs them on this machine's CPU.
Preemption here is SLURM's: USR2 to every task of the running job."""

import pytest

import api_cases
from hpcjax.slurm import controller as slurmctl

pytestmark = pytest.mark.cluster


def test_seed_000_example_reports_every_epoch_and_matches_a_run_by_hand(shared_storage, hpcjax_home):
    api_cases.seed_example("slurm", shared_storage)


def test_an_exception_on_rank_3_of_4_names_rank_and_host(shared_storage, hpcjax_home):
    api_cases.exception_on_rank_3("slurm", shared_storage, "node2")  # 2 ranks per node


def test_a_rank_killed_by_a_signal_is_reported_as_such(shared_storage, hpcjax_home):
    api_cases.killed_rank("slurm", shared_storage, "node2")


def preempt(job, run_dir):
    slurmctl.run_slurm(["scancel", "--signal=USR2", job])


def test_a_preempted_job_is_resubmitted_and_resumes_from_its_checkpoint(shared_storage, hpcjax_home):
    api_cases.resume_after_failure("slurm", shared_storage, preempt)


def test_map_over_four_arguments_is_a_job_array_with_one_failing(shared_storage, hpcjax_home):
    api_cases.map_with_one_failure("slurm", shared_storage)


def test_data_with_a_space_in_its_name_reaches_the_function(shared_storage, hpcjax_home):
    api_cases.data_with_a_space("slurm", shared_storage)


def test_ctrl_c_cancels_the_job_and_says_so(shared_storage, hpcjax_home):
    api_cases.ctrl_c_cancels_the_job("slurm", shared_storage)


def test_ctrl_c_once_the_job_exists_but_before_a_handle_cancels_it(shared_storage, hpcjax_home, monkeypatch,
                                                                   capsys):
    api_cases.ctrl_c_once_submitted_cancels_the_job("slurm", shared_storage, monkeypatch, capsys)


def test_seed_003_examples_run_under_remote(shared_storage, hpcjax_home):
    api_cases.remote_example("slurm", shared_storage)


def test_results_that_cannot_come_back_are_named_and_big_ones_leave_no_file(shared_storage, hpcjax_home):
    api_cases.results_that_cannot_come_back_or_are_big("slurm", shared_storage)


@pytest.mark.parametrize("entry", ["remote", "trainer"])
def test_a_second_ctrl_c_to_the_whole_group_during_the_cancel_still_cancels_the_job(shared_storage, hpcjax_home, entry):
    api_cases.ctrl_c_twice_still_cancels_the_job("slurm", shared_storage / entry, entry)
