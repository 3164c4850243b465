"""Bad input, round three (issue 34, part 3): the newer surface (runs, relaunch, sweeps, --after,
stacks, fetch, tunnel, upload, Data, cluster profiles, hang and timeout knobs, hpcjax.compiled,
the configs). One table per class; each refusal is `error:` + hint, exit 1 or 2, no traceback and
nothing written. Generated inputs over the same surfaces: tests/cli/test_generated_input.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import hpcjax
from hpcjax.values.errors import HpcjaxError, UsageError
from test_bad_input import refused


# --- values accepted that meant nothing, or something else --------------------------------------
@pytest.mark.parametrize("argv, words", [
    (["logs", "1", "--tail", "-5"], "'-5' is not a whole number (at least 0)"),
    (["logs", "1", "--rank", "-1"], "'-1' is not a whole number (at least 0)"),
    (["tunnel", "1", "0"], "'0' is not a TCP port (1..65535)"),
    (["tunnel", "1", "99999"], "'99999' is not a TCP port (1..65535)"),
    (["tunnel", "1", "8888", "--local-port", "0"], "'0' is not a TCP port"),
    (["check", "bandwidth", "--iters", "0"], "'0' is not a whole number (at least 1)"),
    (["runs", "--state", "bogus"], "--state 'bogus' is not a state a job can be in"),
    (["submit", "--cluster", "", "--", "true"], "--cluster '' names no cluster"),
    (["render", "--cluster", " ", "--", "true"], "--cluster ' ' names no cluster"),
    (["submit", "--sweep", "x=1,2", "--max-parallel", "0", "--", "echo", "{x}"], "'0' is not a whole number"),
    (["render", "--env", "HPCJAX_HEARTBEAT_TIMEOUT=abc", "--", "true"],
     "HPCJAX_HEARTBEAT_TIMEOUT='abc' is not a whole number of seconds of at least 2"),
    (["render", "--env", "HPCJAX_HEARTBEAT_TIMEOUT=-4", "--", "true"], "HPCJAX_HEARTBEAT_TIMEOUT='-4'"),
    (["render", "--env", "HPCJAX_INIT_TIMEOUT=0", "--", "true"], "HPCJAX_INIT_TIMEOUT='0'"),
    (["submit", "--cluster", "me@login.invalid", "--upload", "", "--", "true"], "--upload '' names no directory"),
])
def test_values_that_meant_nothing_are_refused(empty, argv, words):
    refused(empty, argv, words)


def test_fetch_to_a_file_is_refused(empty):
    (empty / "notes.txt").write_text("mine")
    refused(empty, ["fetch", "123", "--to", "notes.txt"], "--to 'notes.txt' is not a directory (it is a file)",
            leaves=["notes.txt"])
    assert (empty / "notes.txt").read_text() == "mine"


def test_a_profile_ship_limit_below_one_is_refused(empty):
    (empty / "p.toml").write_text('[profiles.far]\nhost = "me@login"\nship_limit_mb = -1\n')
    refused(empty, ["render", "--profile", "far", "--profile-file", "p.toml", "--", "true"],
            "ship_limit_mb must be at least 1, got -1", leaves=["p.toml"])


# --- the Python API ---------------------------------------------------------------------------
@pytest.mark.parametrize("make, words", [
    (lambda: hpcjax.job_spec("python x.py"), "is one string, not a list of words"),
    (lambda: hpcjax.ScalingConfig(env="A=1"), "ScalingConfig(env=...) must be a table (a dict) of strings"),
    (lambda: hpcjax.ScalingConfig(modules="dl"), "ScalingConfig(modules=...) must be a list of strings"),
    (lambda: hpcjax.ScalingConfig(nodes="2"), "ScalingConfig(nodes=...) must be an integer"),
    (lambda: hpcjax.ScalingConfig(exclusive="yes"), "must be true or false"),
    (lambda: hpcjax.ScalingConfig(cluster=""), "cluster= '' names no cluster"),
    (lambda: hpcjax.ScalingConfig(env={"HPCJAX_HEARTBEAT_TIMEOUT": "soon"}), "HPCJAX_HEARTBEAT_TIMEOUT='soon'"),
])
def test_api_values_of_the_wrong_kind_are_refused_when_made(make, words):
    with pytest.raises(HpcjaxError) as raised:
        make()
    assert words in raised.value.message and raised.value.hint


# --- hints that pointed the wrong way --------------------------------------------------------
def test_a_corpus_too_small_says_raise_it():
    from hpcjax.train.data import load_corpus

    with pytest.raises(UsageError) as raised:
        load_corpus(1000)
    assert "is too small" in raised.value.message and "raise --corpus-bytes" in raised.value.hint


@pytest.mark.parametrize("said, words", [
    ("sbatch: error: Batch job submission failed: Invalid partition name specified", "`sinfo -s` lists them"),
    ("sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified",
     "--account is not yours"),
    ("sbatch: error: Batch job submission failed: Invalid qos specification", "--qos is not one you may use"),
    ("sbatch: error: Batch job submission failed: Requested time limit is invalid (missing or exceeds some limit)",
     "--time is over the partition's limit"),
    ("sbatch: error: Batch job submission failed: Invalid feature specification", "--constraint names no feature"),
    ("sbatch: error: Memory specification can not be satisfied", "--mem is more than a node has"),
    ("sbatch: error: CPU count per node can not be satisfied", "more CPUs than a node has"),
    ("sbatch: error: Batch job submission failed: Job violates accounting/QOS policy", "over a limit of your"),
])
def test_each_sbatch_refusal_has_its_own_hint(said, words):
    """sinfo answers through a stand-in host here (the hint's own rule is under test; the dev
    cluster's real sinfo is in tests/launch/test_submit_cluster.py's refusals)."""
    from hpcjax.slurm.controller import Slurm

    class Sinfo:
        asked = []

        def run(self, argv, timeout=None):
            self.asked.append(argv[0])
            return subprocess.CompletedProcess(argv, 0, "gpu 2 8 gpu:4\n", "")

    host = Sinfo()
    hint = Slurm(host).refusal_hint(said)
    assert words in hint
    about_nodes = any(w in said for w in ("CPU", "Memory"))
    assert ("the cluster has: gpu 2 8 gpu:4" in hint) == about_nodes and (host.asked == ["sinfo"]) == about_nodes


# --- tracebacks on everyday paths ------------------------------------------------------------
def test_logs_into_a_closed_pipe_ends_quietly(tmp_path):
    """`hpcjax logs JOB | head -1` (BrokenPipeError before)."""
    home = tmp_path / "home"
    env = {**os.environ, "HPCJAX_HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "hpcjax", "submit", "--backend", "local", "--", sys.executable,
                           "-c", "print('\\n'.join(map(str, range(200000))))"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    job = done.stdout.split()[0]
    piped = subprocess.run(f"{sys.executable} -m hpcjax logs {job} | head -1", shell=True, cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert piped.stdout == "[rank 0 local0] 0\n" and piped.stderr == "", piped.stderr


@pytest.mark.parametrize("function, name, words", [
    (lambda x: x, "step", "takes a jitted function, got function"),
    (None, "../../outside", "a program's name is a plain name, not a path"),
    (None, "/tmp/abs", "not a path"),
    (None, "", "not a path"),
])
def test_hpcjax_compiled_refuses_what_it_cannot_key_before_it_writes(tmp_path, monkeypatch, function, name, words):
    """A name that was a path wrote outside the cache; a plain function gave a traceback from deep inside."""
    from hpcjax.rank.cache import executables

    class Jitted:  # stands for jax.jit(f): only its .trace would be called, after the checks
        def trace(self, *args):
            raise AssertionError("traced before the checks")

    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        executables.compiled(function or Jitted(), 1, name=name)
    assert list(tmp_path.iterdir()) == []


def test_an_hpcjaxignore_that_excepts_is_refused_before_anything_is_sent(empty, monkeypatch):
    """.gitignore's `!pattern` (ship it after all) is not read by hpcjax: refused with the line, before any
    connection (the host here does not resolve, and is never asked)."""
    monkeypatch.delenv("HPCJAX_BACKEND")
    (empty / ".hpcjaxignore").write_text("data/\n!data/keep.txt\n")
    (empty / "train.py").write_text("")
    err = refused(empty, ["submit", "--cluster", "me@login.invalid", "--", "python", "train.py"],
                  ".hpcjaxignore:2: '!data/keep.txt'", leaves=[".hpcjaxignore", "train.py"])
    assert "login.invalid" not in err
