"""The exit guard (issue 36, part 4), without JAX: a process whose exit handler runs a stand-in of
JAX's distributed shutdown (tests/data/exit_guard_standin.py), with the guard's sitecustomize
first on PYTHONPATH as a job puts it. A shutdown that stalls after every process ended is cut
at the bound with the program's own exit status; one that finishes is left alone; a process
that never reached its end (the guard's barrier fails) gets JAX's own shutdown unbounded. And
where the hook is put: the rendered script, a container's PYTHONPATH, the local backend's ranks.
The real JAX runs are in test_exitguard_jax.py (local backend) and test_exitguard_cluster.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA_DIR, REPO
from hpcjax import timeouts
from hpcjax.containers import binds
from hpcjax.errors import ConfigError
from hpcjax.job.spec import Container, JobSpec, Layout
from hpcjax.localjobs.environment import rank_environment
from hpcjax.slurm.script import render_sbatch

HOOK = str(Path(binds.hpcjax_package_dir()) / timeouts.EXIT_HOOK_DIR)
STANDIN = str(DATA_DIR / "exit_guard_standin.py")
CUT = "JAX's distributed shutdown had not finished"


def run(mode: str, shutdown_s: float, bound: str = "1", pythonpath: str = HOOK) -> subprocess.CompletedProcess:
    """The stand-in process; a guard that does not cut a 60 s shutdown fails by the timeout."""
    env = {**os.environ, "PYTHONPATH": ":".join(p for p in (pythonpath, str(REPO)) if p), "HPCJAX_EXIT_BOUND": bound,
           "STANDIN_SHUTDOWN_S": str(shutdown_s)}
    return subprocess.run([sys.executable, STANDIN, mode], capture_output=True, text=True, env=env, timeout=30)


@pytest.mark.parametrize("mode, status", [("exit0", 0), ("exit3", 3), ("raise", 1)])
def test_a_stalled_shutdown_is_cut_at_the_bound_with_the_programs_own_status(mode, status):
    result = run(mode, shutdown_s=60)
    assert result.returncode == status, result.stderr
    assert "the program's last line" in result.stdout and "shutdown began" in result.stdout
    assert "shutdown ended" not in result.stdout
    assert f"{CUT} 1 s later; ending this process with the program's exit status {status}" in result.stderr
    assert ("ValueError: the program failed" in result.stderr) == (mode == "raise")


def test_a_shutdown_that_finishes_is_left_alone():
    result = run("exit0", shutdown_s=0.2)
    assert result.returncode == 0 and "shutdown ended" in result.stdout, result.stderr
    assert CUT not in result.stderr


@pytest.mark.parametrize("how", ["bound 0", "no hook on the path"])
def test_without_the_guard_jaxs_shutdown_runs_to_its_end(how):
    result = run("exit3", shutdown_s=1.5, **({"bound": "0"} if how == "bound 0" else {"pythonpath": ""}))
    assert result.returncode == 3 and "shutdown ended" in result.stdout, result.stderr
    assert CUT not in result.stderr


def test_a_process_that_never_reached_its_end_gets_jaxs_own_shutdown():
    result = run("barrier-fails", shutdown_s=1.5)
    assert result.returncode == 0 and "shutdown ended" in result.stdout, result.stderr
    assert CUT not in result.stderr
    assert ("hpcjax: process 1: not every process reached the end of its program (DEADLINE_EXCEEDED: barrier "
            "hpcjax/exit timed out after 300000 ms); JAX's own shutdown follows, unbounded") in result.stderr


def test_a_program_whose_threads_work_on_is_not_exiting_yet(monkeypatch):
    """The exit begins once the program's threads are joined: its watch (here with a 1 s floor)
    and the guard's changes start after the thread's 1.5 s of work, not when the main thread returns."""
    monkeypatch.setenv("HPCJAX_HANG_FLOOR", "1")
    result = run("thread-works", shutdown_s=0)
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert "the thread's work is done" in result.stdout and "shutdown ended" in result.stdout


def test_the_time_limit_warning_during_the_exit_does_not_end_a_finished_program():
    result = run("usr2", shutdown_s=0)
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert "still here after the warning" in result.stdout and "shutdown ended" in result.stdout


def test_the_sites_own_sitecustomize_still_runs(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import sys\nprint('the site customized', file=sys.stderr)\n")
    result = run("exit3", shutdown_s=60, pythonpath=f"{HOOK}:{tmp_path}")
    assert result.returncode == 3 and "the site customized" in result.stderr and CUT in result.stderr


def test_a_broken_site_sitecustomize_is_said_and_the_program_runs(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("raise OSError('the site is broken')\n")
    result = run("exit0", shutdown_s=0, pythonpath=f"{HOOK}:{tmp_path}")
    assert result.returncode == 0 and "shutdown ended" in result.stdout
    assert "exit guard's sitecustomize: _run_the_sites_own: OSError: the site is broken" in result.stderr


def spec(**fields) -> JobSpec:
    return JobSpec(command=("python3", "demo.py"), layout=Layout(nodes=2, gpus_per_node=4), **fields)


def test_the_rendered_script_puts_the_hook_first_on_the_ranks_path():
    text = render_sbatch(spec(env=(("PYTHONPATH", "/mine"),)))
    assert f"hpcjax_exit_hook={HOOK}\nif [ -f \"$hpcjax_exit_hook/sitecustomize.py\" ]; then" in text  # else: said
    user, hook = text.index("export PYTHONPATH=/mine"), text.index('export PYTHONPATH="$hpcjax_exit_hook${PYTHONPATH:+')
    assert user < hook < text.index("srun --kill-on-bad-exit")  # the user's path kept, after the hook
    assert f"may take {timeouts.DEFAULT_EXIT_BOUND_S} s at most" in text
    assert HOOK not in render_sbatch(spec(env=(("HPCJAX_EXIT_BOUND", "0"),)))


def test_a_container_gets_the_bound_copy_of_the_hook(tmp_path):
    (tmp_path / "img" / "etc").mkdir(parents=True)
    jobspec = spec(container=Container(runtime="charliecloud", image=str(tmp_path / "img")))
    inside = f"{binds.HPCJAX_TARGET}/hpcjax/{timeouts.EXIT_HOOK_DIR}"
    assert binds.python_path(jobspec).split(":")[:2] == [inside, binds.HPCJAX_TARGET]
    text = render_sbatch(jobspec)
    assert inside in text and f"export PYTHONPATH={HOOK}" not in text
    unbound = spec(container=Container(runtime="charliecloud", image=str(tmp_path / "img"), bind_hpcjax=False))
    assert inside not in binds.python_path(unbound)


def test_a_local_rank_gets_the_hook(tmp_path):
    env = rank_environment(spec(output_dir=str(tmp_path), env=(("PYTHONPATH", "/mine"),)), "1234", 0, 5000)
    assert env["PYTHONPATH"] == f"{HOOK}:/mine"
    off = rank_environment(spec(output_dir=str(tmp_path), env=(("HPCJAX_EXIT_BOUND", "0"),)), "1234", 0, 5000)
    assert HOOK not in off.get("PYTHONPATH", "")


@pytest.mark.parametrize("value", ["ten", "-1", "1.5"])
def test_a_bad_bound_is_refused_before_submitting(value):
    with pytest.raises(ConfigError, match=f"HPCJAX_EXIT_BOUND='{value}' is not a whole number"):
        timeouts.check_job_environment({"HPCJAX_EXIT_BOUND": value})


def test_a_hostile_package_path_is_only_ever_a_word(tmp_path):
    hostile = f"{tmp_path}/a b$(touch {tmp_path}/pwned)`touch {tmp_path}/pwned`"
    text = render_sbatch(spec(env=(("HPCJAX_BIND_SOURCE", hostile),)))
    start = text.index("hpcjax_exit_hook=")
    fragment = text[start:text.index("\nfi\n", start) + 4]
    ran = subprocess.run(["bash", "-c", fragment], capture_output=True, text=True)
    assert ran.returncode == 0 and not (tmp_path / "pwned").exists(), ran.stderr
    assert f"hook is not on {os.uname().nodename} at {hostile}/rank/exithook:" in ran.stdout
