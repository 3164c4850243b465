"""Bad input, round two (issue 24): one table per class of what a new user found, each with the
message or the rendering it must give. The CLI runs in this process (`hpcjax.cli.main`), in an
empty working directory, so "nothing written" is checked by listing it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hpcjax.cli import build_parser
from support import cli  # noqa: F401 (the other bad-input files import it from here)
from hpcjax.containers.recipes import recipe
from hpcjax.slurm.script import render_sbatch
from hpcjax.job.spec import Container, JobSpec


def refused(work: Path, argv, words: str, *, leaves=()) -> str:
    code, out, err = cli(work, *argv)
    assert code in (1, 2), (code, err)
    assert err.startswith("error: ") and "\n\nhint: " in err and words in err, err
    assert out == "" and "Traceback" not in err
    assert sorted(p.name for p in work.iterdir()) == sorted(leaves), "something was written"
    return err


# --- 1. what raised a traceback ------------------------------------------------------------
def test_a_profile_file_that_is_not_utf8_names_the_file(empty):
    (empty / "p.toml").write_bytes(b"\xff\xfe[profiles.x]\n")
    refused(empty, ["render", "--profile", "x", "--profile-file", "p.toml", "--", "true"],
            "profile file 'p.toml' is not UTF-8 text", leaves=["p.toml"])


@pytest.mark.parametrize("verb", [["render", "--", "true"], ["container", "recipe"]], ids=["render", "recipe"])
@pytest.mark.parametrize("target, words", [("d", "-o 'd' is a directory"), ("", "-o names no file"),
                                           ("f/x.sh", "cannot write 'f/x.sh'"), ("d/", "is a directory")])
def test_o_that_cannot_be_a_file_is_refused_before_any_work(empty, verb, target, words):
    (empty / "d").mkdir()
    (empty / "f").write_text("a file, not a directory")
    at = verb.index("--") if "--" in verb else len(verb)
    refused(empty, verb[:at] + ["-o", target] + verb[at:], words, leaves=["d", "f"])


def test_an_unwritable_directory_is_refused(empty):
    if os.geteuid() == 0:  # root writes anywhere: the check is os.access, which says so
        locked = Path("/proc/hpcjax-nowhere")
        words = "cannot write '/proc/hpcjax-nowhere/job.sh'"
    else:
        locked = empty / "locked"
        locked.mkdir(mode=0o500)
        words = "is not writable by you"
    refused(empty, ["render", "-o", str(locked / "job.sh"), "--", "true"], words,
            leaves=[] if os.geteuid() == 0 else ["locked"])


@pytest.mark.parametrize("body, words", [
    ('{% extends "hpcjax/sbatch.sh.j2" %}{% block prologue %}{{ nothere }}{% endblock %}', "'nothere' is undefined"),
    ('{% extends "hpcjax/sbatch.sh.j2" %}{% block prologue %}{% if %}{% endblock %}', "site template"),
    (b"\xff{% extends 'hpcjax/sbatch.sh.j2' %}", "site template"),
])
def test_a_broken_site_template_is_named(empty, body, words):
    site = empty / "site.j2"
    site.write_bytes(body if isinstance(body, bytes) else body.encode())
    refused(empty, ["render", "--template", "site.j2", "-o", "job.sh", "--", "true"], words, leaves=["site.j2"])


def test_report_renders_what_it_can_and_names_every_line_it_skipped(empty):
    run = empty / "run"
    (run / "checkpoints" / "²").mkdir(parents=True)
    (run / "checkpoints" / "4").mkdir()
    step = '{{"step": {}, "loss": {}, "grad_norm": 1, "learning_rate": 1, "step_time_s": 0.1, "tokens_per_s": 9, "mfu": 0.1}}'
    lines = [step.format(1, 2.0), "[1, 2]", '{"loss": 3}', step.format(2, '"x"'), '{"step": 3, "pace": {"steps": 2}}',
             '"text"', step.format(3, 1.5), '{"step": 3, "val_loss": "bad"}', '{"step": 4, "lo']
    (run / "metrics.jsonl").write_text("\n".join(lines))
    (run / "config.json").write_text("[1]")
    code, out, err = cli(empty, "report", "run")
    assert code == 0, err
    for words in ("line 2 of metrics.jsonl is a JSON list", "line 3 of metrics.jsonl has no step number",
                  "line 4 of metrics.jsonl is a step without a number for loss", "line 5 of metrics.jsonl is a pace",
                  "line 6 of metrics.jsonl is a JSON str", "line 9 of metrics.jsonl is cut short",
                  "config.json is not a JSON object", "report of 2 step(s)"):
        assert words in err, err
    assert sorted(p.name for p in run.glob("report*")) == ["report-loss.png", "report-step_times.png",
                                                           "report-throughput.png", "report.html"]
    assert "<th>checkpoints</th><td>4</td>" in (run / "report.html").read_text()


def test_report_that_cannot_write_leaves_nothing(empty):
    run = empty / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0, "grad_norm": 1, "learning_rate": 1, '
                                       '"step_time_s": 0.1, "tokens_per_s": 9, "mfu": 0.1}\n')
    (empty / "f").write_text("a file")
    refused(empty, ["report", "run", "-o", "f/page.html"], "cannot write 'f/page.html'", leaves=["run", "f"])
    assert sorted(p.name for p in run.iterdir()) == ["metrics.jsonl"]


@pytest.mark.parametrize("record, words", [
    ("[1]", "it is not a JSON object"), ("{not json", "it is not a JSON object"),
    ('{"backend": "local"}', "it names no output_dir"), ('{"output_dir": 3}', "output_dir is int, not str"),
    ('{"backend": "local", "output_dir": "x", "layout": {"nodes": "a"}}', "is not three positive integers"),
    ('{"output_dir": "x", "cluster": {"destination": 5}}', "its cluster has no destination"),
])
@pytest.mark.parametrize("verb", ["status", "logs", "cancel"])
def test_a_damaged_job_record_is_refused_naming_its_file(empty, record, words, verb):
    jobs = Path(os.environ["HPCJAX_HOME"]) / "jobs"
    jobs.mkdir(parents=True)
    (jobs / "777.json").write_text(record)
    err = refused(empty, [verb, "777"], words)
    assert f"the record of job 777 ({jobs / '777.json'}) is damaged" in err and "rm " in err


# --- 2. values written the way users write them ----------------------------------------------
def launch_words(container: Container, **fields) -> str:
    text = render_sbatch(JobSpec(command=("python3", "t.py"), container=container, **fields))
    return text[text.index("srun --kill-on-bad-exit"):]


@pytest.mark.parametrize("runtime, image, expected", [
    ("apptainer", "/x/jax.sif", """--bind "${SCRATCH}"/data:/data:ro"""),
    ("singularity", "/x/jax.sif", """--bind "${SCRATCH}"/data:/data:ro"""),
    ("pyxis", "nvcr.io#nvidia/jax:24.04-py3", ""","${SCRATCH}"/data:/data:ro"""),
    ("charliecloud", "/x/img", """-b "${SCRATCH}"/data:/data"""),
])
def test_a_variable_in_a_bind_expands_on_the_node_in_every_runtime(runtime, image, expected):
    option = ":ro" if runtime != "charliecloud" else ""
    words = launch_words(Container(runtime=runtime, image=image, binds=(f"$SCRATCH/data:/data{option}",)))
    assert expected in words, words


@pytest.mark.parametrize("value, shown", [
    ("/opt/bin:$PATH", '/opt/bin:"${PATH}"'), ("${HOME}/x", '"${HOME}"/x'), ("$$HOME", "'$HOME'"),
    ("$(id)", "'$(id)'"), ("`id`", "'`id`'"), ("a b", "'a b'"), ("$1", "'$1'"), ("", "''"),
])
def test_env_values_follow_the_variable_rule(value, shown):
    text = render_sbatch(JobSpec(command=("x",), env=(("V", value),)))
    assert f"\nexport V={shown}\n" in text


def test_env_path_with_a_variable_reaches_the_program_and_srun_still_runs(tmp_path):
    """Run the rendered script under bash (srun stubbed): PATH keeps its own value after /opt/bin."""
    script = render_sbatch(JobSpec(command=("printenv", "PATH"), env=(("PATH", "/opt/bin:$PATH"),)))
    (tmp_path / "bin").mkdir()
    srun = tmp_path / "bin" / "srun"
    srun.write_text('#!/bin/bash\nwhile [[ $1 == --* ]]; do shift; done\nexec "$@"\n')
    srun.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "SLURMD_NODENAME": "n1", "SLURM_JOB_ID": "9"}
    run = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert f"/opt/bin:{tmp_path / 'bin'}:/usr/bin:/bin" in run.stdout


@pytest.mark.parametrize("runtime, image, bind, words", [
    ("charliecloud", "/x/img", "/d:/d:ro", "ch-run's -b has no read-only mode"),
    ("apptainer", "/x/jax.sif", "/d:/d:rox", "unknown option 'rox'"),
    ("apptainer", "/x/jax.sif", ":/x", "has an empty source"),
    ("apptainer", "/x/jax.sif", "data:", "has an empty target"),
    ("pyxis", "nvcr.io#nvidia/jax:24.04-py3", "/a:/b:ro:x", "at most 3"),
    ("apptainer", "/x/jax.sif", "/a:rel", "is not an absolute path"),
    ("charliecloud", "/x/jax.sif", "/a", "Charliecloud cannot run the Apptainer/Singularity image"),
])
def test_binds_and_images_a_runtime_cannot_take_are_refused(empty, runtime, image, bind, words):
    refused(empty, ["render", "--runtime", runtime, "--image", image, "--bind", bind, "--", "true"], words)


@pytest.mark.parametrize("given", ["0", "UNLIMITED", "unlimited", "INFINITE"])
def test_time_zero_and_unlimited_are_slurms_no_limit(given):
    spec = JobSpec(command=("x",), time=given)
    assert spec.time == "UNLIMITED" and spec.time_seconds is None
    assert "#SBATCH --time=UNLIMITED\n" in render_sbatch(spec)


@pytest.mark.parametrize("argv, words", [
    (["--nodes", "100000"], "--nodes 100000 is more than any SLURM cluster has"),
    (["--gpus-per-node", "4096"], "--gpus-per-node 4096 is more than any SLURM cluster has"),
    (["--gpus-per-node", "4", "--gpus-per-process", "3"], "--gpus-per-process 3 does not divide --gpus-per-node 4"),
    (["--time", "-1"], "malformed walltime"),
])
def test_counts_past_any_cluster_are_refused_naming_the_flag(empty, argv, words):
    refused(empty, ["render", *argv, "--", "true"], words)


def test_a_profile_value_is_named_by_file_profile_and_key(empty):
    (empty / "p.toml").write_text("[profiles.big]\ngpus_per_node = 4\ngpus_per_process = 3\n")
    err = refused(empty, ["render", "--profile", "big", "--profile-file", "p.toml", "--", "true"],
                  "(set by p.toml, profile 'big', key gpus_per_process)", leaves=["p.toml"])
    assert "key gpus_per_node" in err


# --- 3. injection and bypass ---------------------------------------------------------------
@pytest.mark.parametrize("option, value, words", [
    ("--package", "numpy\nRUN touch /pwned", "is not one pip requirement"),
    ("--package", "--index-url=http://example.org", "is not one pip requirement"),
    ("--apt", "curl\nRUN touch /pwned", "is not a Debian package name"),
    ("--apt", "-o=Dpkg::Options", "is not a Debian package name"),
])
def test_recipe_packages_cannot_add_instructions_or_options(empty, option, value, words):
    refused(empty, ["container", "recipe", "--format", "docker", f"{option}={value}"], words)


def test_recipe_packages_as_pip_and_apt_name_them_are_kept():
    text, _ = recipe(fmt="docker", packages=["optax>=0.2", "flax[all]"], apt=["curl=7.88.1-10", "gcc:amd64"])
    assert "'optax>=0.2' 'flax[all]'" in text and "curl=7.88.1-10 gcc:amd64" in text


@pytest.mark.parametrize("line, words", [
    ("--outp=x.log", "sets --output (sbatch reads --outp as --output)"),
    ("--job-n=x", "sets --job-name (sbatch reads --job-n as --job-name)"),
    ("--exclu", "sets --exclusive"), ("-D/tmp", "sets -D"),
    ("--licenses=a b", "holds a space"), ("--comment=", "is empty"),
])
def test_owned_sbatch_options_are_refused_however_abbreviated(empty, line, words):
    refused(empty, ["render", f"--sbatch={line}", "--", "true"], words)


@pytest.mark.parametrize("line", ["-Lscratch", "-L scratch", "--licenses=scratch", "--time-min=10", "--lic=x"])
def test_sbatch_lines_sbatch_takes_and_hpcjax_does_not_own_pass(empty, line):
    code, out, err = cli(empty, "render", f"--sbatch={line}", "--", "true")
    assert code == 0, err
    assert f"\n#SBATCH {line}\n" in out


# --- 4. a dry run is as strict as a submit ---------------------------------------------------
@pytest.mark.parametrize("argv, words", [
    (["--backend", "bogus"], "unknown backend 'bogus'"),
    (["--backend", "slurm", "--image", "/tmp", "--bind", "/no/such/dir:/d"], "bind source '/no/such/dir' does not"),
    (["--backend", "slurm", "--image", "/no/such.sif"], "image '/no/such.sif' does not exist"),
    (["--backend", "local", "--image", "/tmp"], "the local backend runs the command bare"),
    (["--backend", "local", "--requeue", "1"], "the local backend does not requeue"),
    (["--backend", "local", "--nodes", "300", "--gpus-per-node", "8"], "would start 2400 processes on this machine"),
])
def test_dry_run_refuses_what_the_submit_would(empty, argv, words):
    refused(empty, ["submit", "--dry-run", *argv, "--", "true"], words)


def test_dry_run_on_the_local_backend_shows_its_processes_not_a_script(empty):
    code, out, err = cli(empty, "submit", "--dry-run", "--backend", "local", "--gpus-per-node", "2",
                         "--partition", "gpu", "--env", "P=$HOME/x", "--", "python3", "t.py")
    assert code == 0, err
    assert "#SBATCH" not in out and "would start G2N1p2 = 2 GPU(s) on 1 node(s)" in err
    ranks = [line for line in out.splitlines() if line.startswith("env ")]
    assert len(ranks) == 2 and all(line.endswith(" python3 t.py") for line in ranks)
    assert "SLURM_PROCID=1" in ranks[1] and f"P={os.environ['HOME']}/x" in ranks[0]
    assert "# not used by the local backend (SLURM's): --partition" in out
    assert list(empty.iterdir()) == []


# --- 5. help and habits ----------------------------------------------------------------------
def every_parser():
    parser = build_parser()
    todo = [parser]
    while todo:
        current = todo.pop()
        yield current
        for action in current._actions:
            if action.choices and isinstance(action.choices, dict):
                todo.extend(action.choices.values())


def test_every_option_and_argument_has_help():
    missing = [f"{p.prog} {'/'.join(a.option_strings) or a.dest}" for p in every_parser() for a in p._actions
               if not a.help and a.dest not in ("help", "version") and not isinstance(a.choices, dict)]
    assert missing == []


@pytest.mark.parametrize("verb", ["render", "submit", "smoke"])
def test_usage_shows_where_the_command_goes(verb):
    assert build_parser()._subparsers._group_actions[0].choices[verb].format_usage().rstrip().endswith(
        "-- COMMAND [ARG ...]")


def test_train_help_lists_strategies_and_defaults():
    text = build_parser()._subparsers._group_actions[0].choices["train"].format_help()
    assert "{dp,fsdp,tp,fsdp_tp,hsdp,pp,dp_pp}" in text and "(default: fsdp)" in text and "(default: 200)" in text


def test_a_forgotten_double_dash_says_where_the_command_goes(empty):
    refused(empty, ["render", "python", "train.py"], "the job's command goes after `--`")


def test_sbatch_short_options_that_map_are_accepted(empty):
    code, out, err = cli(empty, "render", "-N", "2", "-t", "10", "-p", "gpu", "-A", "acct", "-q", "hi", "-C", "a100",
                         "-J", "mine", "-c", "4", "--", "true")
    assert code == 0, err
    for line in ("--nodes=2", "--time=00:10:00", "--partition=gpu", "--account=acct", "--qos=hi", "--constraint=a100",
                 "--job-name=mine", "--cpus-per-task=4"):
        assert f"#SBATCH {line}\n" in out


@pytest.mark.parametrize("argv, words", [
    (["--ntasks", "8"], "--nodes 2 --gpus-per-node 4"), (["-n", "8"], "--nodes 2 --gpus-per-node 4"),
    (["--gpus", "8"], "--nodes 2 --gpus-per-node 4"), (["-G", "8"], "--gpus-per-node"),
    (["--ntasks-per-node", "4"], "--gpus-per-process 4"), (["--gpus-per-task", "2"], "--gpus-per-process K"),
    (["--gres", "gpu:4"], "--gpus-per-node G"),
])
def test_sbatch_options_that_do_not_map_name_the_hpcjax_ones(empty, argv, words):
    err = refused(empty, ["submit", *argv, "--", "true"], words)
    assert "is sbatch's; hpcjax derives it from the layout" in err


@pytest.mark.parametrize("argv, words", [
    (["fetch", ""], "'' names no run directory"), (["fetch", "/"], "'/' names no run directory"),
    (["fetch", "/etc"], "/etc on this machine is not a run directory"),
    (["report", ""], "the run directory is an empty string"), (["report", "/etc"], "'/etc' is not a run directory"),
])
def test_fetch_and_report_never_take_a_directory_that_is_not_a_run(empty, argv, words):
    """`hpcjax fetch ''` once copied the whole machine (rsync of "/") into the working directory."""
    refused(empty, argv, words)
