"""Bad input and seams, round four (issue 44), on the dev cluster: a sweep followed and cancelled by
the id `submit` printed, an element cancelled while pending (SLURM keeps no row of it), a dependent
the user cancelled (not SLURM because of its dependency), and `logs --follow` into a pipe. The
cases without SLURM: tests/cli/test_bad_input_four.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading

import pytest

from conftest import run_hpcjax
from support import wait_until

pytestmark = pytest.mark.cluster

ONE_GPU = ["--nodes", "1", "--gpus-per-node", "1", "--time", "5"]


def squeue_ids(job: str) -> list[str]:
    return subprocess.run(["squeue", "-h", "-r", "-j", job, "-o", "%i"], capture_output=True, text=True).stdout.split()


def test_a_sweep_is_followed_and_cancelled_by_the_id_submit_printed(tmp_path, slurm_cluster, hpcjax_home):
    done = run_hpcjax("submit", *ONE_GPU, "--sweep", "x=300,301,302", "--max-parallel", "1", "--", "sleep", "{x}",
                      cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    array = done.stdout.split()[0]
    elements = [f"{array}_{i}" for i in range(3)]
    wait_until(lambda: f"{array}_0" in squeue_ids(array) and "R" in subprocess.run(
        ["squeue", "-h", "-j", f"{array}_0", "-o", "%t"], capture_output=True, text=True).stdout)

    status = run_hpcjax("status", array, cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert [line.split(":")[0].split(" (")[0] for line in status.stdout.splitlines() if line.startswith("job ")] == \
        [f"job {e}" for e in elements]
    shown = json.loads(run_hpcjax("status", array, "--json", cwd=tmp_path).stdout)
    assert [s["job_id"] for s in shown] == elements and [s["state"] for s in shown][1:] == ["PENDING", "PENDING"]
    for verb in ("logs", "stacks", "fetch"):
        refused = run_hpcjax(verb, array, cwd=tmp_path)
        assert refused.returncode == 2 and f"job {array} is a sweep of 3 elements" in refused.stderr, refused.stderr
        assert f"hpcjax {verb} {array}_0" in refused.stderr

    # an element cancelled from outside while pending leaves no row of its own: `runs` still says so
    subprocess.run(["scancel", f"{array}_2"], check=True)
    wait_until(lambda: f"{array}_2" not in squeue_ids(array))
    rows = {r["key"]: r for r in json.loads(run_hpcjax("runs", "--json", cwd=tmp_path).stdout)}
    assert rows[f"{array}_2"]["state"] == "CANCELLED", rows[f"{array}_2"]

    cancel = run_hpcjax("cancel", array, cwd=tmp_path)
    assert cancel.returncode == 0, cancel.stderr
    assert cancel.stderr.split("\n")[:2] == [f"cancelled job {array}_1", f"cancelled job {array}_0"]  # pending first
    wait_until(lambda: not squeue_ids(array))
    ended = {e: run_hpcjax("status", e, cwd=tmp_path).stdout for e in elements}
    assert all(f"job {e} ended CANCELLED" in ended[e] for e in elements), ended
    assert "not started: cancelled with `hpcjax cancel`" in ended[f"{array}_1"]
    assert "SLURM keeps no record of an array element cancelled while pending" in ended[f"{array}_2"]
    again = run_hpcjax("cancel", array, cwd=tmp_path)
    assert again.returncode == 1 and f"every element of sweep {array} has already ended" in again.stderr


def test_a_dependent_the_user_cancelled_is_not_said_to_be_cancelled_by_its_dependency(tmp_path, slurm_cluster,
                                                                                       hpcjax_home):
    first = run_hpcjax("submit", *ONE_GPU, "--", "sleep", "300", cwd=tmp_path).stdout.strip()
    ours = run_hpcjax("submit", *ONE_GPU, "--after", first, "--", "true", cwd=tmp_path).stdout.strip()
    outside = run_hpcjax("submit", *ONE_GPU, "--after", first, "--", "true", cwd=tmp_path).stdout.strip()
    try:
        assert run_hpcjax("cancel", ours, cwd=tmp_path).returncode == 0
        subprocess.run(["scancel", outside], check=True)
        wait_until(lambda: not squeue_ids(f"{ours},{outside}"))
        said = run_hpcjax("status", ours, cwd=tmp_path).stdout
        assert "not started: cancelled with `hpcjax cancel`" in said and "so SLURM cancelled" not in said, said
        said = run_hpcjax("status", outside, cwd=tmp_path).stdout
        assert "not started: cancelled while it was pending" in said and "so SLURM cancelled" not in said, said
    finally:
        subprocess.run(["scancel", first])


@pytest.mark.waits  # minutes of a time limit or a sleep, and little CPU
def test_logs_follow_into_a_pipe_streams_each_line_as_the_job_writes_it(tmp_path, slurm_cluster, hpcjax_home):
    """Issue 44: `hpcjax logs --follow | grep loss` showed nothing until the job ended (block-buffered)."""
    program = "import time; print('loss 1.0', flush=True); time.sleep(40); print('loss 0.5', flush=True)"
    job = run_hpcjax("submit", *ONE_GPU, "--", sys.executable, "-c", program, cwd=tmp_path).stdout.strip()
    follow = subprocess.Popen([sys.executable, "-m", "hpcjax", "logs", "--follow", job], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        first = follow.stdout.readline()  # a pipe, as `| grep loss` gives it
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout.strip()
        assert first.endswith("loss 1.0\n") and state == "RUNNING", (first, state)  # before the job ended
        rest = follow.communicate(timeout=120)[0]
        assert rest.endswith("loss 0.5\n") and follow.returncode == 0
    finally:
        follow.kill()
        subprocess.run(["scancel", job])


SAVES_ON_TERM = [sys.executable, "-c", "import signal, sys, time\n"
                 "def saved(*_):\n    print('saved on SIGTERM', flush=True); sys.exit(0)\n"
                 "signal.signal(signal.SIGTERM, saved); print('working', flush=True); time.sleep(300)"]


@pytest.mark.waits  # minutes of a time limit or a sleep, and little CPU
def test_a_hold_keeps_what_the_user_asked_for(tmp_path, slurm_cluster, hpcjax_home):
    """Issue 44: -J on `hold` was dropped; two holds of one name both came up; a job's --time and
    --exclude were ignored inside a hold; a cancel in a hold killed the ranks without SLURM's grace."""
    name = f"r{os.getpid()}"
    done = run_hpcjax("hold", "--name", name, "-J", f"sq-{name}", "--nodes", "2", "--gpus-per-node", "1",
                      "--time", "6", cwd=tmp_path, timeout=300)
    assert done.returncode == 0 and f"hold {name} ready" in done.stderr, done.stderr
    held = done.stdout.strip()
    try:
        assert subprocess.run(["squeue", "-h", "-j", held, "-o", "%j"], capture_output=True,
                              text=True).stdout.strip() == f"sq-{name}"  # SLURM's name is -J's
        twice = run_hpcjax("hold", "--name", name, "--nodes", "1", "--gpus-per-node", "1", cwd=tmp_path)
        assert twice.returncode == 2 and f"a hold named {name!r} is up already" in twice.stderr, twice.stderr

        elsewhere = run_hpcjax("submit", "--on", name, "--nodes", "1", "--exclude", "node1", "--wait", "--",
                               "bash", "-c", "echo on $SLURMD_NODENAME", cwd=tmp_path)
        job = elsewhere.stdout.strip()
        assert elsewhere.returncode == 0, elsewhere.stderr
        assert run_hpcjax("logs", job, cwd=tmp_path).stdout == "[rank 0 node2] on node2\n"

        saving = run_hpcjax("submit", "--on", name, "--nodes", "1", "--", *SAVES_ON_TERM, cwd=tmp_path).stdout.strip()
        wait_until(lambda: "working" in run_hpcjax("logs", saving, cwd=tmp_path).stdout)
        assert run_hpcjax("cancel", saving, cwd=tmp_path).returncode == 0
        wait_until(lambda: "CANCELLED" in run_hpcjax("status", saving, cwd=tmp_path).stdout.split("\n")[0])
        assert "saved on SIGTERM" in run_hpcjax("logs", saving, cwd=tmp_path).stdout  # the grace a plain job gets

        timed = run_hpcjax("submit", "--on", name, "--nodes", "1", "--time", "1", "--wait", "--", "sleep", "300",
                           cwd=tmp_path, timeout=300)
        assert timed.returncode != 0 and f"job {timed.stdout.strip()} ended TIMEOUT" in timed.stderr, timed.stderr
        assert "likely cause: time limit" in timed.stderr
        assert squeue(held).endswith("RUNNING")  # the hold outlives them all
    finally:
        run_hpcjax("release", name, cwd=tmp_path)


