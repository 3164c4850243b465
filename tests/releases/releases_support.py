"""Running hpcjax and SLURM's commands on one release's dev cluster: through
slurm/devcluster/on.sh, as a user on that cluster's login side would (its client commands, its
SLURM_CONF; in its Debian root for every release but this machine's 22.05)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ON = REPO / "slurm/devcluster/on.sh"
# The matrix's releases (slurm/devcluster/releases.sh has each one's root and ports); the strict
# site (24.11 configured as strict sites are) has tests of its own.
RELEASES = ("20.11", "22.05", "24.11", "26.05")


def on_release(release: str, *command: str, cwd: Path | None = None, env: dict | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """`command` on the release's login side."""
    return subprocess.run(["bash", str(ON), release, "--", *command], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def hpcjax_on(release: str, *args: str, cwd: Path | None = None, env: dict | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess:
    """The hpcjax command on the release's login side, as a user would run it there."""
    return on_release(release, sys.executable, "-m", "hpcjax", *args, cwd=cwd, env=env, timeout=timeout)
