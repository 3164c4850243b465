"""Exit statuses as a shell says them (hpcjax.protocol.statuses): from Python's returncodes, srun's words
and the local backend's, compared with what bash itself reports for the same end."""

from __future__ import annotations

import signal
import subprocess

import pytest

from hpcjax.follow.outcome import TaskEvent, analyze
from hpcjax.protocol.statuses import exit_words, shell_status, signal_words, status_of


def bash_status(command: str) -> int:
    return subprocess.run(["bash", "-c", f"{command}; echo $?"], capture_output=True, text=True).stdout.split()[-1]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV, signal.SIGABRT])
def test_a_signal_is_128_plus_n_as_bash_says(sig):
    said = int(bash_status(f"bash -c 'kill -{int(sig)} $$'"))
    assert shell_status(-int(sig)) == said == 128 + int(sig)
    assert status_of(exit_words(-int(sig))) == said  # the local backend's words
    assert status_of(signal.strsignal(sig)) == said  # srun's
    assert status_of(signal.strsignal(sig) + " (core dumped)") == said


@pytest.mark.parametrize("code", [1, 2, 3, 42, 255])
def test_an_exit_code_is_itself(code):
    assert shell_status(code) == code == status_of(exit_words(code)) == int(bash_status(f"(exit {code})"))


@pytest.mark.parametrize("code", [None, 0, 256, -1000])
def test_what_names_no_failure_is_never_success(code):
    assert shell_status(code) == 1


def test_words_that_name_no_status():
    assert status_of("Exited with exit code 0") is None and status_of("weird") is None
    assert signal_words()["Interrupt"] == 2 and signal_words()["Aborted"] == 6


@pytest.mark.parametrize("what, status", [("Interrupt", 130), ("Killed", 137), ("Exited with exit code 3", 3),
                                          ("Killed by signal SIGKILL", 137)])
def test_a_failed_rank_gives_the_job_its_shell_status(tmp_path, what, status):
    """The first rank that failed by itself, before srun stopped the others, names the job's status."""
    events = [TaskEvent((0,), "node1", what, before_stop=True), TaskEvent((1,), "node2", "Killed", before_stop=False)]
    outcome = analyze("7", "FAILED", events, lambda rank: tmp_path / f"7-rank{rank}.log", job_exit_code=status % 128)
    assert outcome.exit_code == status and [f.rank for f in outcome.failed] == [0]
