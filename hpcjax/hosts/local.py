"""This machine as a host: commands run as child processes, files are read in place."""

from __future__ import annotations

import subprocess

from hpcjax.hosts.files import LocalFiles

NOT_FOUND = 127  # a shell's exit code for a command it cannot find


class LocalHost:
    name = "this machine"
    key = "local"  # what job records say for jobs of this host
    remote = False

    def __init__(self) -> None:
        self.files = LocalFiles()

    def connect(self) -> None:
        """Nothing to connect to."""

    def run(self, argv: list[str], *, input: str | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess:
        """Run argv here; text in and out, never raises for a non-zero exit (a missing program
        exits 127, as in a shell)."""
        return self._run(argv, input, timeout, True)

    def run_bytes(self, argv: list[str], *, input: bytes | None = None,
                  timeout: float | None = None) -> subprocess.CompletedProcess:
        return self._run(argv, input, timeout, False)

    @staticmethod
    def _run(argv, input, timeout, text: bool) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(argv, input=input, capture_output=True, text=text, timeout=timeout)
        except FileNotFoundError:
            said = f"{argv[0]}: command not found"
            return subprocess.CompletedProcess(argv, NOT_FOUND, "" if text else b"", said if text else said.encode())

    def __repr__(self) -> str:
        return "LocalHost()"
