import itertools
import json
import os
import shutil
import shlex
import subprocess
from pathlib import Path

import pytest

from hpcjax.protocol.contract import derived_port
from hpcjax.values import shellword
from hpcjax.values.errors import SpecError
from hpcjax.containers.binds import hpcjax_package_dir
from hpcjax.slurm.script import render_sbatch
from hpcjax.job.spec import Container, JobSpec, Layout

# Each would create MARKER if any shell ever evaluated it.
HOSTILE = [
    "$(touch MARKER)", "`touch MARKER`", "'; touch MARKER; '", '"; touch MARKER; "',
    "a b; touch MARKER", "${IFS}touch${IFS}MARKER", "\\$(touch MARKER)", "x'$(touch MARKER)'y",
    "$((1+1))$(touch MARKER) && touch MARKER || touch MARKER | touch MARKER > MARKER",
]
MULTILINE = "line1\n$(touch MARKER)\nline3"


def hostile_spec(marker: Path, image: Path, runtime: str = "apptainer") -> JobSpec:
    strings = [h.replace("MARKER", str(marker)) for h in HOSTILE]
    return JobSpec(
        command=("python3", *strings, MULTILINE.replace("MARKER", str(marker))),
        layout=Layout(nodes=2, gpus_per_node=4),
        container=Container(runtime=runtime, image=str(image), binds=tuple(strings[:3]),
                            flags=(strings[3],)) if runtime != "none" else Container(),
        job_name=strings[0], constraint=strings[1], modules=(strings[2],),
        env={f"V{i}": s for i, s in enumerate(strings + [MULTILINE.replace("MARKER", str(marker))])},
        output_dir=str(marker.parent / "logs dir $(touch x)"),
    )


def test_two_nodes_one_process_per_gpu_through_apptainer(tmp_path):
    image = tmp_path / "jax.sif"
    image.touch()
    text = render_sbatch(JobSpec(command=("python", "train.py"), layout=Layout(nodes=2, gpus_per_node=4),
                                 container=Container(runtime="apptainer", image=str(image))))
    assert "#SBATCH --nodes=2\n" in text
    assert "#SBATCH --ntasks-per-node=4\n" in text
    assert "#SBATCH --gpus-per-node=4\n" in text
    assert "export HPCJAX_GPUS_PER_PROCESS=1\n" in text
    assert "--ntasks=8 --ntasks-per-node=4" in text and "--gpus-per-task=1" in text
    package = hpcjax_package_dir()
    assert (f'apptainer exec --nv --bind "$HPCJAX_LOG_DIR" --bind {package}:/opt/hpcjax/lib/hpcjax {image} \\\n'
            "  python train.py || hpcjax_rc=$?\n") in text


def test_one_process_per_node_owns_all_its_gpus():
    text = render_sbatch(JobSpec(command=("python", "train.py"),
                                 layout=Layout(nodes=2, gpus_per_node=4, gpus_per_process=4)))
    assert "#SBATCH --ntasks-per-node=1\n" in text
    assert "#SBATCH --gpus-per-node=4\n" in text
    assert "export HPCJAX_GPUS_PER_PROCESS=4\n" in text
    assert "--ntasks=2 --ntasks-per-node=1" in text and "--gpus-per-task=4" in text
    assert "exec --nv" not in text  # bare launch


def test_a_gpu_type_is_asked_of_sbatch_and_of_every_step():
    """--gpu-type: the job's GPUs and each srun step's are typed alike (an untyped step in a typed job is
    refused by SLURM: seen on the dev cluster's a100 partition, tests/launch/test_site_cluster.py)."""
    typed = render_sbatch(JobSpec(command=("python", "train.py"), gpu_type="a100", preflight=True,
                                  layout=Layout(nodes=2, gpus_per_node=4, gpus_per_process=2)))
    assert "#SBATCH --gpus-per-node=a100:4\n" in typed
    assert typed.count("--gpus-per-task=a100:2") == 2 and "--gpus-per-task=2" not in typed  # preflight, program
    untyped = render_sbatch(JobSpec(command=("x",), preflight=True))
    assert "#SBATCH --gpus-per-node=1\n" in untyped and "a100" not in untyped


