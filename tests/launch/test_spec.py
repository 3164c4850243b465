import pytest

from hpcjax.values.errors import SpecError, UsageError
from hpcjax.job.envvars import parse_env_assignment
from hpcjax.job.spec import Container, JobSpec, Layout
from hpcjax.job.walltime import format_walltime, parse_walltime


@pytest.mark.parametrize("text, seconds", [
    ("5", 300), ("5:30", 330), ("01:00:00", 3600), ("1-0", 86400), ("2-3", 2 * 86400 + 3 * 3600),
    ("1-02:03", 86400 + 2 * 3600 + 180), ("1-02:03:04", 86400 + 2 * 3600 + 184), ("100", 6000),
    ("48:00:00", 48 * 3600),
])
def test_walltime_forms_slurm_accepts(text, seconds):
    assert parse_walltime(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "1:2:3:4", "00:61:00", "00:00:00", "-5", "1-25", "1h",
                                  "10:60"])
def test_malformed_walltime_is_rejected_with_the_forms(text):
    with pytest.raises(SpecError) as err:
        parse_walltime(text)
    assert "HH:MM:SS" in err.value.hint


def test_walltime_is_stored_normalized():
    assert JobSpec(command=("x",), time="90").time == "01:30:00"
    assert format_walltime(86400 + 61) == "1-00:01:01"


@pytest.mark.parametrize("nodes, gpus, k, tasks, procs, name", [
    (1, 4, 1, 4, 4, "G4N1p4"), (2, 2, 2, 1, 2, "G4N2p2"), (2, 2, 1, 2, 4, "G4N2p4"),
    (2, 4, 1, 4, 8, "G8N2p8"), (2, 4, 4, 1, 2, "G8N2p2"), (3, 8, 2, 4, 12, "G24N3p12"),
])
def test_layout_derives_tasks_and_processes(nodes, gpus, k, tasks, procs, name):
    layout = Layout(nodes=nodes, gpus_per_node=gpus, gpus_per_process=k)
    assert (layout.tasks_per_node, layout.num_processes, layout.name) == (tasks, procs, name)


@pytest.mark.parametrize("kwargs, words", [
    (dict(nodes=0), "nodes must be an integer >= 1"),
    (dict(nodes=-2), "got -2"),
    (dict(gpus_per_node=0), "gpus_per_node"),
    (dict(gpus_per_process=0), "gpus_per_process"),
    (dict(gpus_per_node=4, gpus_per_process=3), "does not divide"),
    (dict(nodes=True), "nodes"),
])
def test_bad_layouts(kwargs, words):
    with pytest.raises(SpecError) as err:
        Layout(**kwargs)
    assert words in err.value.message and err.value.hint


def test_non_divisor_hint_lists_the_valid_values():
    with pytest.raises(SpecError) as err:
        Layout(gpus_per_node=8, gpus_per_process=3)
    assert "1, 2, 4, 8" in err.value.hint


def test_container_rules(tmp_path):
    image = tmp_path / "jax.sif"
    image.touch()
    assert Container(runtime="apptainer", image=str(image)).image_is_local_file
    assert Container(runtime="singularity", image="$JAX_IMAGE").image_env_var == "JAX_IMAGE"
    assert Container(runtime="apptainer", image="docker://nvcr.io/nvidia/jax:24.04").image_env_var is None
    with pytest.raises(SpecError, match="unknown container runtime 'docker'"):
        Container(runtime="docker", image=str(image))
    with pytest.raises(SpecError, match="needs an image"):
        Container(runtime="apptainer")
    # A missing image file is no spec error: it may be the login node's (checked at submission).
    assert Container(runtime="apptainer", image=str(tmp_path / "missing.sif")).image_is_local_file
    with pytest.raises(SpecError, match="runtime 'none'"):
        Container(runtime="none", image=str(image))


@pytest.mark.parametrize("kwargs, words", [
    (dict(command=()), "the command is empty"),
    (dict(command=("",)), "the command is empty"),
    (dict(command=("a\0b",)), "NUL"),
    (dict(command=("x",), job_name="two\nlines"), "control character"),
    (dict(command=("x",), partition="gpu a100"), "contains a space"),
    (dict(command=("x",), mem="lots"), "malformed memory size"),
    (dict(command=("x",), cpus_per_task=0), "cpus_per_task"),
    (dict(command=("x",), env={"1BAD": "v"}), "invalid environment variable name"),
    (dict(command=("x",), env={"HPCJAX_NODES": "3"}), "set by hpcjax itself"),
    (dict(command=("x",), modules=("dl\nrm -rf /",)), "control character"),
    (dict(command=("x",), requeue=-1), "requeue"),
    (dict(command=("x",), requeue="2"), "requeue"),
    (dict(command=("x",), retry_failed=True), "retry_failed needs a requeue budget"),
])
def test_bad_job_fields(kwargs, words):
    with pytest.raises(SpecError) as err:
        JobSpec(**kwargs)
    assert words in err.value.message and err.value.hint


def test_spec_errors_are_usage_errors_with_exit_2():
    assert issubclass(SpecError, UsageError) and SpecError.exit_code == 2


def test_spec_is_frozen_and_keyword_only():
    spec = JobSpec(command=("python", "train.py"))
    with pytest.raises(Exception):
        spec.nodes = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        JobSpec(("python",))  # type: ignore[misc]


@pytest.mark.parametrize("text, pair", [("A=1", ("A", "1")), ("A=", ("A", "")),
                                        ("XLA_FLAGS=--a=1 --b=2", ("XLA_FLAGS", "--a=1 --b=2"))])
def test_env_assignment(text, pair):
    assert parse_env_assignment(text) == pair


@pytest.mark.parametrize("text", ["NOVALUE", "=v", "A B=1"])
def test_malformed_env_assignment(text):
    with pytest.raises(SpecError):
        parse_env_assignment(text)
