"""Every `hpcjax.NAME(...)` the README and the docs pages spell resolves after a plain
`import hpcjax`, as a user types it (issue 34: `hpcjax.rank.progress(1)` raised AttributeError)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import REPO

CALLED = re.compile(r"\bhpcjax(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?=\()")


def documented_names() -> list[str]:
    text = "".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])
    return sorted(set(CALLED.findall(text)))


def test_the_documents_call_some_names():
    assert {"hpcjax.rank.progress", "hpcjax.remote", "hpcjax.Data"} <= set(documented_names())


@pytest.mark.jax  # hpcjax.train's names import JAX
def test_every_documented_name_resolves_after_import_hpcjax():
    """In a fresh interpreter, attribute by attribute from `hpcjax`, as the user's code does."""
    program = ("import hpcjax, sys\n"
               "bad = []\n"
               f"for name in {documented_names()!r}:\n"
               "    value = hpcjax\n"
               "    try:\n"
               "        for part in name.split('.')[1:]:\n"
               "            value = getattr(value, part)\n"
               "    except AttributeError as error:\n"
               "        bad.append(f'{name}: {error}')\n"
               "print('\\n'.join(bad))\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