def test_optional_directives_appear_only_when_set():
    bare = render_sbatch(JobSpec(command=("x",)))
    for directive in ("--partition", "--account", "--qos", "--constraint", "--mem", "--exclusive",
                      "--cpus-per-task", "module load"):
        assert directive not in bare
    full = render_sbatch(JobSpec(command=("x",), partition="gpu", account="proj1", qos="high",
                                 constraint="a100&ib", mem="64G", exclusive=True, cpus_per_task=8,
                                 modules=("dl",)))
    for line in ("#SBATCH --partition=gpu", "#SBATCH --account=proj1", "#SBATCH --qos=high",
                 "#SBATCH --constraint='a100&ib'", "#SBATCH --mem=64G", "#SBATCH --exclusive",
                 "#SBATCH --cpus-per-task=8", "module load dl", "--cpus-per-task=8 \\"):
        assert line in full


def test_image_from_a_module_variable_expands_inside_the_job():
    text = render_sbatch(JobSpec(command=("x",), container=Container(runtime="singularity",
                                                                     image="${JAX_IMAGE}")))
    assert 'singularity exec --nv --bind "$HPCJAX_LOG_DIR" --bind ' in text and ' "${JAX_IMAGE:?' in text


def _specs_for_shellcheck(tmp_path: Path):
    image = tmp_path / "jax.sif"
    image.touch()
    marker = tmp_path / "pwned"
    layouts = [Layout(nodes=n, gpus_per_node=g, gpus_per_process=k)
               for n, g, k in [(1, 4, 1), (2, 2, 2), (2, 2, 1), (2, 4, 1), (4, 8, 4)]]
    containers = [Container(), Container(runtime="apptainer", image=str(image), binds=("/data:/data",)),
                  Container(runtime="singularity", image="$JAX_IMAGE", flags=("--cleanenv",))]
    for layout, container in itertools.product(layouts, containers):
        yield JobSpec(command=("python", "train.py", "--steps", "10"), layout=layout, container=container,
                      modules=("dl",), env={"XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true"},
                      partition="gpu", mem="0", exclusive=layout.nodes > 1)
    for runtime in ("apptainer", "singularity", "none"):
        yield hostile_spec(marker, image, runtime)
    yield JobSpec(command=("python", "train.py"), requeue=2)
    yield JobSpec(command=("python", "train.py"), requeue=1, retry_failed=True)
    yield JobSpec(command=("python", "train.py"), array=4, array_parallel=2, requeue=1)


@pytest.mark.tools  # shellcheck of 21 scripts: 4.7 s
def test_every_rendered_script_is_shellcheck_and_bash_n_clean(tmp_path):
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck is not installed; the test command installs it (apt-get install shellcheck)")
    scripts = []
    for count, spec in enumerate(_specs_for_shellcheck(tmp_path)):
        scripts.append(tmp_path / f"script{count}.sh")
        scripts[-1].write_text(render_sbatch(spec))
    assert len(scripts) == 21
    # One shellcheck for every script (a third less time than one each); its findings name the file.
    result = subprocess.run(["shellcheck", "-s", "bash", *map(str, scripts)], capture_output=True, text=True)
    assert result.returncode == 0 and not result.stdout, result.stdout
    for script in scripts:
        syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert syntax.returncode == 0, (script, syntax.stderr)


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


