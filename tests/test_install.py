"""A plain (non-editable) install into a fresh virtual environment must render:
the templates ship inside the wheel."""

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


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
    pip = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-deps",
                          str(source)], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    shutil.rmtree(source)  # the install must not lean on the source tree
    where = subprocess.run([str(venv / "bin/python"), "-c",
                            "import hpcjax.launch.render as r; print(r.__file__); print(r.template_dir())"],
                           capture_output=True, text=True, cwd=tmp_path)
    module_file, templates = where.stdout.split()
    assert module_file.startswith(str(venv)) and templates.startswith(str(venv)), where.stdout
    # Every package of the source tree is in the wheel (a new room must be listed in pyproject).
    rooms = sorted(p.parent.name for p in (REPO / "hpcjax").glob("*/__init__.py"))
    found = subprocess.run([str(venv / "bin/python"), "-c", "import importlib, sys\n"
                            "for room in sys.argv[1:]: print(importlib.import_module('hpcjax.' + room).__file__)",
                            *rooms], capture_output=True, text=True, cwd=tmp_path)
    assert found.returncode == 0 and all(line.startswith(str(venv)) for line in found.stdout.split()), found
    work = tmp_path / "work"
    work.mkdir()
    (work / "jax.sif").touch()
    result = subprocess.run([str(venv / "bin/hpcjax"), "render", "--nodes", "2", "--gpus-per-node", "4",
                             "--image", "jax.sif", "--", "python", "train.py"],
                            capture_output=True, text=True, cwd=work)
    assert result.returncode == 0, result.stderr
    assert "#SBATCH --ntasks-per-node=4" in result.stdout and ":/opt/hpcjax/lib/hpcjax jax.sif" in result.stdout
