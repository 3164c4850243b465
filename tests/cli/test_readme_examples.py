"""The docs' examples that need no cluster run as written (issues 24 and 47): every `hpcjax
render`, `hpcjax container recipe` and `hpcjax profile` line of a code block in the README or a
page of docs/ that names concrete values, run as a user would (a shell, in a fresh directory
beside the repository's profiles). The other commands need a cluster (the dev cluster's tests
run them) or a real GPU cluster."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import REPO, run_hpcjax

RUNNABLE = ("hpcjax render ", "hpcjax container recipe", "hpcjax profile ")
PLACEHOLDERS = re.compile(r"\.\.\.|\[|\||\b(JOBID|NAME|FILE|IMAGE|RECIPE|P)\b")


def readme_examples() -> list[str]:
    found = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        found += examples_of(page.read_text().splitlines())
    return list(dict.fromkeys(found))


def examples_of(lines: list[str]) -> list[str]:
    found = []
    for i, line in enumerate(lines):
        text = line.strip()
        if not line.startswith("    ") or not text.startswith(RUNNABLE):
            continue
        while text.endswith("\\"):  # a command continued on the next line
            i += 1
            text = text[:-1] + lines[i].strip()
        text = re.split(r"\s{2,}#", text)[0].strip()  # a comment after the command
        if not PLACEHOLDERS.search(text):
            found.append(text)
    return found


def test_the_readme_has_examples_to_run():
    assert len(readme_examples()) >= 3, readme_examples()


@pytest.mark.parametrize("example", readme_examples())
def test_a_readme_example_runs_as_written(tmp_path, example):
    (tmp_path / "profiles").symlink_to(REPO / "profiles")
    words = shlex.split(example)
    result = run_hpcjax(*words[1:], cwd=tmp_path, env={"HPCJAX_HOME": str(tmp_path / "home")})
    assert result.returncode == 0, result.stderr
    assert "error:" not in result.stderr and "Traceback" not in result.stderr
    if " -o " not in example:
        assert result.stdout.strip(), "an example that prints nothing"