def test_hostile_strings_are_never_executed_and_arrive_verbatim(tmp_path):
    """Run the script under bash with srun and module recorded by stubs: nothing the
    user wrote may run, and every string must reach srun's argv / the env unchanged."""
    image, marker = tmp_path / "jax.sif", tmp_path / "pwned"
    image.touch()
    spec = hostile_spec(marker, image)
    script = tmp_path / "job.sh"
    script.write_text(render_sbatch(spec))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # srun's stand-in records its argv, then runs the task line as step 3 of job 1234 would;
    # the container runtime's stand-in records what the task finally receives.
    _stub(bin_dir, "srun", 'printf "%s\\0" "$@" > "$ARGV_FILE"\nwhile [[ $1 == --* ]]; do shift; done\n'
                           'SLURM_JOB_ID=1234 SLURM_STEP_ID=3 exec "$@"\n')
    _stub(bin_dir, "apptainer", 'printf "%s\\0" "$@" > "$TASK_ARGV_FILE"; env -0 > "$ENV_FILE"\n')
    _stub(bin_dir, "module", 'printf "%s\\0" "$@" >> "$MODULE_FILE"\n')
    files = {k: tmp_path / k for k in ("ARGV_FILE", "TASK_ARGV_FILE", "ENV_FILE", "MODULE_FILE")}
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURMD_NODENAME": "node7",
           **{k: str(v) for k, v in files.items()}}
    env.pop("JAX_COORDINATOR_ADDRESS", None)
    env.pop("JAX_COORDINATOR_PORT", None)
    run = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert not marker.exists(), "a user string was executed by the generated script"
    argv = files["ARGV_FILE"].read_text().split("\0")[:-1]
    assert argv[-len(spec.command):] == list(spec.command)
    for bind in spec.container.binds:
        assert argv[argv.index(bind) - 1] == "--bind"
    assert spec.container.flags[0] in argv and str(image) in argv
    exported = dict(item.split("=", 1) for item in files["ENV_FILE"].read_text().split("\0") if "=" in item)
    for key, value in spec.env:  # verbatim but for $NAME/${NAME}, the job's variables (here ${IFS})
        assert exported[key] == shellword.expand(value, {"IFS": " \t\n"})
    assert exported["V5"] == f" \t\ntouch \t\n{marker}"
    assert exported["HPCJAX_GPUS_PER_PROCESS"] == "1"
    # Through the per-task wrapper: the command verbatim, and what a plain JAX reads.
    task_argv = files["TASK_ARGV_FILE"].read_text().split("\0")[:-1]
    assert task_argv[-len(spec.command):] == list(spec.command)
    assert exported["JAX_COORDINATOR_ADDRESS"] == f"node7:{derived_port(1234, 3)}"
    assert exported["JAX_LOCAL_DEVICE_IDS"] == "0"
    # copies that Apptainer passes into the container even under --cleanenv
    assert exported["APPTAINERENV_JAX_COORDINATOR_ADDRESS"] == exported["JAX_COORDINATOR_ADDRESS"]
    assert exported["APPTAINERENV_JAX_LOCAL_DEVICE_IDS"] == "0"
    assert files["MODULE_FILE"].read_text().split("\0")[:-1] == ["load", spec.modules[0]]
    assert Path(spec.output_dir).is_dir()  # created by name, not evaluated


def test_requeue_directives_and_budget_appear_only_when_asked():
    plain = render_sbatch(JobSpec(command=("x",)))
    assert "--requeue" not in plain and "scontrol requeue" not in plain and "--open-mode" not in plain
    assert "-attempts.jsonl" in plain  # every job records how its attempt ended
    text = render_sbatch(JobSpec(command=("x",), requeue=2))
    assert "#SBATCH --requeue\n" in text and "#SBATCH --open-mode=append\n" in text
    assert '[ "$hpcjax_ended" = stopped ]; } && [ "$hpcjax_attempt" -le 2 ]' in text
    assert "ExcNodeList" not in text
    retried = render_sbatch(JobSpec(command=("x",), requeue=1, retry_failed=True))
    assert '|| { [ "$hpcjax_ended" = failed ] && [ -z "$hpcjax_not_retried" ]; }; } && [ "$hpcjax_attempt" -le 1 ]' \
        in retried
    assert "ExcNodeList" in retried