def squeue(job: str, field: str = "%T") -> str:
    return subprocess.run(["squeue", "-h", "-j", job, "-o", field], capture_output=True, text=True).stdout.strip()


def test_jupyter_and_an_interactive_shell_run_on_a_holds_first_node(tmp_path, slurm_cluster, hpcjax_home):
    """The interactive paths for real (issue 44): `hpcjax jupyter --on` starts a Jupyter server as a
    step of the hold on its first node (jupyter-server, which the test command installs into the
    cluster's Python; hpcjax installs nothing), its address answers the API with its token, Ctrl-C
    stops it and the hold stays; `hpcjax shell --on` with no command is a login shell on the node
    in a terminal (tmux: keys sent, the screen read back), `exit` leaves it and the hold stays."""
    import shutil
    import signal
    import urllib.request

    if subprocess.run([sys.executable, "-c", "import jupyter_server"], capture_output=True).returncode != 0:
        pytest.fail("jupyter-server is not installed: the test command installs it (pip install -e '.[test]')")
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed: the test command installs it (apt-get install tmux)")
    name = f"i{os.getpid()}"
    done = run_hpcjax("hold", "--name", name, "--nodes", "1", "--gpus-per-node", "1", "--time", "6",
                      cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    held = done.stdout.strip()
    try:
        node = squeue(held, "%N")  # one node: wherever SLURM placed the hold (CI 34: node2, node1 being busy)
        assert re.fullmatch(r"node[0-9]", node), node
        port = str(20000 + os.getpid() % 20000)
        tunnelled = run_hpcjax("jupyter", "--on", name, "--local-port", port, cwd=tmp_path)
        assert tunnelled.returncode == 2 and "is the tunnel's port on a laptop" in tunnelled.stderr, tunnelled.stderr
        jupyter = subprocess.Popen([sys.executable, "-m", "hpcjax", "jupyter", "--on", name, "--port", port],
                                   cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime")})
        said: list[str] = []  # its stderr, read as it comes: reading it whole would wait for its end
        reader = threading.Thread(target=lambda: said.extend(jupyter.stderr), daemon=True)
        reader.start()
        try:
            url = jupyter.stdout.readline().strip()  # hpcjax's stdout: the address alone
            assert url.startswith(f"http://{node}:{port}/") and "token=" in url, url
            token = url.split("token=")[1].split("&")[0]
            with urllib.request.urlopen(f"http://{node}:{port}/api/status?token={token}", timeout=30) as answer:
                assert answer.status == 200 and "started" in json.loads(answer.read())
            assert len(squeue_steps(held)) == 1  # the server is a step of the hold (the probe, step 0, has ended)
        except AssertionError as error:
            raise AssertionError(f"{error}\nhpcjax jupyter said so far:\n{''.join(said)}") from None
        finally:
            jupyter.send_signal(signal.SIGINT)  # Ctrl-C
            jupyter.wait(timeout=60)
            reader.join(timeout=10)
        err = "".join(said)
        assert jupyter.returncode == 0 and "Jupyter stopped; the hold keeps running" in err, err
        wait_until(lambda: squeue_steps(held) == [], timeout=60)
        assert squeue(held) == "RUNNING"

        session = f"hpcjax-test-{os.getpid()}"
        hpcjax = f"{sys.executable} -m hpcjax shell --on {name}"
        subprocess.run(["tmux", "-L", session, "new-session", "-d", "-s", session, "-x", "200", "-y", "50", "-c", str(tmp_path),
                        f"env HPCJAX_HOME={hpcjax_home} SLURM_CONF={os.environ.get('SLURM_CONF', '')} {hpcjax}; "
                        "echo shell-ended-$?; sleep 60"], check=True)
        try:
            def screen() -> str:
                return subprocess.run(["tmux", "-L", session, "capture-pane", "-p", "-t", session], capture_output=True,
                                      text=True).stdout
            def shows(text: str) -> None:  # the screen as it was, when it never shows the text (CI saw one such)
                try:
                    wait_until(lambda: text in screen(), timeout=120)
                except AssertionError:
                    raise AssertionError(f"the terminal never showed {text!r}; it shows:\n{screen()}") from None

            shows(f"shell on {node} in hold {name}")
            subprocess.run(["tmux", "-L", session, "send-keys", "-t", session, "echo at-$SLURMD_NODENAME-$SLURM_JOB_ID-$((6*7))",
                            "Enter"], check=True)
            shows(f"at-{node}-{held}-42")
            subprocess.run(["tmux", "-L", session, "send-keys", "-t", session, "exit 0", "Enter"], check=True)
            shows("shell-ended-0")
        finally:
            subprocess.run(["tmux", "-L", session, "kill-server"], capture_output=True)  # its own server
        assert squeue(held) == "RUNNING"  # the hold outlives its shell
    finally:
        run_hpcjax("release", name, cwd=tmp_path)


def squeue_steps(job: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-s", "-j", job, "-o", "%i"], capture_output=True, text=True).stdout
    return [s for s in out.split() if not s.endswith((".batch", ".extern"))]
