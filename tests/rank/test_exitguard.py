"""The exit guard's logic (issue 48) without JAX: a program that imports a stand-in of JAX's exit
(tests/data/standin_jax: its distributed client, its own exit handler, the drain), with the
guard's sitecustomize first on PYTHONPATH as a job puts it. What it proves: the guard acts only in
a process with a distributed client (not in a plain Python, a forked child, or one JAX that is not
distributed), in its order (barrier, drain, then JAX's own shutdown), and the exit status is
always the one bare Python gives, every way a program ends. And where the hook is put: the
rendered script, a container's PYTHONPATH, the local backend's ranks.

The real mechanism (collectives still in flight at the end of a real multi-process JAX program)
is tested in test_exitguard_jax.py (local backend) and test_exitguard_cluster.py (dev cluster)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA_DIR, REPO, completed
from hpcjax.protocol import timeouts
from hpcjax.containers import binds
from hpcjax.values.errors import ConfigError
from hpcjax.job.spec import Container, JobSpec, Layout
from hpcjax.localjobs.environment import rank_environment
from hpcjax.slurm.script import render_sbatch

HOOK = str(Path(binds.hpcjax_package_dir()) / timeouts.EXIT_HOOK_DIR)
PROGRAM = str(DATA_DIR / "standin_program.py")
ENDS = str(DATA_DIR / "program_ends.py")
STANDIN_JAX = str(DATA_DIR / "standin_jax")
BARRIER, DRAINED, JAX_SHUTDOWN = "guard: barrier hpcjax/exit", "guard: drained", "jax: distributed shutdown"
WAYS = ("return", "exit3", "raise3", "main4", "error", "hooked", "interrupt", "os_exit5", "kill")
NOT_DISTRIBUTED = ("return", "exit3", "error")


def shell_status(returncode: int) -> int:
    """A process's status as a shell says it: 128+N for a signal."""
    return 128 - returncode if returncode < 0 else returncode


def bare(how: str) -> int:
    """What bare Python gives for a program that ends that way."""
    return shell_status(subprocess.run([sys.executable, ENDS, how], capture_output=True, timeout=30).returncode)


def assert_each_ends_as_bare_python(runs: dict) -> None:
    """Each Run of `runs` (a way a program ends -> its job) waited for: its exit code is bare
    Python's, and its state COMPLETED for 0, else FAILED."""
    for how, job in runs.items():
        outcome = job.wait(progress=False)
        expected = bare(how)
        assert outcome.exit_code == expected, (how, outcome.report())
        assert outcome.state == ("COMPLETED" if expected == 0 else "FAILED"), (how, outcome.report())


def start(end: str = "return", *, distributed: bool = True, pythonpath: str = HOOK, **env) -> subprocess.Popen:
    environ = {**os.environ, "PYTHONPATH": ":".join(p for p in (pythonpath, STANDIN_JAX, str(REPO)) if p),
               "END": end, "STANDIN_DISTRIBUTED": "1" if distributed else "0", **env}
    environ.pop("HPCJAX_EXIT_GUARD", None)
    environ.update(env)
    return subprocess.Popen([sys.executable, PROGRAM], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environ)