def run_attempt(tmp_path, restarts: int, failure: str, log_line: str = "") -> str:
    """One attempt of a --retry-failed --requeue 2 job, run by bash: srun's stand-in writes what
    srun says of a failing task and exits 1; scontrol's records the requeue. -> scontrol's calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in (("srun", f'echo {shlex.quote(failure)} >&2\nexit 1\n'),
                       ("scontrol", 'echo "$*" >> "$SCONTROL_FILE"\n')):
        _stub(bin_dir, name, body)
    logs = tmp_path / "hpcjax-logs"
    logs.mkdir(exist_ok=True)
    if log_line:
        with open(logs / "9-rank1.log", "a") as log:
            log.write(f"Traceback (most recent call last):\n  File \"t.py\", line 1\n{log_line}\n")
    script = render_sbatch(JobSpec(command=("python3", "t.py"), requeue=2, retry_failed=True))
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURMD_NODENAME": "node1", "SLURM_JOB_ID": "9",
           "SLURM_JOB_NODELIST": "node1", "SLURM_RESTART_COUNT": str(restarts), "SCONTROL_FILE": str(tmp_path / "sc")}
    with open(logs / "9-batch.log", "a") as batch:
        subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, stdout=batch, stderr=subprocess.STDOUT)
    return (tmp_path / "sc").read_text() if (tmp_path / "sc").exists() else ""


@pytest.mark.parametrize("said, srun_exit, status", [
    # rank 0 exited 5; rank 1 then aborted (JAX ends a process whose coordinator went away), and
    # srun exits with the highest of the two: found by the dev cluster under load (CI, 2026-11-27)
    (["task 0: Exited with exit code 5", "task 1: Aborted"], 134, 5),
    (["task 1: Aborted (core dumped)", "task 0: Exited with exit code 5"], 134, 134),  # the abort came first
    (["tasks 0-3: Killed"], 9, 137),
    (["task 2: Exited with exit code 3"], 3, 3),
])
def test_the_first_task_that_failed_gives_the_job_its_status_not_sruns_highest(tmp_path, said, srun_exit, status):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    lines = "".join(f"echo {shlex.quote(f'srun: error: node{n}: ' + line)} >&2\n" for n, line in enumerate(said, 1))
    _stub(bin_dir, "srun", f"{lines}exit {srun_exit}\n")
    (tmp_path / "hpcjax-logs").mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURMD_NODENAME": "node1", "SLURM_JOB_ID": "9",
           "SLURM_JOB_NODELIST": "node1"}
    with open(tmp_path / "hpcjax-logs" / "9-batch.log", "a") as batch:
        done = subprocess.run(["bash", "-c", render_sbatch(JobSpec(command=("python3", "t.py")))], cwd=tmp_path,
                              env=env, stdout=batch, stderr=subprocess.STDOUT)
    [attempt] = [json.loads(x) for x in (tmp_path / "hpcjax-logs" / "9-attempts.jsonl").read_text().splitlines()]
    assert (done.returncode, attempt["exit_code"], attempt["ended"]) == (status, status, "failed")
    assert attempt["failed_node"] == "node1"  # the first line's node, not a later one's


@pytest.mark.parametrize("verdict, failed_node", [
    ("node2\n", "node2"),  # the held rank's node, though a rank on node1 saw the hang (stop 60's CI)
    ("node2,node3\n", "node2,node3"),  # held ranks on two nodes
    ("\n", ""),  # no rank stood out: no node is blamed
    (None, ""),  # the rank that saw the hang ended before it judged
])
def test_an_attempt_the_hang_watch_ended_is_124_on_the_held_ranks_node(tmp_path, verdict, failed_node):
    """srun names a waiting rank's abort first (CI 39); the ranks left the hang marker and, from the
    rank that saw the hang (node1), its verdict. Real bash runs the rendered script; srun is a
    stand-in that writes what the ranks would. The same on the dev cluster: test_hang_cluster.py."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    logs = tmp_path / "hpcjax-logs"
    write_verdict = "" if verdict is None else f'printf %s {shlex.quote(verdict)} > "$HPCJAX_LOG_DIR/9-hang-nodes"\n'
    _stub(bin_dir, "srun", f"""echo '{{"rank": 0, "host": "node1", "attempt": 1, "ranks": 4}}' > "$HPCJAX_LOG_DIR/9-hang"
{write_verdict}echo 'srun: error: node2: task 2: Aborted (core dumped)' >&2
echo 'srun: error: node1: task 0: Exited with exit code 124' >&2
exit 134
""")
    logs.mkdir()
    (logs / "9-hang-nodes").write_text("node7\n")  # an earlier attempt's: removed at the start
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURMD_NODENAME": "node1", "SLURM_JOB_ID": "9",
           "SLURM_JOB_NODELIST": "node[1-3]"}
    with open(logs / "9-batch.log", "a") as batch:
        done = subprocess.run(["bash", "-c", render_sbatch(JobSpec(command=("python3", "t.py")))], cwd=tmp_path,
                              env=env, stdout=batch, stderr=subprocess.STDOUT)
    [attempt] = [json.loads(x) for x in (logs / "9-attempts.jsonl").read_text().splitlines()]
    assert (done.returncode, attempt["exit_code"], attempt["ended"]) == (124, 124, "failed")
    assert attempt["failed_node"] == failed_node


