"""The rooms' import rules, checked on the source: launch code never imports JAX,
rank and training code never import launch code, the rank side needs nothing
but JAX and NumPy; and the rank side really runs in a venv holding only those."""

import ast
import os
import re
import shutil
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "hpcjax"
# The rooms both sides share, standard library only: values read and written one way (and the one
# voice that speaks to the user), and what the login side and the ranks agree on.
SHARED = {"hpcjax.values", "hpcjax.protocol"}
STDLIB = set(sys.stdlib_module_names)
# The container runtimes' table: standard library only, so the rank side may read it.
RUNTIME_TABLE = {"hpcjax.containers.table", "hpcjax.containers.binds", "hpcjax.containers.runtimes"}
# room -> (what it may import besides the standard library). The login side's rooms, from the
# top down: launch (the one pipeline) > backends (the table) > slurm, localjobs (each backend's
# machinery) > follow (any job, followed) > job (what a job is) > hosts, containers, catalog >
# protocol > values. The package itself (`import hpcjax`, lazy) may be imported by any room.
LOGIN_BASE = SHARED | {"hpcjax.hosts", "hpcjax.containers", "hpcjax.catalog"}
ALLOWED = {
    "rank": {"jax", "numpy"} | SHARED | {"hpcjax.rank", "hpcjax.containers.table"},
    "train": {"jax", "numpy", "optax", "orbax", "tensorboardX"} | SHARED | {"hpcjax.rank", "hpcjax.train"},
    "launch": {"jinja2", "submitit"} | LOGIN_BASE | {"hpcjax.launch", "hpcjax.backends", "hpcjax.slurm",
                                                     "hpcjax.localjobs", "hpcjax.follow", "hpcjax.job"},
    "backends": {"jinja2", "submitit"} | LOGIN_BASE | {"hpcjax.backends", "hpcjax.slurm", "hpcjax.localjobs",
                                                       "hpcjax.follow", "hpcjax.job"},
    "slurm": {"jinja2", "submitit"} | LOGIN_BASE | {"hpcjax.slurm", "hpcjax.follow", "hpcjax.job"},
    "localjobs": LOGIN_BASE | {"hpcjax.localjobs", "hpcjax.follow", "hpcjax.job"},
    "follow": LOGIN_BASE | {"hpcjax.follow"},
    "job": SHARED | {"hpcjax.job", "hpcjax.containers", "hpcjax.hosts"},
    "containers": {"hpccm", "packaging"} | SHARED | {"hpcjax.containers"},  # hpccm, packaging: recipes only
    "hosts": SHARED | {"hpcjax.hosts"},
    "catalog": SHARED | {"hpcjax.catalog"},
    "pages": {"matplotlib"} | SHARED | {"hpcjax.pages"},
    # The Python API: its caller side builds on the pipeline (and, from a laptop, on the hosts that
    # ship the call and read its results), its worker on rank (and the TensorBoard writer of
    # `hpcjax.report`); never the rest of train.
    "api": {"submitit", "cloudpickle", "numpy"} | SHARED | {"hpcjax.api", "hpcjax.launch", "hpcjax.backends",
                                                             "hpcjax.job", "hpcjax.follow", "hpcjax.rank",
                                                             "hpcjax.hosts", "hpcjax.containers.binds",
                                                             "hpcjax.train.scalars"},
    "protocol": SHARED,
    "values": {"hpcjax.values"},
}
ROOMS = ("rank", "train", "launch", "backends", "slurm", "localjobs", "follow", "job", "containers", "hosts", "catalog",
         "pages", "api", "protocol", "values")


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function. `from hpcjax import backends`
    is an import of hpcjax.backends (a module or room), not of the package alone."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                inside = REPO.joinpath(*node.module.split("."), alias.name)
                is_module = inside.with_suffix(".py").is_file() or (inside / "__init__.py").is_file()
                found.add(f"{node.module}.{alias.name}" if is_module else node.module)
    return found


def allowed(module: str, room: str) -> bool:
    top = module.split(".")[0]
    if top in STDLIB or top == "__future__":
        return True
    if top != "hpcjax":
        return top in ALLOWED[room]
    return module == "hpcjax" or any(module == r or module.startswith(r + ".")
                                     for r in ALLOWED[room] if r.startswith("hpcjax."))


def room_files():
    for room in ROOMS:
        for path in sorted((PACKAGE / room).rglob("*.py")):
            yield room, path


def test_every_module_belongs_to_a_room():
    """A new room (a folder of hpcjax/) must be given its import rules here."""
    rooms = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert rooms <= set(ROOMS) | {"cli", "templates"}, rooms - set(ROOMS)
    assert {p.stem for p in PACKAGE.glob("*.py")} == {"__init__", "__main__"}  # no module outside a room


