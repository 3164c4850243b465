import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_hpcjax
from support import cli

BAD_INPUTS = [
    (["--nodes", "0"], "nodes must be an integer >= 1, got 0"),
    (["--nodes", "-1"], "got -1"),
    (["--gpus-per-node", "0"], "--gpus-per-node must be an integer >= 1"),
    (["--gpus-per-node", "4", "--gpus-per-process", "3"], "does not divide"),
    (["--time", "tomorrow"], "malformed walltime 'tomorrow'"),
    (["--runtime", "docker", "--image", "x.sif"], "unknown container runtime 'docker'"),
    (["--runtime", "apptainer"], "needs an image"),
    (["--env", "NOEQUALS"], "malformed --env 'NOEQUALS'"),
    (["--env", "1X=2"], "invalid environment variable name"),
    (["--nodes", "two"], "invalid int value"),
    (["--mem", "lots"], "malformed memory size"),
]


# What only a submit refuses: a rendered script may be meant for where the paths exist.
SUBMIT_ONLY = [(["--image", "missing.sif"], "image 'missing.sif' does not exist")]


@pytest.mark.parametrize("verb, options, words", [(v, o, w) for o, w in BAD_INPUTS for v in ("render", "submit")]
                         + [("submit", o, w) for o, w in SUBMIT_ONLY])
def test_bad_input_exits_2_with_error_and_hint_and_writes_nothing(tmp_path, monkeypatch, verb, options, words):
    # in this process (`main` as the console script calls it): the interpreter's own start is
    # tested once below, and 23 starts of it were a tenth of the pure tier's time
    monkeypatch.setenv("HPCJAX_HOME", str(tmp_path / "home"))
    extra = ["-o", "job.sh"] if verb == "render" else []
    code, out, err = cli(tmp_path, verb, *options, *extra, "--", "python", "train.py")
    assert code == 2, err
    assert err.startswith("error: ") and words in err
    assert "\n\nhint: " in err
    assert "Traceback" not in err and out == ""
    assert list(tmp_path.iterdir()) == []  # no script, no log dir, no job record


@pytest.mark.parametrize("verb", ["render", "submit"])
def test_empty_command_is_a_usage_error(tmp_path, verb):
    for tail in ([], ["--"]):
        result = run_hpcjax(verb, "--nodes", "2", *tail, cwd=tmp_path)  # through the interpreter, as typed
        assert result.returncode == 2 and "the command is empty" in result.stderr
        assert "hint: put the program after --" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_render_prints_the_script_on_stdout(tmp_path):
    (tmp_path / "jax.sif").touch()
    result = run_hpcjax("render", "--nodes", "2", "--gpus-per-node", "4", "--image", "jax.sif",
                        "--", "python", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("#!/bin/bash\n")
    assert "#SBATCH --nodes=2" in result.stdout and "#SBATCH --ntasks-per-node=4" in result.stdout
    assert "apptainer exec --nv --bind \"$HPCJAX_LOG_DIR\" --bind " in result.stdout
    assert ":/opt/hpcjax/lib/hpcjax jax.sif \\\n" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jax.sif"]  # stdout only, nothing written


def test_render_to_a_file_creates_it_and_the_log_dir(tmp_path):
    result = run_hpcjax("render", "--gpus-per-node", "2", "-o", "out/job.sh", "--output-dir", "logs",
                        "--", "hostname", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and "sbatch out/job.sh" in result.stderr
    script = tmp_path / "out/job.sh"
    assert script.read_text().startswith("#!/bin/bash") and os.access(script, os.X_OK)
    assert (tmp_path / "logs").is_dir()


def test_command_after_double_dash_is_not_parsed_as_options(tmp_path):
    result = run_hpcjax("render", "--", "python", "train.py", "--nodes", "7", "--help", cwd=tmp_path)
    assert result.returncode == 0
    assert "#SBATCH --nodes=1" in result.stdout and "python train.py --nodes 7 --help" in result.stdout


def test_dry_run_shows_the_script_and_submits_nothing(tmp_path):
    result = run_hpcjax("submit", "--dry-run", "--nodes", "2", "--", "hostname", cwd=tmp_path,
                        env={"HPCJAX_HOME": str(tmp_path / "home")})
    assert result.returncode == 0
    assert "#SBATCH --nodes=2" in result.stdout and "dry run" in result.stderr
    assert list(tmp_path.iterdir()) == []


def _path_without_slurm() -> str:
    bare = [p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "sbatch").exists()]
    return os.pathsep.join([str(Path(sys.executable).parent), *bare])


def test_submit_to_slurm_without_slurm_says_so(tmp_path):
    result = run_hpcjax("submit", "--backend", "slurm", "--", "hostname", cwd=tmp_path,
                        env={"PATH": _path_without_slurm(), "HPCJAX_HOME": str(tmp_path / "h")})
    assert result.returncode == 1
    assert "error: SLURM is not installed on this machine" in result.stderr and "hint:" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_submit_without_slurm_runs_locally_and_says_so(tmp_path):
    result = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--", "/bin/bash", "-c",
                        'echo "rank $SUBMITIT_LOCAL_GLOBALID of $SUBMITIT_LOCAL_NTASKS"', cwd=tmp_path,
                        env={"PATH": _path_without_slurm()})
    assert result.returncode == 0, result.stderr
    assert "no SLURM on this machine" in result.stderr and "COMPLETED" in result.stderr
    job_id = result.stdout.strip()
    logs = sorted((tmp_path / "hpcjax-logs").glob(f"{job_id}-rank*.log"))
    assert [p.read_text() for p in logs] == [f"rank {r} of 4\n" for r in range(4)]


