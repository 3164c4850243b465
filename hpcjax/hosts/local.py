"""This machine as a host: commands run as child processes, files are read in place."""

from __future__ import annotations

import shutil
import subprocess


class LocalHost:
    name = "this machine"
    key = "local"  # what job records say for jobs of this host

    def which(self, program: str) -> bool:
        return shutil.which(program) is not None

    def run(self, argv: list[str], *, input: str | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess:
        """Run argv here; text in and out, never raises for a non-zero exit."""
        return subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)

    def __repr__(self) -> str:
        return "LocalHost()"