def test_the_hole_is_closed():
    """An import of a room by name counts as an import of that room (the check once read it as the
    package's), so a room that imports another through `from hpcjax import ...` is caught."""
    found = imports_of(PACKAGE / "api" / "submit.py")
    assert "hpcjax.backends" in found or "hpcjax.hosts.ship" in found, found


@pytest.mark.parametrize("room, path", list(room_files()), ids=lambda v: str(v).split("hpcjax/")[-1])
def test_each_room_imports_only_what_it_may(room, path):
    bad = sorted(m for m in imports_of(path) if not allowed(m, room))
    assert not bad, f"{path.relative_to(REPO)} ({room}) imports {bad}"


# The API's rank side runs inside the job's image: no jinja2 there, so no launch code.
API_RANK_SIDE = ("worker.py", "session.py", "folder.py")


def test_the_architecture_pages_table_says_these_rules():
    """docs/architecture.md's table of rooms names, for each room, exactly what ALLOWED lets it
    import (rooms and third-party packages; asides after a `;` are prose)."""
    rows = [line for line in (REPO / "docs" / "architecture.md").read_text().splitlines() if line.startswith("| `hpcjax/")]
    third_party = {name.lower() for allowed in ALLOWED.values() for name in allowed if not name.startswith("hpcjax")}
    said = {}
    for row in rows:
        room, column = re.match(r"\| `hpcjax/(\w+)/`", row)[1], row.split("|")[4].split(";")[0]
        words = {word.strip("`").lower() for word in re.findall(r"`?[A-Za-z][A-Za-z0-9_.]*`?", column)}
        said[room] = ({w for w in words if w.split(".")[0] in ROOMS} - {"protocol", "values"},
                      {w for w in words if w in third_party})
    assert set(said) == set(ROOMS) | {"cli"}, sorted(said)
    for room in ROOMS:
        rooms = {name.removeprefix("hpcjax.") for name in ALLOWED[room] if name.startswith("hpcjax.")} - \
            {"protocol", "values", room}
        packages = {name.lower() for name in ALLOWED[room] if not name.startswith("hpcjax")}
        assert said[room] == (rooms, packages), (room, said[room], (rooms, packages))


def test_the_runtime_table_needs_only_the_standard_library():
    """The rank side asks the table which container it runs in, inside any JAX image."""
    table = [PACKAGE / "containers" / "table.py", PACKAGE / "containers" / "binds.py",
             *sorted((PACKAGE / "containers" / "runtimes").glob("*.py"))]
    for path in table:
        bad = sorted(m for m in imports_of(path) if not allowed(m, "protocol")
                     and not any(m == t or m.startswith(t + ".") for t in RUNTIME_TABLE))
        assert not bad, f"{path.relative_to(REPO)} imports {bad}"


@pytest.mark.parametrize("name", API_RANK_SIDE)
def test_the_apis_rank_side_never_imports_the_launch_side(name):
    path = PACKAGE / "api" / name
    assert not {m for m in imports_of(path) if m.startswith("hpcjax.launch") or m == "jinja2"}


def test_each_room_names_every_module_it_holds():
    """The size rule follows ideas: every module and sub-room is named in its room's docstring,
    with what it is for. A module that cannot be said there in a few words holds more than one
    idea, and a room whose list no longer reads as one idea is split into sub-rooms (as rank/ was:
    start, prove, watch, cache)."""
    import re

    unnamed = {}
    for init in sorted(PACKAGE.rglob("__init__.py")):
        room = init.parent
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        held = [p.stem if p.is_file() else p.name for p in room.iterdir()
                if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()]
        missing = [m for m in held if not re.search(rf"(?<!\w){m}(?!\w)", doc)]
        if missing:
            unnamed[str(room.relative_to(REPO))] = missing
    assert not unnamed, unnamed


LONG = 300  # lines: where a module is looked at again


def test_a_module_over_300_lines_says_why_it_is_one_idea():
    """The rule is one idea per module, not a number of lines: past LONG lines a module has most
    often grown a second idea (a page writer beside the checks that fill it, a wait beside the
    jobs it waits for), so it is split. One that stays longer says in its docstring, in a
    paragraph that starts "One idea:", why its parts cannot stand apart."""
    unexplained = {str(p.relative_to(REPO)): n for p in PACKAGE.rglob("*.py")
                   if (n := len(p.read_text().splitlines())) > LONG
                   and "One idea:" not in (ast.get_docstring(ast.parse(p.read_text())) or "")}
    assert not unexplained, unexplained


# The one voice (issue 64): what hpcjax says to its user goes through hpcjax.values.voice. The exit
# guard's sitecustomize runs in every Python of a job before hpcjax may be imported, and imports nothing.
VOICE = PACKAGE / "values" / "voice.py"
SPEAKS_BEFORE_HPCJAX = PACKAGE / "rank" / "watch" / "exithook" / "sitecustomize.py"


