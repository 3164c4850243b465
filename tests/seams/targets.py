"""Where a seam cell's job runs, as a user reaches it: this machine's CPU (the local backend), the
dev cluster's SLURM here, inside a held allocation there (`--on`), or the dev cluster from a laptop
over the tests' own sshd. A target
knows the options its verbs need, where the job's files are, and how to touch a file the job
waits for."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import forkserver

PROBE = Path(__file__).resolve().parent / "probe.py"
RANKS = 2  # every cell: two ranks (on two nodes of the dev cluster, where it has them)
# The verbs that reach a cluster (--cluster) and those that choose a backend (--backend).
CLUSTER_VERBS = ("submit", "smoke", "status", "logs", "cancel", "stacks", "fetch", "report", "render")
BACKEND_VERBS = ("submit", "smoke", "relaunch")


class Target:
    name = "?"

    def __init__(self, project: Path, home: Path) -> None:
        self.project, self.home = project, home
        project.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROBE, project / "probe.py")
        self.env = {**os.environ, "HPCJAX_HOME": str(home), "PYTHONUNBUFFERED": "1"}

    # --- what differs ---------------------------------------------------------------------
    def options(self, verb: str) -> list[str]:
        return []

    def layout(self) -> list[str]:
        return ["--nodes", "2", "--gpus-per-node", "1"]

    def scaling(self) -> dict:
        """ScalingConfig's keywords for this target (the layout, and where it goes)."""
        return {"nodes": 2, "gpus_per_node": 1}

    def backend(self) -> str | None:
        return None

    def storage(self, name: str) -> str:
        return str(self.project / name)

    def release_path(self, name: str) -> str:
        """A file the job can see (its path as the job spells it)."""
        return str(self.project / name)

    def release(self, path: str) -> None:
        Path(path).touch()

    def requeue(self, job: str) -> None:
        done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr

    # --- the same for every target ---------------------------------------------------------
    def hpcjax(self, verb: str, *args: str, timeout: float = 300, env: dict | None = None):
        return forkserver.run([verb, *self.options(verb), *args], self.project, {**self.env, **(env or {})}, timeout)

    def start(self, verb: str, *args: str, env: dict | None = None) -> subprocess.Popen:
        """A verb in the background (stdout and stderr kept apart, line by line)."""
        argv = [sys.executable, "-m", "hpcjax", verb, *self.options(verb), *args]
        return subprocess.Popen(argv, cwd=self.project, env={**self.env, **(env or {})}, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def python(self, *argv: str, env: dict | None = None) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, *argv], cwd=self.project, env={**self.env, **(env or {})}, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


class Local(Target):
    name = "local"

    def options(self, verb: str) -> list[str]:
        return ["--backend", "local"] if verb in BACKEND_VERBS else []

    def layout(self) -> list[str]:
        return ["--nodes", "1", "--gpus-per-node", "2"]

    def scaling(self) -> dict:
        return {"nodes": 1, "gpus_per_node": 2}

    def backend(self) -> str | None:
        return "local"


class Slurm(Target):
    name = "slurm"


class Held(Slurm):
    """The dev cluster's SLURM here, the job run inside a held allocation (`hpcjax hold`, `--on`):
    the hold is made for the cell and released after it."""

    name = "hold"
    JOB_VERBS = ("submit", "smoke")  # relaunch submits what its job's record says: --on too

    def __init__(self, project: Path, home: Path) -> None:
        super().__init__(project, home)
        self.hold = "seam-" + "".join(c for c in project.parent.name if c.isalnum())[-16:]

    def options(self, verb: str) -> list[str]:
        return ["--on", self.hold] if verb in self.JOB_VERBS else []

    def scaling(self) -> dict:
        return {**super().scaling(), "on": self.hold}

    def up(self) -> None:
        done = self.hpcjax("hold", "--name", self.hold, *self.layout(), "--time", "00:20:00")
        assert done.returncode == 0, done.stderr

    def down(self) -> None:
        self.hpcjax("release", self.hold)


class Ssh(Target):
    """A laptop: no SLURM of its own, the cluster reached through the tests' sshd as its user."""

    name = "ssh"

    def __init__(self, project: Path, home: Path, sshd) -> None:
        super().__init__(project, home)
        self.sshd = sshd
        self.profiles = sshd.profiles(project.parent / "profiles.toml")
        self.env["SLURM_CONF"] = str(project.parent / "no-slurm-here.conf")
        self.tag = project.parent.name[-20:]

    def options(self, verb: str) -> list[str]:
        return ["--cluster", "devcluster", "--profile-file", str(self.profiles)] if verb in CLUSTER_VERBS else []

    def scaling(self) -> dict:
        return {"nodes": 2, "gpus_per_node": 1, "cluster": "devcluster", "profile_file": str(self.profiles)}

    def storage(self, name: str) -> str:
        return f"seams/{self.tag}/{name}"  # under the cluster's remote directory

    def release_path(self, name: str) -> str:
        return f"{self.sshd.remote_dir}/seams/{self.tag}/{name}"

    def release(self, path: str) -> None:
        done = self.sshd.ssh(f"mkdir -p \"$(dirname {path})\" && touch {path}")
        assert done.returncode == 0, done.stderr

    def requeue(self, job: str) -> None:
        done = self.sshd.ssh(f"scontrol requeue {job}")
        assert done.returncode == 0, done.stderr