def finished(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    done = completed(proc, 30)
    done.returncode = shell_status(done.returncode)
    return done


def run(end: str = "return", **how) -> subprocess.CompletedProcess:
    """The program, ended as `end` says; its returncode as a shell says it (128+N for signal N)."""
    return finished(start(end, **how))


@pytest.fixture(scope="module")
def ended():
    """Every way a program ends, distributed, and three of them not, started at once (independent
    processes: beside a test run in one process they use the other core)."""
    started = ({(how, True): start(how) for how in WAYS}
               | {(how, False): start(how, distributed=False) for how in NOT_DISTRIBUTED}
               | {(how, "bare"): subprocess.Popen([sys.executable, ENDS, how], stdout=subprocess.DEVNULL,
                                                  stderr=subprocess.DEVNULL) for how in WAYS})
    return {key: finished(proc) for key, proc in started.items()}


@pytest.mark.parametrize("how", WAYS)
def test_the_exit_status_is_bare_pythons_every_way_a_program_ends(how, ended):
    result = ended[how, True]
    assert result.returncode == ended[how, "bare"].returncode, result.stderr
    guarded = how not in ("os_exit5", "kill")  # they end before any exit handler
    assert (BARRIER in result.stdout) == guarded, result.stdout
    if guarded:  # the barrier, the drain, then JAX's own shutdown, once each
        out = result.stdout
        assert out.count(BARRIER) == out.count(DRAINED) == out.count(JAX_SHUTDOWN) == 1, out
        assert out.index(BARRIER) < out.index(DRAINED) < out.index(JAX_SHUTDOWN), out
    assert ("custom hook: ValueError" in result.stderr) == (how == "hooked")


@pytest.mark.parametrize("how", NOT_DISTRIBUTED)
def test_a_process_that_is_not_distributed_is_left_alone(how, ended):
    result = ended[how, False]
    assert result.returncode == ended[how, "bare"].returncode
    assert BARRIER not in result.stdout and DRAINED not in result.stdout


def test_a_child_forked_after_jax_was_imported_ends_as_its_own(tmp_path):
    """Its copy of the parent's client is not its own: its exit is not guarded, the parent's is."""
    result = run("exit3", FORK="1")
    assert result.returncode == 3, result.stderr
    parent = re.search(r"the program's last line in (\d+)", result.stdout)[1]
    assert re.findall(r"guard: barrier hpcjax/exit \(\d+ ms\) in (\d+)", result.stdout) == [parent], result.stdout


def test_the_guard_off_and_no_hook_leave_jaxs_exit_as_it_is():
    for result in (run("exit3", HPCJAX_EXIT_GUARD="0"), run("exit3", pythonpath="")):
        assert result.returncode == 3 and JAX_SHUTDOWN in result.stdout and BARRIER not in result.stdout


def test_a_process_that_never_reached_its_end_is_said_and_jaxs_shutdown_follows():
    result = run("exit3", STANDIN_BARRIER_FAILS="1")
    assert result.returncode == 3 and JAX_SHUTDOWN in result.stdout and DRAINED not in result.stdout
    assert ("hpcjax: process 1: not every process reached the end of its program (DEADLINE_EXCEEDED: barrier "
            "hpcjax/exit timed out after 300000 ms); JAX's own shutdown follows") in result.stderr


def test_work_in_flight_that_fails_is_said_and_the_status_stays_the_programs():
    result = run("return", STANDIN_DRAIN_FAILS="1")
    assert result.returncode == 0 and JAX_SHUTDOWN in result.stdout
    assert "the work in flight did not finish (INTERNAL: a collective failed)" in result.stderr


def test_a_program_whose_threads_work_on_is_not_exiting_yet():
    """The exit begins once the program's threads are joined: the barrier comes after their work."""
    result = run("return", THREAD_WORKS="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.index("the thread's work is done") < result.stdout.index(BARRIER)


def test_the_time_limit_warning_during_the_exit_does_not_end_a_finished_program():
    result = run("return", USR2_AT_EXIT="1")
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert "still here after the warning" in result.stdout and JAX_SHUTDOWN in result.stdout


def test_in_a_python_that_never_imports_jax_the_hook_changes_nothing():
    """What a rank's children, pip or a prologue's Python see: the same modules, exit, excepthook
    and exit handlers as without the hook; one entry on sys.meta_path, which finds nothing."""
    probe = ("import sys, atexit, json; print(json.dumps([sorted(sys.modules), sys.exit.__module__, "
             "sys.excepthook is sys.__excepthook__, atexit._ncallbacks(), [type(f).__name__ if not isinstance(f, type) "
             "else f.__name__ for f in sys.meta_path]]))")

    def seen(pythonpath: str) -> list:
        env = {**os.environ, "PYTHONPATH": pythonpath}
        import json

        return json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                                         check=True).stdout)

    hooked, plain = seen(HOOK), seen("")
    assert set(hooked[0]) - set(plain[0]) <= {"sitecustomize"}
    assert hooked[1:4] == plain[1:4]
    assert hooked[4] == ["_JaxFirst"] + plain[4]


