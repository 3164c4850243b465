"""The docs are true (issue 47): the site builds with warnings as errors, the README stays a
landing page, and every module, function and file a page names in backquotes exists."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import REPO

PAGES = sorted([REPO / "README.md", REPO / "CHANGELOG.md", *(REPO / "docs").rglob("*.md")])
ROOMS = {p.name for p in (REPO / "hpcjax").iterdir() if (p / "__init__.py").is_file()}
TOP = {"hpcjax", "tests", "scripts", "bench", "slurm", "containers", "templates", "examples", "docs", "profiles", ".ci"}
QUOTED = re.compile(r"`([^`\n]+)`")
# Names that look like the repository's paths and are not: TensorBoard's tags of a run.
NOT_PATHS = {"train/loss", "train/learning_rate", "train/grad_norm"}


@pytest.mark.jax  # a build, like the package's (tests/conftest.py's tiers): seconds the pure tier need not wait for
def test_the_docs_site_builds_with_warnings_as_errors(tmp_path):
    """mkdocs.yml's site: every page in the nav, every link and anchor found, the generated
    reference pages (scripts/docs_reference.py) and the API's docstrings rendered."""
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                           cwd=REPO, capture_output=True, text=True, timeout=300,
                           env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert built.returncode == 0, built.stdout + built.stderr
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "hpcjax submit" in cli and "--gpus-per-node" in cli and "hpcjax jupyter" in cli
    assert "HPCJAX_HANG_FLOOR" in (tmp_path / "site" / "reference" / "environment" / "index.html").read_text()
    assert "ScalingConfig" in (tmp_path / "site" / "reference" / "api" / "index.html").read_text()


def test_the_readme_is_a_landing_page():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 300, len(lines)
    text = "\n".join(lines)
    assert "bash scripts/main.sh" in text and "bash scripts/test.sh" in text  # the two commands


@lru_cache(maxsize=None)
def defined_names(path: Path) -> frozenset[str]:
    """The names a module defines at its top (functions, classes, assignments, imports), and each
    class's own (methods, fields): what `module.name` or `module.Class.name` may mean."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                names |= {f"{node.name}.{n.name}" for n in node.body
                          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
                names |= {f"{node.name}.{n.target.id}" for n in node.body
                          if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            names |= {e.id for t in node.targets if isinstance(t, ast.Tuple) for e in t.elts if isinstance(e, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def module_path(dotted: list[str]) -> tuple[Path | None, list[str]]:
    """The longest prefix of `dotted` that is a module or package of the repository, and the rest."""
    for cut in range(len(dotted), 0, -1):
        base = REPO.joinpath(*dotted[:cut])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate, dotted[cut:]
    return None, dotted


def missing(name: str) -> bool:
    """Whether a backquoted name that looks like the repository's (a dotted hpcjax name, or a path
    under one of its folders) names nothing there."""
    name = name.strip().rstrip("()").split("(")[0]
    if re.fullmatch(r"hpcjax(\.[A-Za-z_][A-Za-z0-9_]*)+", name):
        path, rest = module_path(name.split("."))
        if path is None:
            return True
        if not rest or (path.name == "__init__.py" and "__getattr__" in defined_names(path)):
            return False  # a module, or a name its package gives lazily (`hpcjax.Trainer`, `hpcjax.rank.progress`)
        return ".".join(rest[:2]) not in defined_names(path) and rest[0] not in defined_names(path)
    if re.fullmatch(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.*-]+)+/?", name) and "*" not in name and name not in NOT_PATHS \
            and not re.search(r"[A-Z]{2,}", name):  # VERSION, JOB: a placeholder, not a file
        first = name.split("/")[0]
        places = [REPO / name] * (first in TOP) + [REPO / "hpcjax" / name] * (first in ROOMS)
        if not places:
            return False  # a path on a cluster or in a run directory, not the repository's
        return not any(where.exists() or where.with_suffix(".py").exists() for where in places)
    return False


def test_the_check_finds_what_is_not_there():
    assert missing("hpcjax.launch.sweeps") and missing("rank/stacks") and missing("hpcjax.protocol.contract.layout_env")
    assert not missing("hpcjax.protocol.contract.Layout.env") and not missing("rank/watch/stacks")
    assert not missing("hpcjax.rank.progress(step)") and not missing("tests/test_rooms.py")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_name_a_page_quotes_exists(page):
    text = re.sub(r"^(    |\t).*$", "", page.read_text(), flags=re.M)  # code blocks show commands, not names
    bad = sorted({name for name in QUOTED.findall(text) if missing(name)})
    assert not bad, f"{page.relative_to(REPO)} names what does not exist: {bad}"


# What ran where is said on docs/testing.md, not between the how-to passages (issue 47): a how-to
# page links there instead.
PROVENANCE = re.compile(r"What ran for real:(?! \[How hpcjax is tested\])|\b[Tt]ested (?:for real|on the dev cluster)"
                        r"|\(tested\)|\b[Ss]eed \d{3}\b")
NOT_HOW_TO = {"testing.md", "development.md", "architecture.md", "CHANGELOG.md"}


def test_what_ran_for_real_is_said_on_the_testing_page_only():
    assert PROVENANCE.search("What ran for real: the dev cluster") and PROVENANCE.search("Seed 000's example")
    assert not PROVENANCE.search("What ran for real: [How hpcjax is tested](testing.md#preflight).")
    bad = [f"{page.relative_to(REPO)}: {found.group(0)!r}" for page in PAGES if page.name not in NOT_HOW_TO
           for found in PROVENANCE.finditer(page.read_text())]
    assert not bad, bad


def test_the_files_page_names_every_file_of_the_contract_and_the_run_directory():
    """docs/reference/files.md is written by hand; the names it must hold are read from the modules
    that own them (a log name of the contract, an entry of the run directory), so a new file
    cannot go unlisted."""
    from hpcjax.protocol import contract, rundir

    quoted = {name.rstrip("/") for name in QUOTED.findall((REPO / "docs" / "reference" / "files.md").read_text())}
    logs = {value.replace("%j", "JOB").replace("%t", "R") for name, value in vars(contract).items()
            if name.isupper() and isinstance(value, str) and value.startswith("%j-")}
    entries = {value for name, value in vars(rundir).items() if name.isupper() and isinstance(value, str)
               and re.fullmatch(r"[a-z][a-z.-]+", value) and getattr(rundir.RunDir, name.lower(), None) is not None}
    assert len(logs) >= 8 and len(entries) >= 8, (logs, entries)
    assert not (logs | entries) - quoted, sorted((logs | entries) - quoted)


def test_nothing_points_outside_the_repository():
    """No page, module, script or template names a path that climbs out of the repository (the
    documents the project grew from are not shipped with it): a `../` path must reach a file of it."""
    tracked = subprocess.run(["git", "ls-files", "hpcjax", "docs", "scripts", "templates", "slurm", "containers",
                              "README.md", "mkdocs.yml", "CHANGELOG.md"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    bad = []
    for name in tracked:
        path = REPO / name
        try:
            text = path.read_text()
        except (UnicodeDecodeError, IsADirectoryError):
            continue
        for climb in re.findall(r"(?:\.\./)+[A-Za-z0-9_.-]+", text):
            where = (path.parent / climb).resolve()
            if not (where.is_relative_to(REPO.resolve()) and where.exists()):
                bad.append(f"{name}: {climb}")  # outside, or nothing there (read from the repository's root)
    assert not bad, bad
