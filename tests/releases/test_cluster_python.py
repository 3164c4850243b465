"""The cluster's own Python (issue 62, part 4): a laptop on this machine's Python 3.11 (its
cloudpickle and NumPy) drives the SLURM 24.11 cluster over the tests' sshd, whose login side and
ranks run Debian 13's own Python 3.13 with its own JAX wheels, NumPy and cloudpickle
(slurm/devcluster/root-user.sh; the sshd runs inside that release's root). hpcjax itself is
shipped, as from any laptop.

`hpcjax train`, `@hpcjax.remote` and the Trainer with functions of the user's module (pickled by
name) round-trip across the two Pythons; a function that travels as code (defined in __main__ or a
lambda: bytecode, which only the same Python minor version loads) is refused before anything is
submitted, with what to align."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support import MODEL

pytestmark = [pytest.mark.cluster, pytest.mark.xdist_group("release-24.11")]

USER_MODULE = '''\
import sys


def where(x):
    import cloudpickle, jax, numpy

    return {"python": "%d.%d" % sys.version_info[:2], "cloudpickle": cloudpickle.__version__,
            "numpy": numpy.__version__, "ranks": jax.process_count(), "twice": numpy.asarray(x) * 2}


def train_func(config):
    import jax
    import hpcjax

    for epoch in range(2):
        hpcjax.report({"epoch": epoch, "python": "%d.%d" % sys.version_info[:2], "ranks": jax.process_count(),
                       "value": config["start"] / (epoch + 1)})
'''

CALLER = '''\
import json, sys
import numpy
import hpcjax
from hpcjax import JaxTrainer, ScalingConfig, RunConfig
from hpcjax.values.errors import HpcjaxError
import {module} as user

options = dict(nodes=1, gpus_per_node=2, time="00:05:00")
how = sys.argv[1]
try:
    if how == "remote":
        print(json.dumps(hpcjax.remote(**options)(user.where)(numpy.arange(3)), default=lambda a: a.tolist()))
    elif how == "trainer":
        result = JaxTrainer(user.train_func, train_loop_config={{"start": 8.0}},
                            scaling_config=ScalingConfig(**options),
                            run_config=RunConfig(storage_path="runs")).fit()
        print(json.dumps(result.metrics))
    elif how == "by value":
        def local(x):
            return x + 1
        print(hpcjax.remote(**options)(local)(1))
except HpcjaxError as error:
    print("refused:", error.message, "| hint:", error.hint)
'''


@pytest.fixture
def project(laptop, ssh_cluster_own_python):
    """A user's project on the laptop (a git repository with their module and a caller script), and
    the profile that names the 24.11 cluster over SSH ($HPCJAX_CLUSTER, as a user sets it)."""
    repo = laptop / "project"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    module = f"usermod_{os.getpid()}"
    (repo / f"{module}.py").write_text(USER_MODULE)
    (repo / "caller.py").write_text(CALLER.format(module=module))
    profiles = ssh_cluster_own_python.profiles(laptop / "profiles.toml", name="py313")
    env = {**os.environ, "HPCJAX_CLUSTER": "py313", "HPCJAX_PROFILES": str(profiles)}
    return repo, env, profiles


def call(project, how: str) -> subprocess.CompletedProcess:
    repo, env, _ = project
    return subprocess.run([sys.executable, "caller.py", how], capture_output=True, text=True, cwd=repo, env=env,
                          timeout=900)


def test_the_cluster_login_runs_its_own_python(ssh_cluster_own_python):
    said = ssh_cluster_own_python.ssh("python3 -c 'import sys, jax; print(sys.version_info[:2], jax.__version__)'"
                                      " && sinfo --version")
    assert said.returncode == 0, said.stderr
    assert said.stdout.split("\n")[0].startswith("(3, 13)") and "24.11." in said.stdout, said.stdout
    assert sys.version_info[:2] != (3, 13)  # the laptop's is another


def test_a_remote_function_of_the_users_module_round_trips_across_the_two_pythons(project):
    done = call(project, "remote")
    assert done.returncode == 0 and done.stdout.strip().endswith("}"), done.stdout + done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert (found["python"], found["ranks"], found["twice"]) == ("3.13", 2, [0, 2, 4]), found
    import cloudpickle

    print(f"laptop cloudpickle {cloudpickle.__version__}, cluster {found['cloudpickle']}")


def test_a_function_that_travels_as_code_is_refused_before_a_job_is_spent(project):
    done = call(project, "by value")
    assert done.returncode == 0, done.stderr[-3000:]
    here = "%d.%d" % sys.version_info[:2]
    assert (f"refused: local travels as code (defined in __main__, a notebook or a lambda), and code pickled by "
            f"Python {here} here does not load in Python 3.13 on hpcjax-test-cluster") in done.stdout, done.stdout
    assert "hint: align the two: run this from a Python 3.13 here" in done.stdout
    assert "submitted" not in done.stderr  # nothing reached SLURM


def test_the_trainer_round_trips_across_the_two_pythons(project):
    done = call(project, "trainer")
    assert done.returncode == 0 and done.stdout.strip().endswith("}"), done.stdout + done.stderr[-3000:]
    metrics = json.loads(done.stdout.strip().splitlines()[-1])
    assert (metrics["python"], metrics["ranks"], metrics["value"]) == ("3.13", 2, 4.0), metrics


def test_hpcjax_train_runs_on_the_clusters_python(project, laptop):
    repo, env, profiles = project
    done = subprocess.run([sys.executable, "-m", "hpcjax", "submit", "--nodes", "1", "--gpus-per-node", "2",
                           "--wait", "--", "python3", "-m", "hpcjax", "train", "--steps", "4", "--run-dir", "run",
                           *MODEL], capture_output=True, text=True, cwd=repo, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    logs = subprocess.run([sys.executable, "-m", "hpcjax", "logs", done.stdout.split()[0], "--rank", "0"],
                          capture_output=True, text=True, cwd=repo, env=env, timeout=120).stdout
    assert "step 4/4  loss " in logs, logs[-2000:]
