"""A plain (non-editable) install into a fresh virtual environment must render:
the templates ship inside the wheel."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.jax  # builds and installs the wheel on this machine: not a one-minute tier's work
def test_wheel_install_in_fresh_venv_renders(tmp_path):
    source = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    venv = tmp_path / "venv"
    # System site packages provide jinja2; hpcjax itself is installed into the venv,
    # which comes first on its sys.path. pip builds the wheel in an isolated env.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    # The venv's own hpcjax, not a checkout a PYTHONPATH may name.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pip = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-deps",
                          str(source)], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    shutil.rmtree(source)  # the install must not lean on the source tree
    where = subprocess.run([str(venv / "bin/python"), "-c",
                            "import hpcjax.slurm.script as r; print(r.__file__); print(r.template_dir())"],
                           capture_output=True, text=True, cwd=tmp_path, env=env)
    module_file, templates = where.stdout.split()
    assert module_file.startswith(str(venv)) and templates.startswith(str(venv)), where.stdout
    # Every package of the source tree is in the wheel (a new room must be listed in pyproject).
    rooms = sorted(".".join(p.parent.relative_to(REPO / "hpcjax").parts)
                   for p in (REPO / "hpcjax").rglob("*/__init__.py"))
    found = subprocess.run([str(venv / "bin/python"), "-c", "import importlib, sys\n"
                            "for room in sys.argv[1:]: print(importlib.import_module('hpcjax.' + room).__file__)",
                            *rooms], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert found.returncode == 0 and all(line.startswith(str(venv)) for line in found.stdout.split()), found
    # The exit guard's hook ships too: the rendered script names it, in the venv (hpcjax.rank.watch.exitguard).
    plain = subprocess.run([str(venv / "bin/hpcjax"), "render", "--", "python", "train.py"],
                           capture_output=True, text=True, cwd=tmp_path, env=env)
    hook = Path(re.search(r"^hpcjax_exit_hook=(\S+)$", plain.stdout, re.M).group(1))
    assert hook.is_relative_to(venv) and (hook / "sitecustomize.py").is_file(), plain.stdout
    work = tmp_path / "work"
    work.mkdir()
    (work / "jax.sif").touch()
    result = subprocess.run([str(venv / "bin/hpcjax"), "render", "--nodes", "2", "--gpus-per-node", "4",
                             "--image", "jax.sif", "--", "python", "train.py"],
                            capture_output=True, text=True, cwd=work, env=env)
    assert result.returncode == 0, result.stderr
    assert "#SBATCH --ntasks-per-node=4" in result.stdout and ":/opt/hpcjax/lib/hpcjax jax.sif" in result.stdout