def stderr_writes(path: Path) -> list[int]:
    """The lines of `path` that print to stderr or write to it, past the voice."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            to_file = [k.value for k in node.keywords if k.arg == "file"]
            printed = isinstance(node.func, ast.Name) and node.func.id == "print" and any(
                isinstance(f, ast.Attribute) and f.attr in ("stderr", "__stderr__") for f in to_file)
            written = isinstance(node.func, ast.Attribute) and node.func.attr in ("write", "writelines") and \
                isinstance(node.func.value, ast.Attribute) and node.func.value.attr in ("stderr", "__stderr__")
            if printed or written:
                found.append(node.lineno)
    return found


def test_every_word_to_the_user_goes_through_the_voice():
    speaking = {str(p.relative_to(REPO)): lines for p in PACKAGE.rglob("*.py")
                if p not in (VOICE, SPEAKS_BEFORE_HPCJAX) and (lines := stderr_writes(p))}
    assert not speaking, f"print to stderr outside hpcjax.values.voice (use say or relay): {speaking}"
    # the check sees what it looks for
    assert stderr_writes(VOICE) and stderr_writes(SPEAKS_BEFORE_HPCJAX)


@pytest.fixture(scope="module")
def bare_jax_venv():
    """A virtual environment with jax and numpy from PyPI and nothing else (no hpcjax), made
    once per JAX version and kept in the user's cache (a developer's second run skips the install).
    By uv where the test command installed it (from its cache, where this machine's own install
    left the same wheels: pip downloaded them again, 76 s of a worker on a bare machine), else pip."""
    import jax

    where = Path.home() / ".cache" / "hpcjax-tests" / f"bare-jax-{jax.__version__}"
    python = where / "bin" / "python"
    if not (where / ".complete").is_file():
        shutil.rmtree(where, ignore_errors=True)
        wanted = [f"{name}=={metadata.version(name)}" for name in ("jax", "jaxlib", "ml_dtypes", "numpy")]  # this machine's
        if subprocess.run([sys.executable, "-m", "uv", "--version"], capture_output=True).returncode == 0:
            venv.create(where, with_pip=False)
            install = [sys.executable, "-m", "uv", "pip", "install", "-q", "--python", str(python), *wanted]
        else:
            venv.create(where, with_pip=True)
            install = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *wanted]
        done = subprocess.run(install, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr
        (where / ".complete").touch()
    return python


@pytest.mark.jax
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


def test_no_name_hpcjax_exports_is_also_a_room():
    """Importing a subpackage sets it as an attribute of hpcjax: a room named like an exported
    function (a `report` room beside `hpcjax.report()`) would replace that function in any
    process that imported the room."""
    import hpcjax

    rooms = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert not rooms & set(hpcjax._LAZY), rooms & set(hpcjax._LAZY)


def test_no_import_circle():
    """Imports go one way: no module reaches itself through what it imports, at the top or inside
    a function (an import inside a function is laziness, never a way around a circle)."""
    def name_of(path: Path) -> str:
        parts = path.relative_to(REPO).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(p): p for p in PACKAGE.rglob("*.py")}
    graph = {m: sorted(i for i in imports_of(p) if i in modules and i != m) for m, p in modules.items()}
    state: dict[str, str] = {}  # "open" while its imports are walked, "done" after

    def walk(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        for imported in graph[module]:
            if state.get(imported) == "open":
                return path[path.index(imported):] + [imported] if imported in path else [module, imported]
            if imported not in state and (circle := walk(imported, path + [imported])):
                return circle
        state[module] = "done"
        return None

    for module in sorted(modules):
        if module not in state:
            circle = walk(module, [module])
            assert circle is None, " -> ".join(circle)


# "This machine" is written one way: the Cluster value THIS_MACHINE (hpcjax.hosts.cluster), never None,
# so no module converts between the two (issue 64 counted 12 places that did).
# (an argument that takes a name or a Cluster, None when not given, is the API's cluster= alone)
CLUSTER_AS_NONE = re.compile(r"\bcluster is (not )?None\b|(?<!str \| )\bCluster \| None\b|\bcluster or Cluster\(\)")


def test_this_machine_is_a_cluster_value_never_none():
    found = {f"{p.relative_to(REPO)}:{n}": line.strip() for p in PACKAGE.rglob("*.py")
             for n, line in enumerate(p.read_text().splitlines(), 1) if CLUSTER_AS_NONE.search(line)}
    assert not found, f"this machine written as None (use THIS_MACHINE and .remote): {found}"
    assert CLUSTER_AS_NONE.search("if cluster is not None and cluster.remote:")  # the check sees what it looks for