def test_local_backend_refuses_a_missing_program(tmp_path):
    result = run_hpcjax("submit", "--backend", "local", "--", "no-such-program-xyz", cwd=tmp_path)
    assert result.returncode == 2 and "'no-such-program-xyz' is not found" in result.stderr
    assert "Traceback" not in result.stderr


def test_render_does_not_import_jax():
    code = ("import sys; from hpcjax.cli import main; "
            "rc = main(['render', '--nodes', '2', '--gpus-per-node', '4', '--', 'python', 't.py']); "
            "heavy = [m for m in ('jax', 'jaxlib', 'optax', 'submitit', 'numpy') if m in sys.modules]; "
            "print(rc, heavy, file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stderr.strip().splitlines()[-1] == "0 []", result.stderr


def test_version_and_help():
    assert run_hpcjax("--version").stdout.startswith("hpcjax ")
    help_text = run_hpcjax("submit", "--help").stdout
    for option in ("--nodes", "--gpus-per-node", "--gpus-per-process", "--time", "--partition",
                   "--account", "--qos", "--constraint", "--job-name", "--cpus-per-task", "--mem",
                   "--exclusive", "--image", "--runtime", "--bind", "--module", "--env", "--wait",
                   "--dry-run"):
        assert option in help_text


def test_unknown_verb_is_a_usage_error():
    result = run_hpcjax("launch")
    assert result.returncode == 2 and result.stderr.startswith("error: ")


def test_help_describes_the_tool_for_users_not_developers():
    result = run_hpcjax("--help")
    assert result.returncode == 0
    assert "Take a JAX training job from a laptop to a SLURM GPU cluster" in result.stdout
    assert "Thin:" not in result.stdout and "Importing" not in result.stdout  # the module's developer notes


def test_container_flags_that_start_with_dashes_are_taken_as_values(tmp_path):
    (tmp_path / "jax.sif").touch()
    result = run_hpcjax("render", "--image", "jax.sif", "--container-flag", "--cleanenv", "--container-flag",
                        "--writable-tmpfs", "--", "python", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "apptainer exec --nv --cleanenv --bind " in result.stdout
    assert ":/opt/hpcjax/lib/hpcjax --writable-tmpfs jax.sif" in result.stdout