def test_the_sites_own_sitecustomize_runs_and_is_what_import_gives(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import sys\nSITE = 'the site'\nprint('the site customized', "
                                               "file=sys.stderr)\n")
    env = {**os.environ, "PYTHONPATH": f"{HOOK}:{tmp_path}"}
    result = subprocess.run([sys.executable, "-c", "import sitecustomize; print(sitecustomize.SITE)"],
                            capture_output=True, text=True, env=env)
    assert result.stdout.strip() == "the site" and result.stderr.count("the site customized") == 1, result.stderr


def test_a_broken_site_sitecustomize_is_said_and_the_program_runs(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("raise OSError('the site is broken')\n")
    result = run("exit3", pythonpath=f"{HOOK}:{tmp_path}")
    assert result.returncode == 3 and JAX_SHUTDOWN in result.stdout and BARRIER in result.stdout
    assert "the site's own sitecustomize failed: OSError: the site is broken" in result.stderr


def spec(**fields) -> JobSpec:
    return JobSpec(command=("python3", "demo.py"), layout=Layout(nodes=2, gpus_per_node=4), **fields)


def test_the_rendered_script_puts_the_hook_first_on_the_ranks_path():
    text = render_sbatch(spec(env=(("PYTHONPATH", "/mine"),)))
    assert f"hpcjax_exit_hook={HOOK}\nif [ -f \"$hpcjax_exit_hook/sitecustomize.py\" ]; then" in text  # else: said
    user, hook = text.index("export PYTHONPATH=/mine"), text.index('export PYTHONPATH="$hpcjax_exit_hook${PYTHONPATH:+')
    assert user < hook < text.index("srun --kill-on-bad-exit")  # the user's path kept, after the hook
    assert HOOK not in render_sbatch(spec(env=(("HPCJAX_EXIT_GUARD", "0"),)))


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
    off = rank_environment(spec(output_dir=str(tmp_path), env=(("HPCJAX_EXIT_GUARD", "0"),)), "1234", 0, 5000)
    assert HOOK not in off.get("PYTHONPATH", "")


@pytest.mark.parametrize("value", ["off", "2", "yes", " 1"])
def test_a_bad_switch_is_refused_before_submitting(value):
    with pytest.raises(ConfigError, match=f"HPCJAX_EXIT_GUARD='{value}' is neither 1 nor 0"):
        timeouts.check_job_environment({"HPCJAX_EXIT_GUARD": value})


def test_the_retired_bound_is_refused_with_what_replaced_it():
    with pytest.raises(ConfigError, match="HPCJAX_EXIT_BOUND is no longer read") as refused:
        timeouts.check_job_environment({"HPCJAX_EXIT_BOUND": "10"})
    assert "HPCJAX_EXIT_GUARD=0 turns the guard off" in refused.value.hint


def test_a_hostile_package_path_is_only_ever_a_word(tmp_path):
    hostile = f"{tmp_path}/a b$(touch {tmp_path}/pwned)`touch {tmp_path}/pwned`"
    text = render_sbatch(spec(env=(("HPCJAX_BIND_SOURCE", hostile),)))
    start = text.index("hpcjax_exit_hook=")
    fragment = text[start:text.index("\nfi\n", start) + 4]
    ran = subprocess.run(["bash", "-c", fragment], capture_output=True, text=True)
    assert ran.returncode == 0 and not (tmp_path / "pwned").exists(), ran.stderr
    assert f"hook is not on {os.uname().nodename} at {hostile}/rank/watch/exithook:" in ran.stdout
