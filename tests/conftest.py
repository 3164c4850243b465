"""Shared fixtures. Tests marked `cluster` need the dev cluster (slurm/devcluster/up.sh);
the project's test command starts it, so they run, never skip, in CI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DEVCLUSTER_CONF = Path(os.environ.get("HPCJAX_DEVCLUSTER_DIR", "/var/lib/hpcjax-devcluster")) / "etc/slurm.conf"


@pytest.fixture
def hpcjax_home(tmp_path, monkeypatch):
    """Job records of this test only."""
    home = tmp_path / "hpcjax-home"
    monkeypatch.setenv("HPCJAX_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def slurm_cluster():
    """The running dev cluster; fails (does not skip) when it is not up."""
    if shutil.which("sbatch") is None:
        pytest.fail("sbatch is not installed: run slurm/devcluster/up.sh (the test command does)")
    env = dict(os.environ)
    env.setdefault("SLURM_CONF", str(DEVCLUSTER_CONF))
    os.environ["SLURM_CONF"] = env["SLURM_CONF"]
    ping = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t %G"], capture_output=True, text=True)
    if ping.returncode != 0:
        pytest.fail(f"the dev cluster is not up (sinfo: {ping.stderr.strip()}); run slurm/devcluster/up.sh")
    return ping.stdout


@pytest.fixture
def shared_storage(request, slurm_cluster):
    """A directory both dev-cluster nodes see, outside /tmp (which hpcjax refuses as
    storage for a multi-node job: on a real cluster it is each node's own)."""
    where = DEVCLUSTER_CONF.parent.parent / "storage" / f"{request.node.name[:60]}-{os.getpid()}"
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    yield where
    shutil.rmtree(where, ignore_errors=True)


def run_hpcjax(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300):
    """Run the hpcjax command as a user would (through the interpreter, so a fresh
    machine's PATH need not know the console script yet)."""
    return subprocess.run([sys.executable, "-m", "hpcjax", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def assert_rank_3_of_4_failed_alone(outcome, host: str, stopped_by: str) -> None:
    """The Run tests' failing job (2 nodes x 2 ranks; rank 3 exits 3) on any backend:
    rank 3 is the cause, named with its node and log tail; the other three were stopped."""
    assert (outcome.state, outcome.exit_code) == ("FAILED", 3)
    [failure] = outcome.failed
    assert (failure.rank, failure.host, failure.reason) == (3, host, "Exited with exit code 3")
    assert "rank three gives up" in failure.log_tail
    assert outcome.stopped == (0, 1, 2)
    assert f"ranks stopped by {stopped_by} after the failure: 0, 1, 2" in outcome.report()


@pytest.fixture(scope="session")
def charliecloud_image():
    """The Charliecloud image with JAX and NumPy but not hpcjax (containers/charliecloud-image.sh;
    the test command builds it once and keeps it between runs)."""
    image = os.environ.get("HPCJAX_TEST_IMAGE")
    if not image:
        built = subprocess.run(["bash", str(REPO / "containers" / "charliecloud-image.sh")], capture_output=True,
                               text=True, timeout=1800)
        if built.returncode != 0:
            pytest.fail(f"could not build the Charliecloud image:\n{built.stderr[-3000:]}")
        image = built.stdout.strip().splitlines()[-1]
    if not Path(image, ".hpcjax-image-complete").is_file():
        pytest.fail(f"{image} is not a complete image; run containers/charliecloud-image.sh")
    return image
