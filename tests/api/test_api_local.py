"""The Python API on the local backend (this machine's CPU, real multi-process JAX):
the cases of tests/api/api_cases.py; tests/api/test_api_cluster.py runs them on SLURM."""

import pytest

import api_cases

pytestmark = pytest.mark.jax  # runs JAX programs on this machine


def test_seed_000_example_reports_every_epoch_and_matches_a_run_by_hand(tmp_path, hpcjax_home):
    api_cases.seed_example("local", tmp_path)


def test_an_exception_on_rank_3_of_4_names_rank_and_host(tmp_path, hpcjax_home):
    api_cases.exception_on_rank_3("local", tmp_path, "local1")  # 2 ranks per node


def test_a_rank_killed_by_a_signal_is_reported_as_such(tmp_path, hpcjax_home):
    api_cases.killed_rank("local", tmp_path, "local1")


def test_a_killed_job_is_resubmitted_and_resumes_from_its_checkpoint(tmp_path, hpcjax_home):
    api_cases.resume_after_failure("local", tmp_path, api_cases.kill_local_rank)


def test_map_over_four_arguments_with_one_failing(tmp_path, hpcjax_home):
    api_cases.map_with_one_failure("local", tmp_path)


def test_data_with_a_space_in_its_name_reaches_the_function(tmp_path, hpcjax_home):
    api_cases.data_with_a_space("local", tmp_path)


def test_ctrl_c_cancels_the_job_and_says_so(tmp_path, hpcjax_home):
    api_cases.ctrl_c_cancels_the_job("local", tmp_path)


def test_ctrl_c_once_the_job_exists_but_before_a_handle_cancels_it(tmp_path, hpcjax_home, monkeypatch, capsys):
    api_cases.ctrl_c_once_submitted_cancels_the_job("local", tmp_path, monkeypatch, capsys)


def test_seed_003_examples_run_under_remote(tmp_path, hpcjax_home):
    api_cases.remote_example("local", tmp_path)


def test_a_trainer_run_whose_rank_3_hangs_ends_by_itself_naming_it(tmp_path, hpcjax_home):
    api_cases.trainer_hang("local", tmp_path, 2, 2, "local1")


def test_results_that_cannot_come_back_are_named_and_big_ones_leave_no_file(tmp_path, hpcjax_home):
    api_cases.results_that_cannot_come_back_or_are_big("local", tmp_path)
