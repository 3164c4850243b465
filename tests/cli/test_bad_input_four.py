"""Bad input, round four (issue 44): the classes a new user's trial found on the newest surface,
without SLURM (the dev cluster's part is in tests/launch/test_round_four_cluster.py). Each refusal
is `error:` + hint, exit 1 or 2, no traceback, nothing written; each class has its cases here, not
only the trial's example (which is kept back to check the fix)."""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hpcjax
from conftest import REPO
from hpcjax.values.errors import UsageError
from hpcjax.job.spec import JobSpec
from hpcjax.slurm.script import render_sbatch
from test_bad_input import cli, refused

BAD = b"\xff".decode("utf-8", "surrogateescape")  # a byte that is not UTF-8, as Python keeps it from argv


# --- bytes that are not UTF-8, wherever a user can type them ----------------------------------------
@pytest.mark.parametrize("argv, words", [
    (["render", "-J", f"a{BAD}b", "--", "true"], "--job-name 'a\\xffb' is not UTF-8 text (byte ff at 1)"),
    (["render", "--", "echo", f"x{BAD}"], "the command's argument 'x\\xff' is not UTF-8 text"),
    (["render", "--env", f"A=1{BAD}", "--", "true"], "the value of --env A '1\\xff' is not UTF-8 text"),
    (["render", "--output-dir", f"logs{BAD}", "--", "true"], "--output-dir 'logs\\xff' is not UTF-8 text"),
    (["render", "-p", f"gpu{BAD}", "--", "true"], "--partition 'gpu\\xff' is not UTF-8 text"),
    (["submit", "--backend", "local", "-J", f"{BAD}", "--", "true"], "--job-name '\\xff' is not UTF-8 text"),
])
def test_bytes_that_are_not_utf8_are_refused_by_name(empty, argv, words):
    refused(empty, argv, words)


