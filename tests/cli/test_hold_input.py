"""Held allocations' input, refused before anything is submitted or queued: what a job inside a hold
cannot have, an unknown hold, a hold on the local backend; and what `--on` changes in the rendered
script (its logs' names; nothing else a job of its own renders)."""

from __future__ import annotations

import pytest

from hpcjax.values import jobid
from hpcjax.values.errors import SpecError
from hpcjax.job.spec import JobSpec
from hpcjax.slurm.script import render_sbatch
from support import cli


@pytest.mark.parametrize("text, step", [("1234.s2", True), ("1234.s10", True), ("1234.2", False),
                                        ("1234.s0", False), ("1234_3.s2", False), ("1234", False)])
def test_a_job_in_a_hold_is_named_by_the_holds_id_and_its_place(text, step):
    assert jobid.is_hold_step(text) is step
    assert jobid.is_element(text) is (step or text == "1234")
    if step:  # its place, read back as it was written
        assert jobid.in_hold("1234", jobid.place_in_hold(text)) == text
    else:
        with pytest.raises(ValueError):
            jobid.place_in_hold(text)


@pytest.mark.parametrize("field, value", [("requeue", 1), ("array", 2), ("after", (("12", "ok"),))])
def test_what_a_job_in_a_hold_cannot_have_is_refused_with_a_hint(field, value):
    extra = {"array_commands": (("a",), ("b",))} if field == "array" else {}
    with pytest.raises(SpecError) as found:
        JobSpec(command=("x",), on="dev", **{field: value}, **extra)
    assert f"{field} cannot be used with on='dev'" in found.value.message and found.value.hint


def test_a_bad_hold_name_and_a_dependency_on_a_job_in_a_hold_are_refused():
    with pytest.raises(SpecError, match="invalid hold name"):
        JobSpec(command=("x",), on="../dev")
    with pytest.raises(SpecError, match="inside a hold"):
        JobSpec(command=("x",), after=(("12.s1", "ok"),))


def test_on_changes_only_the_names_of_the_jobs_files():
    alone = render_sbatch(JobSpec(command=("python", "x.py"), output_dir="logs")).splitlines()
    inside = render_sbatch(JobSpec(command=("python", "x.py"), output_dir="logs", on="dev")).splitlines()
    added = [line for line in inside if line not in alone]
    assert all(line.startswith("#") or "${HPCJAX_JOB_KEY}" in line for line in added), added
    # its steps take what sbatch would have given a job of its own: its name, time limit and warning
    steps = '  --output=logs/"${HPCJAX_JOB_KEY}"-rank%t.log --job-name="${HPCJAX_JOB_KEY}" --time=01:00:00 ' \
            '--signal=USR2@120 \\'
    assert steps in inside
    assert [line.replace(steps, "  --output=logs/%j-rank%t.log \\").replace("${HPCJAX_JOB_KEY}", "${SLURM_JOB_ID}")
            .replace('"${SLURM_JOB_ID}"', "%j") for line in inside if not line.startswith("#")] == \
        [line for line in alone if not line.startswith("#")]


def test_an_unknown_hold_is_refused_naming_the_known_ones(tmp_path, hpcjax_home):
    code, out, err = cli(tmp_path, "submit", "--backend", "slurm", "--on", "nope", "--", "python", "x.py")
    assert code == 2 and out == "", err
    assert "no hold named 'nope'" in err and "hpcjax hold --name nope" in err
    assert not (tmp_path / "hpcjax-logs").exists()


def test_the_local_backend_has_no_allocation_to_hold(tmp_path, hpcjax_home):
    code, out, err = cli(tmp_path, "submit", "--backend", "local", "--on", "dev", "--", "python", "x.py")
    assert code == 2 and out == "" and "the local backend has no allocation to hold (--on dev)" in err, err
    assert not (tmp_path / "hpcjax-logs").exists()


def test_a_hold_takes_no_requeue_and_no_preflight(tmp_path, hpcjax_home):
    for flag in ("--requeue=1", "--preflight"):
        code, out, err = cli(tmp_path, "hold", "--name", "dev", flag)
        assert code == 2 and out == "" and "cannot be used with `hpcjax hold`" in err, err


def test_a_holds_name_is_one_that_on_can_name(tmp_path, hpcjax_home):
    code, out, err = cli(tmp_path, "hold", "--name", "my hold")
    assert code == 2 and out == "" and "invalid hold name 'my hold'" in err, err
