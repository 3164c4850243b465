"""The tests' forked hpcjax command (tests/forkserver.py) answers as a fresh `python -m hpcjax` does:
the same exit status, stdout and stderr, in the caller's directory and environment, a timeout
that ends it, and a fresh interpreter wherever the fork could differ."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import forkserver
import pytest


def fresh(args, cwd, env):
    return subprocess.run([sys.executable, "-m", "hpcjax", *args], capture_output=True, text=True, cwd=cwd, env=env)


@pytest.mark.parametrize("args", [
    ["--help"],
    ["render", "--nodes", "2", "--gpus-per-node", "4", "--", "python", "train.py"],
    ["render", "--nodes", "two", "--", "true"],  # a refusal: 2, with its hint on stderr
    ["submit", "--dry-run", "--nodes", "1", "--", "true"],
    ["runs", "--json"],  # reads HPCJAX_HOME from the caller's environment
    ["nosuchverb"],
])
def test_a_forked_command_answers_as_a_fresh_interpreter_does(args, tmp_path):
    env = {**os.environ, "HPCJAX_HOME": str(tmp_path / "home"), "SLURM_CONF": "/nonexistent"}
    forked = forkserver.run(args, tmp_path, env, 60)
    assert not forkserver.fresh_python_needed(tmp_path, env), "the fork was not used"
    plain = fresh(args, tmp_path, env)
    assert (forked.returncode, forked.stdout, forked.stderr) == (plain.returncode, plain.stdout, plain.stderr)


def test_the_callers_directory_and_environment_are_the_commands(tmp_path):
    """A relative --output lands in the caller's directory; each call sees its own HPCJAX_HOME
    (nothing one call changed reaches the next)."""
    done = forkserver.run(["render", "-o", "job.sbatch", "--", "true"], tmp_path, dict(os.environ), 60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "job.sbatch").read_text().startswith("#!")
    homes = [tmp_path / "a", tmp_path / "b"]
    for home in homes:
        env = {**os.environ, "HPCJAX_HOME": str(home)}
        done = forkserver.run(["submit", "--backend", "local", "--wait", "--", "true"], tmp_path, env, 120)
        assert done.returncode == 0, done.stderr
    listed = [forkserver.run(["runs", "--json"], tmp_path, {**os.environ, "HPCJAX_HOME": str(home)}, 60).stdout
              for home in homes]
    assert listed[0] != listed[1] and all(text.count('"job_id"') == 1 for text in listed), listed


def test_a_command_past_its_timeout_is_killed_and_raises_as_subprocess_run_does(tmp_path):
    env = {**os.environ, "HPCJAX_HOME": str(tmp_path / "home")}
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        forkserver.run(["submit", "--backend", "local", "--wait", "--", "sleep", "30"], tmp_path, env, 1)
    assert time.monotonic() - started < 20


def test_what_a_child_of_the_zygote_cannot_share_gets_a_fresh_interpreter(tmp_path):
    plain = dict(os.environ)
    assert not forkserver.fresh_python_needed(tmp_path, plain)
    assert not forkserver.fresh_python_needed(tmp_path, {**plain, "PYTHONUNBUFFERED": "1"})  # applied in the child
    for name, value in [("PYTHONWARNINGS", "error"), ("PYTHONPATH", str(tmp_path)), ("LC_ALL", "C"),
                        ("LD_PRELOAD", "/nonexistent.so")]:
        assert forkserver.fresh_python_needed(tmp_path, {**plain, name: value}), name
    assert forkserver.fresh_python_needed(tmp_path / "gone", plain)


@pytest.mark.parametrize("code, status", [(None, 0), (3, 3), (256 + 4, 4), ("a message", 1)])
def test_systemexit_ends_the_child_with_pythons_own_status(code, status, capsys):
    assert forkserver.exit_code_of(code) == status
    assert capsys.readouterr().err == ("a message\n" if isinstance(code, str) else "")