def test_a_working_directory_whose_name_is_not_utf8_is_refused_before_anything_is_submitted(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCJAX_HOME", str(tmp_path / "home"))
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/work\xff"))
    odd.mkdir()
    code, out, err = cli(odd, "submit", "--backend", "local", "--", "true")
    assert code == 2 and out == "" and "the working directory" in err and "is not UTF-8 text" in err, err
    assert list(odd.iterdir()) == [] and not (tmp_path / "home" / "jobs").exists()


# --- output that cannot be written ------------------------------------------------------------------
@pytest.mark.parametrize("redirect, words", [(">/dev/full", "No space left on device"),
                                             (">&-", "standard output is closed")])
@pytest.mark.parametrize("verb", [["runs", "--json"], ["render", "--", "true"],
                                  ["profile", "list", "--profile-file", str(REPO / "profiles" / "examples.toml")]])
def test_output_that_cannot_be_written_is_one_line_and_exit_1(tmp_path, verb, redirect, words):
    env = {**os.environ, "HPCJAX_HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    (tmp_path / "jobs").mkdir()
    done = subprocess.run(f"{sys.executable} -m hpcjax {' '.join(verb)} {redirect}", shell=True, cwd=tmp_path,
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"error: cannot write the output: {words}" in done.stderr and "\n\nhint: " in done.stderr


# --- values that meant nothing, or something sbatch would refuse later --------------------------------
@pytest.mark.parametrize("argv, words", [
    (["status", "9" * 5000], "invalid job id '9999999999999999999999999999999999999999'... (5000 characters)"),
    (["logs", "9" * 30], "invalid job id"), (["cancel", "1" * 5000], "(5000 characters)"),
    (["stacks", "9" * 5000], "invalid job id"),
    (["render", "--preflight", "--spares", "9" * 20, "--", "true"], "ask for more nodes than any SLURM cluster has"),
    (["render", "--env", "HPCJAX_PREFLIGHT_GFLOPS=1e309", "--", "true"], "is not a finite number of at least 0"),
    (["render", "--env", "HPCJAX_PREFLIGHT_BUSBW=inf", "--", "true"], "is not a finite number"),
    (["render", "--env", "HPCJAX_PREFLIGHT_FREE_GB=nan", "--", "true"], "is not a finite number"),
    (["render", "--env", "HPCJAX_HANG_FLOR=10", "--", "true"], "did you mean HPCJAX_HANG_FLOOR?"),
    (["render", "--env", "HPCJAX_EXITGUARD=0", "--", "true"], "did you mean HPCJAX_EXIT_GUARD?"),
    (["render", "--env", "HPCJAX_WHATEVER=1", "--", "true"], "hpcjax reads no variable of that name"),
    (["render", "--env", "HPCJAX_EXIT_BOUND=10", "--", "true"], "HPCJAX_EXIT_BOUND is no longer read"),
    (["render", "-J", "x" * 300, "--", "true"], "--job-name is 300 bytes long"),
    (["render", "-J", "é" * 128, "--", "true"], "is 256 bytes long"),
    (["jupyter", "--on", "dev", "--port", "0"], "'0' is not a TCP port (1..65535)"),
    (["jupyter", "--on", "dev", "--port", "99999"], "'99999' is not a TCP port"),
    (["jupyter", "--on", "dev", "--local-port", "70000"], "'70000' is not a TCP port"),
    (["site", "--image", "jax.sif"], "--image is an option of the acceptance check"),
    (["site", "--check", "--name", "x", "--gpus-per-node", "4"], "--name is for writing a profile; --check writes none"),
    (["site", "--check"], "--check needs the GPUs of each node: --gpus-per-node G"),
    (["submit", "--gpu-type", "a100:4", "--", "true"], "--gpu-type 'a100:4' is not a GPU type name"),
    (["render", "--sbatch=--dependency=afterok:12", "--", "true"], "use --after JOBID[:ok|:any]"),
    (["render", "--sbatch=-d", "--", "true"], "use --after"),
    (["fetch", "12", "--to", "/proc/hpcjax-x"], "is in /proc, the kernel's tree"),
    (["fetch", "12", "--to", f"back{BAD}"], "--to 'back\\xff' is not UTF-8 text"),
    (["hold", "--name", "325"], "invalid hold name '325'"), (["hold", "--name", "325.s1"], "invalid hold name"),
    (["release", "325"], "invalid hold name '325'"), (["release", "a b; rm -rf ~"], "invalid hold name"),
    (["submit", "--on", "12", "--", "true"], "invalid hold name '12'"),
])
def test_values_that_meant_nothing_are_refused_before_anything(empty, argv, words):
    refused(empty, argv, words)


def test_a_job_name_of_255_bytes_is_slurms_most_and_taken():
    assert JobSpec(command=("x",), job_name="x" * 255).job_name == "x" * 255


def test_hpcjax_home_in_the_kernels_tree_is_refused_before_submitting(empty, monkeypatch):
    monkeypatch.setenv("HPCJAX_HOME", "/proc/hpcjax-home")
    refused(empty, ["submit", "--backend", "local", "--", "true"], "/proc is the kernel's, not a file system")


def test_runs_sort_by_a_metric_no_run_reported_names_the_ones_there(empty):
    from contextlib import closing

    from hpcjax.catalog import db

    with closing(db.connect()) as conn, conn:
        db.save(conn, "1795000000000", job_id="1795000000000", backend="local", state="COMPLETED", final=True,
                submitted=1.0, metrics={"loss": 1.5, "val_loss": 1.7})
    refused(empty, ["runs", "--sort", "val_los"], "did you mean --sort val_loss?")
    code, out, err = cli(empty, "runs", "--sort", "val_loss")
    assert code == 0 and "1795000000000" in out, err


# --- the time limit's warning ---------------------------------------------------------------------
@pytest.mark.parametrize("time, lead", [("1", 0), ("2", 0), ("00:02:30", 15), ("3", 30), ("4", 60), ("5", 90),
                                        ("6", 120), ("02:00:00", 120), ("UNLIMITED", 120)])
def test_a_short_job_gets_a_warning_it_can_live_through(time, lead):
    """SLURM may send the warning a minute early, and USR2 ends a program that does not catch it."""
    text = render_sbatch(JobSpec(command=("x",), time=time))
    assert (f"#SBATCH --signal=USR2@{lead}" in text) == bool(lead)
    assert ("No warning before the time limit" in text) == (not lead)


def test_a_job_in_a_hold_takes_its_time_warning_and_excluded_nodes_onto_its_steps():
    text = render_sbatch(JobSpec(command=("x",), on="dev", time="5", exclude=("node2",), preflight=True))
    for line in (line for line in text.splitlines() if line.startswith("  --output=")):  # both srun lines
        assert '--job-name="${HPCJAX_JOB_KEY}" --time=00:05:00 --signal=USR2@90 --exclude=node2' in line, line
    alone = render_sbatch(JobSpec(command=("x",), time="5", exclude=("node2",)))
    assert "--job-name=\"${HPCJAX_JOB_KEY}\"" not in alone and "#SBATCH --exclude=node2" in alone


def test_a_retry_that_could_never_start_is_not_made():
    """--requeue --retry-failed leaves out the nodes that failed; it counts what is left first, and
    the job's own --exclude stays in the list that replaces SLURM's."""
    text = render_sbatch(JobSpec(command=("x",), requeue=2, retry_failed=True, preflight=True, exclude=("node9",)))
    assert "a retry could never start" in text and "sinfo -h -N -o %N" in text
    assert text.index("a retry could never start") < text.index('"not_retried": "%s"')  # recorded in the attempt
    assert "printf '%s\\n' \"$hpcjax_exclude\" node9" in text


# --- a site's template runs in Jinja's sandbox ------------------------------------------------------
def test_a_site_template_cannot_reach_past_its_values(empty):
    (empty / "evil.j2").write_text('{% extends "hpcjax/sbatch.sh.j2" %}{% block prologue %}'
                                   "{{ cycler.__init__.__globals__.os.popen('touch pwned').read() }}{% endblock %}")
    refused(empty, ["render", "--template", "evil.j2", "--", "true"], "is unsafe", leaves=["evil.j2"])
    (empty / "fine.j2").write_text('{% extends "hpcjax/sbatch.sh.j2" %}{% block prologue %}# site {{ spec.job_name '
                                   '| q }} on {{ layout.name }}\n{% endblock %}')
    code, out, err = cli(empty, "render", "--template", "fine.j2", "--", "true")
    assert code == 0 and "# site hpcjax on G1N1p1" in out, err


# --- uploads: what cannot be copied as it is ----------------------------------------------------------
@pytest.fixture
def odd_tree(tmp_path):
    tree = tmp_path / "data"
    (tree / "ok").mkdir(parents=True)
    (tree / "ok" / "a.txt").write_text("a")
    return tree


@pytest.mark.parametrize("make, words", [
    (lambda t: os.mkfifo(t / "fifo"), "1 entry is not a directory or a regular file: fifo"),
    (lambda t: socket.socket(socket.AF_UNIX).bind(str(t / "sock")), "is not a directory or a regular file: sock"),
    (lambda t: ((t / "l1").symlink_to("l2"), (t / "l2").symlink_to("l1")), "is a loop of symbolic links: l1, l2"),
    (lambda t: (t / "out").symlink_to("/etc/hostname"), "leads outside it: out -> /etc/hostname"),
    (lambda t: (t / os.fsdecode(b"bad\xffname")).write_text("x"), "has a name that is not UTF-8: bad\\xffname"),
    (lambda t: ((t / "secret").write_text("x"), (t / "secret").chmod(0)), "cannot be read"),
    (lambda t: ((t / "closed").mkdir(), (t / "closed").chmod(0o300)), "cannot be read"),
])
def test_an_upload_that_cannot_be_copied_as_it_is_is_refused(odd_tree, make, words):
    from hpcjax.launch.uploads import parse_upload

    make(odd_tree)
    with pytest.raises(UsageError, match="--upload") as found:
        parse_upload(str(odd_tree))
    assert words in found.value.message and found.value.hint


@pytest.mark.parametrize("source", ["/dev/null", "fifo", "loop"])
def test_an_upload_that_is_no_file_or_directory_is_refused(tmp_path, source):
    from hpcjax.launch.uploads import parse_upload

    if source == "fifo":
        os.mkfifo(tmp_path / "fifo")
    if source == "loop":
        (tmp_path / "loop").symlink_to("loop")
    path = source if source.startswith("/") else str(tmp_path / source)
    with pytest.raises(UsageError) as found:
        parse_upload(path)
    assert ("loop of symbolic links" if source == "loop" else "is not a directory or a regular file") in \
        found.value.message


# --- the Python API ---------------------------------------------------------------------------------
@pytest.mark.parametrize("arguments", [5, "abc", {"a": 1}, None])
def test_map_with_no_list_is_refused(arguments):
    with pytest.raises(UsageError, match="map\\(\\) takes a list of arguments"):
        hpcjax.remote(backend="local")(len).map(arguments)


def test_an_argument_that_cannot_be_pickled_is_refused_and_nothing_is_left(tmp_path, hpcjax_home):
    import threading

    storage = tmp_path / "storage"
    with pytest.raises(UsageError, match="cannot be sent to the job") as found:
        hpcjax.remote(backend="local", storage_path=str(storage))(len).submit(threading.Lock())
    assert "make them inside the function" in found.value.hint
    assert not list(storage.rglob("*.pkl")) and not (storage / "calls").exists()


def test_ctrl_c_while_waiting_cancels_and_ends_in_one_short_interrupt():
    from hpcjax.api.submit import cancel_on_interrupt

    class Handle:
        job_id, cancelled = "42", False

        def cancel(self):
            Handle.cancelled = True

    with pytest.raises(KeyboardInterrupt) as found:
        with cancel_on_interrupt([Handle()]):
            raise KeyboardInterrupt
    assert Handle.cancelled and "job 42 was cancelled" in str(found.value)
    assert found.value.__context__ is None or found.value.__suppress_context__


# --- what hpcjax prints -----------------------------------------------------------------------------
def test_a_logs_escape_sequences_are_written_out_on_a_terminal(empty, monkeypatch):
    from hpcjax.cli.submitted import visible

    assert visible("a\x1b]0;pwned\x07b\tc\nd\r\x9b") == "a\\x1b]0;pwned\\x07b\tc\nd\r\\x9b"


def test_sacct_s_code_above_128_is_said_as_the_script_gave_it():
    from hpcjax.slurm.status import JobStatus, elapsed_seconds

    status = JobStatus(job_id="21", name="x", state="FAILED", exit_code="2:0", nodelist="node1")
    assert "exit code: 130 (sacct shows 2:0: it drops 128 from codes above 128)" in status.describe(130)
    assert "exit code: 2:0" in status.describe(2) and "exit code: 2:0" in status.describe(None)
    assert [elapsed_seconds(t) for t in ("00:00:00", "0:07", "01:02:03", "1-00:00:01", "", "bogus")] == \
        [0, 7, 3723, 86401, 0, 0]


def test_a_diverged_run_shows_where_in_its_report(empty):
    run = empty / "run"
    run.mkdir()
    step = '{{"step": {}, "loss": {}, "grad_norm": 1, "learning_rate": 1, "step_time_s": 0.1, "tokens_per_s": 9, ' \
           '"mfu": 0.1}}'
    (run / "metrics.jsonl").write_text("\n".join([step.format(1, 2.0), step.format(2, "NaN"), step.format(3, "NaN")]))
    code, out, err = cli(empty, "report", "run")
    assert code == 0 and "report of 3 step(s)" in err, err
    page = (run / "report.html").read_text()
    assert "<th>diverged</th><td>at step 2 (loss nan, 2 step(s) not finite)</td>" in page
    assert "<th>last loss</th><td>nan</td>" in page


def test_logs_on_a_terminal_go_through_visible(empty, monkeypatch):
    """The verb applies it where stdout is a terminal (a file or a pipe gets the bytes as they are)."""
    import hpcjax.cli.submitted as submitted

    class Run:
        job_id = "7"

        def write_logs(self, write, rank=None, tail=None):
            write("[rank 0 n] \x1b[2Jcleared\n")

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("hpcjax.backends.attach_one", lambda job, cluster, verb: Run())
    for stream, shown in ((Terminal(), "\\x1b[2Jcleared"), (io.StringIO(), "\x1b[2Jcleared")):
        monkeypatch.setattr(sys, "stdout", stream)
        assert submitted.cmd_logs(submitted.argparse.Namespace(job_id="7", follow=False, tail=None, rank=None, cluster=None,
                                                     remote_dir=None, profile_file=None, backend="auto"), []) == 0
        assert shown in stream.getvalue()


# --- a SLURM_CONF that names no file: SLURM's commands would retry it for 60 s each, silently ---------
@pytest.mark.parametrize("argv", [["status", "12345"], ["logs", "12345"], ["cancel", "12345"],
                                  ["stacks", "12345"], ["fetch", "12345"],
                                  ["submit", "--backend", "slurm", "--", "true"]])
def test_a_slurm_conf_that_names_no_file_is_said_at_once(empty, monkeypatch, argv):
    if not shutil.which("sbatch") and argv[0] == "submit":
        pytest.skip("no SLURM here: submit would refuse for that first")
    monkeypatch.setenv("SLURM_CONF", str(empty / "no-such-slurm.conf"))
    monkeypatch.delenv("HPCJAX_BACKEND")
    started = time.monotonic()
    refused(empty, argv, "names no file this user can read")
    # before any SLURM command: each retries such a file for 60 s (the check step's sinfo did, once)
    assert time.monotonic() - started < 30
