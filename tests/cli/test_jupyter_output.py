"""`hpcjax jupyter` reads the server's output (a real subprocess here; the server itself runs on the
dev cluster in tests/launch/test_holds_cluster.py): the address as soon as it is printed, within a
deadline even when the server says nothing, and everything after it read on, so a server that
logs a lot never stalls on a full pipe."""

from __future__ import annotations

import subprocess
import sys
import time

from hpcjax.cli.nodeshell import wait_for_url


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
        assert wait_for_url(silent, timeout_s=1) == (None, "")
        assert time.monotonic() - began < 30  # it did not wait for the server's end
    finally:
        silent.kill()
