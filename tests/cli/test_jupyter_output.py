"""`hpcjax jupyter` reads the server's output (a real subprocess here; the server itself runs on the
dev cluster in tests/launch/test_holds_cluster.py): the address as soon as it is printed, within a
deadline even when the server says nothing, and everything after it read on, so a server that
logs a lot never stalls on a full pipe."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from hpcjax.cli.nodeshell import answers_soon, ends_with_its_input, wait_for_url


def server(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_the_address_is_found_and_a_server_that_logs_a_lot_afterwards_never_stalls(capfd):
    chatty = server("import sys\nprint('starting')\nprint('http://node1:8888/lab?token=abc', flush=True)\n"
                    "for i in range(20000): print('log line', i, 'x' * 40)\nprint('the last line')")
    url, said = wait_for_url(chatty, timeout_s=30)
    assert (url, said) == ("http://node1:8888/lab?token=abc", "")
    assert chatty.wait(timeout=30) == 0  # 1 MB after the address: a pipe nobody read stalls at 64 KiB
    time.sleep(0.2)
    assert "the last line" in capfd.readouterr().err


def test_a_server_that_ends_without_an_address_is_said_with_its_last_lines():
    url, said = wait_for_url(server("print('OSError: [Errno 98] Address already in use')"), timeout_s=30)
    assert url is None and "Address already in use" in said


def test_a_server_that_says_nothing_is_given_up_on_at_the_deadline():
    silent = server("import time; time.sleep(60)")
    began = time.monotonic()
    try:
        assert wait_for_url(silent, timeout_s=0.3) == (None, "")
        assert time.monotonic() - began < 30  # it did not wait for the server's end
    finally:
        silent.kill()


@pytest.mark.tools  # a real Jupyter server's start: 5 s
def test_a_real_jupyter_server_is_said_only_once_it_answers(tmp_path):
    """The last stop's CI failure, kept: jupyter_server 2 prints its address before it listens (it binds
    in its event loop's first turn), so a connection made at once was refused (8 of 8 tries here, run by
    hand). hpcjax waits for an HTTP answer before it prints the address: a connection right after works."""
    if subprocess.run([sys.executable, "-c", "import jupyter_server"], capture_output=True).returncode != 0:
        pytest.fail("jupyter-server is not installed: the test command installs it (pip install -e '.[test]')")
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    jupyter = subprocess.Popen([sys.executable, "-m", "jupyter_server", "--no-browser", "--ip=127.0.0.1",
                                f"--port={port}", "--port-retries=0", "--allow-root"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
                               env={**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")})
    try:
        url, said = wait_for_url(jupyter, timeout_s=60)
        assert url is not None and f"127.0.0.1:{port}" in url, said
        assert answers_soon(url, jupyter, timeout_s=60)
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # refused without the wait
    finally:
        jupyter.terminate()
        jupyter.wait(timeout=30)


def test_an_address_nobody_listens_on_is_not_said_to_answer():
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    quiet = server("import time; time.sleep(60)")
    began = time.monotonic()
    try:
        assert not answers_soon(f"http://127.0.0.1:{port}/lab?token=abc", quiet, timeout_s=0.4)
        assert time.monotonic() - began < 30
    finally:
        quiet.kill()
    ended = server("pass")
    ended.wait()
    assert not answers_soon(f"http://127.0.0.1:{port}/lab?token=abc", ended, timeout_s=60)  # at once: it is over


def test_a_server_started_over_ssh_ends_when_its_input_does_and_on_its_own():
    """The wrapper `hpcjax jupyter` runs on the login node: the end of the laptop's ssh (its input) stops
    the server's srun, which went on serving in the hold without it (seen from the laptop on the dev
    cluster: tests/api/test_api_from_a_laptop.py); a server that ends first ends it with its own status."""
    by_itself = subprocess.Popen(ends_with_its_input(["bash", "-c", "sleep 0.3; exit 3"]), stdin=subprocess.PIPE)
    assert by_itself.wait(timeout=30) == 3
    serving = subprocess.Popen(ends_with_its_input(["sleep", "60"]), stdin=subprocess.PIPE)
    time.sleep(0.3)
    serving.stdin.close()
    assert serving.wait(timeout=30) == 128 + 15  # SIGTERM, as srun then passes it on