@pytest.mark.parametrize("failure, log_line, why", [
    ("srun: error: node1: task 1: Exited with exit code 78", "", "a rank exited 78: the program asked not to be"),
    ("srun: error: node1: tasks 0-3: Exited with exit code 2", "", "a rank exited 2: bad usage or configuration"),
])
def test_retry_failed_does_not_retry_what_a_retry_cannot_fix(tmp_path, failure, log_line, why):
    assert "requeue" not in run_attempt(tmp_path, 0, failure, log_line)
    [attempt] = [json.loads(x) for x in (tmp_path / "hpcjax-logs" / "9-attempts.jsonl").read_text().splitlines()]
    assert attempt["ended"] == "failed" and attempt["not_retried"].startswith(why)
    assert f"hpcjax: not retrying job 9 after attempt 1: {why}" in (tmp_path / "hpcjax-logs" / "9-batch.log").read_text()


def test_retry_failed_retries_an_exception_once_and_not_the_same_one_again(tmp_path):
    failure = "srun: error: node1: task 1: Exited with exit code 1"
    assert "requeue 9" in run_attempt(tmp_path, 0, failure, 'ValueError: bad "shape" \\ 3')
    assert run_attempt(tmp_path, 1, failure, 'ValueError: bad "shape" \\ 3').count("requeue 9") == 1
    attempts = [json.loads(x) for x in (tmp_path / "hpcjax-logs" / "9-attempts.jsonl").read_text().splitlines()]
    assert [a["error"] for a in attempts] == ["ValueError: bad shape  3"] * 2
    assert attempts[0]["not_retried"] == "" and attempts[1]["not_retried"] == \
        "the same Python exception as an earlier attempt: ValueError: bad shape  3"
    # a failure without an exception line (a lost node, a signal) is retried as before
    other = tmp_path / "other"
    other.mkdir()
    assert "requeue 9" in run_attempt(other, 0, "srun: error: node1: task 0: Exited with exit code 3")


def test_a_job_array_names_its_files_by_array_job_and_index():
    """An element's own %j is a number no caller knows; squeue, sacct and scancel name it
    <array job>_<index>, so its logs and attempts do too."""
    text = render_sbatch(JobSpec(command=("x",), array=4, array_parallel=2))
    assert "#SBATCH --array=0-3%2\n" in text
    assert "#SBATCH --output=hpcjax-logs/%A_%a-batch.log\n" in text and "--output=hpcjax-logs/%A_%a-rank%t.log" in text
    assert '"$HPCJAX_LOG_DIR/${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}-attempts.jsonl"' in text
    plain = render_sbatch(JobSpec(command=("x",)))
    assert "--array" not in plain and "%A" not in plain and "SLURM_ARRAY" not in plain
    with pytest.raises(SpecError, match="array_parallel was given for a job that is not an array"):
        JobSpec(command=("x",), array_parallel=2)
    with pytest.raises(SpecError, match="array must be an integer >= 0"):
        JobSpec(command=("x",), array=-1)


