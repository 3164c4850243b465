"""The rooms' import rules, checked on the source: launch code never imports JAX,
rank and training code never import launch code, the rank side needs nothing
but JAX and NumPy; and the rank side really runs in a venv holding only those."""

import ast
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "hpcjax"
SHARED = {"hpcjax", "hpcjax.errors", "hpcjax.contract", "hpcjax.validate"}
STDLIB = set(sys.stdlib_module_names)
# room -> (what it may import besides the standard library)
ALLOWED = {
    "rank": {"jax", "numpy", "tensorboardX"} | SHARED | {"hpcjax.rank"},  # tensorboardX: optional, lazily
    "train": {"jax", "numpy", "optax", "orbax"} | SHARED | {"hpcjax.rank", "hpcjax.train"},
    "launch": {"jinja2", "submitit", "packaging", "hpccm", "matplotlib"} | SHARED | {"hpcjax.launch"},
    # The Python API: its caller side builds on launch, its worker on rank; never train.
    "api": {"submitit", "cloudpickle", "numpy"} | SHARED | {"hpcjax.api", "hpcjax.launch", "hpcjax.rank"},
    "shared": set(),  # errors, contract, validate: the standard library only (and each other)
}


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def allowed(module: str, room: str) -> bool:
    top = module.split(".")[0]
    if top in STDLIB or top == "__future__":
        return True
    if top != "hpcjax":
        return top in ALLOWED[room]
    if room == "shared":
        return module in SHARED
    return module in SHARED or any(module == r or module.startswith(r + ".") for r in ALLOWED[room] if "." in r)


def room_files():
    for room in ("rank", "train", "launch", "api"):
        for path in sorted((PACKAGE / room).glob("*.py")):
            yield room, path
    for name in ("errors", "contract", "validate"):
        yield "shared", PACKAGE / f"{name}.py"


@pytest.mark.parametrize("room, path", list(room_files()), ids=lambda v: str(v).split("hpcjax/")[-1])
def test_each_room_imports_only_what_it_may(room, path):
    bad = sorted(m for m in imports_of(path) if not allowed(m, room))
    assert not bad, f"{path.relative_to(REPO)} ({room}) imports {bad}"


# The API's rank side runs inside the job's image: no jinja2 there, so no launch code.
API_RANK_SIDE = ("worker.py", "session.py", "folder.py")


@pytest.mark.parametrize("name", API_RANK_SIDE)
def test_the_apis_rank_side_never_imports_the_launch_side(name):
    path = PACKAGE / "api" / name
    assert not {m for m in imports_of(path) if m.startswith("hpcjax.launch") or m == "jinja2"}


def test_no_module_is_over_300_lines():
    long = {str(p.relative_to(REPO)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 300}
    assert not long, long


@pytest.fixture(scope="module")
def bare_jax_venv(tmp_path_factory):
    """A virtual environment with jax and numpy from PyPI and nothing else (no hpcjax)."""
    where = tmp_path_factory.mktemp("bare-jax") / "venv"
    venv.create(where, with_pip=True)
    python = where / "bin" / "python"
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "jax", "numpy"],
                         capture_output=True, text=True, timeout=900)
    assert pip.returncode == 0, pip.stderr
    return python


def test_the_rank_side_runs_with_only_jax_and_numpy(bare_jax_venv, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "JAX_", "HPCJAX_", "PYTHON"))}
    env.update(PYTHONPATH=str(REPO), HPCJAX_GPUS_PER_PROCESS="2")
    missing = subprocess.run([str(bare_jax_venv), "-c", "import jinja2"], capture_output=True, env=env)
    assert missing.returncode != 0  # the venv really lacks the launch side's dependencies
    for argv in (["env", "--json"], ["check", "all"]):
        result = subprocess.run([str(bare_jax_venv), "-m", "hpcjax", *argv], capture_output=True, text=True,
                                env=env, cwd=tmp_path, timeout=300)
        assert result.returncode == 0, result.stderr
    assert "devices: ok: local devices [2]" in result.stdout and "allreduce: ok" in result.stdout