def test_the_stop_marker_reaches_a_cleanenv_container():
    text = render_sbatch(JobSpec(command=("x",), container=Container(runtime="singularity", image="$JAX_IMAGE",
                                                                      flags=("--cleanenv",))))
    assert 'export SINGULARITYENV_HPCJAX_STOP_MARKER="$HPCJAX_STOP_MARKER"\n' in text
    assert 'export APPTAINERENV_HPCJAX_STOP_MARKER="$HPCJAX_STOP_MARKER"\n' in text
    assert "ENV_HPCJAX_STOP_MARKER" not in render_sbatch(JobSpec(command=("x",)))


def test_the_coordinator_port_moves_with_each_attempt_in_bash_and_python_alike():
    """A requeued attempt never meets the previous attempt's coordinator (issue 27, part 4):
    the rendered wrapper and the rank side derive the same port from job, step and attempt."""
    from hpcjax.protocol import contract
    from hpcjax.rank.start.launchers import read_srun_step

    ports = []
    for restarts in (None, "1", "2", "3", "16"):
        env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "1234", "SLURM_STEP_ID": "3", "SLURM_NTASKS": "2",
               "SLURM_PROCID": "0", "SLURM_STEP_NODELIST": "node7", **({"SLURM_RESTART_COUNT": restarts} if restarts
                                                                      else {})}
        shown = subprocess.run(["bash", "-c", contract.coordinator_wrapper((), (), ()) + '; echo "$JAX_COORDINATOR_ADDRESS"',
                                "node7"], env=env, capture_output=True, text=True, check=True).stdout.strip()
        python = read_srun_step(env)["coordinator_port"].value
        assert shown == f"node7:{python}" == f"node7:{derived_port(1234, 3, int(restarts or 0))}"
        ports.append(python)
    assert ports[0] == derived_port(1234, 3)  # a first attempt keeps the port it always had
    assert len(set(ports[:4])) == 4 and all(a != b for a, b in zip(ports, ports[1:]))


@pytest.mark.parametrize("job_flags, ceiling, expected", [
    ("", "", "--xla_gpu_nccl_termination_timeout_seconds=3660"),
    ("--xla_dump_to=/tmp/d", "600", "--xla_gpu_nccl_termination_timeout_seconds=660 --xla_dump_to=/tmp/d"),
    ("--xla_gpu_nccl_termination_timeout_seconds=99", "", "--xla_gpu_nccl_termination_timeout_seconds=99"),
])
def test_on_gpu_nodes_xla_ends_a_collective_nobody_joins_after_the_hang_watch(tmp_path, job_flags, ceiling,
                                                                                expected):
    """XLA's NCCL termination timeout follows HPCJAX_HANG_CEILING (plus the watch's grace), only where
    a GPU driver is (/dev/nvidiactl; a file stands in for it here), and a value the job's XLA_FLAGS
    already has wins. Run under bash: the line as rendered."""
    env = (("HPCJAX_HANG_CEILING", ceiling),) if ceiling else ()
    text = render_sbatch(JobSpec(command=("python", "t.py"), layout=Layout(nodes=2, gpus_per_node=4), env=env))
    [line] = [line for line in text.splitlines() if "xla_gpu_nccl_termination_timeout_seconds=" in line
              and line.startswith("if ")]
    driver = tmp_path / "nvidiactl"
    for present in (True, False):
        if present:
            driver.touch()
        elif driver.exists():
            driver.unlink()
        done = subprocess.run(["bash", "-c", line.replace("/dev/nvidiactl", str(driver)) + '; echo "[$XLA_FLAGS]"'],
                              capture_output=True, text=True, env={"PATH": os.environ["PATH"], "XLA_FLAGS": job_flags})
        assert done.stdout == f"[{expected if present else job_flags}]\n", done.stderr


def test_the_hang_watch_off_renders_no_xla_timeout():
    text = render_sbatch(JobSpec(command=("python", "t.py"), env=(("HPCJAX_HANG_CEILING", "0"),)))
    assert "xla_gpu_nccl_termination_timeout_seconds" not in text
    assert ('rm -f "$HPCJAX_LOG_DIR/${SLURM_JOB_ID}-hang" "$HPCJAX_LOG_DIR/${SLURM_JOB_ID}-hang-nodes" \\\n'
            '  "$HPCJAX_LOG_DIR/${SLURM_JOB_ID}-rank"*.hang.json') in text
