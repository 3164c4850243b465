"""The table of HPCJAX_* variables (hpcjax/protocol/envnames.py) is the names the code reads: a name in a
string of the package or the batch script's template that the table lacks (or one the table names
that nothing reads) fails here, so a job's --env is checked against the truth."""

from __future__ import annotations

import re

from conftest import REPO
from hpcjax.protocol import envnames

LITERAL = re.compile(r"""["'](HPCJAX_[A-Z0-9_]*[A-Z0-9])["']""")  # a name in a Python string
SHELL = re.compile(r"\$\{?(HPCJAX_[A-Z0-9_]*[A-Z0-9])")  # a name the template's script reads


def names_in_code() -> set[str]:
    found = set()
    for path in (REPO / "hpcjax").rglob("*.py"):
        if path.name != "envnames.py":
            found |= set(LITERAL.findall(path.read_text()))
    for path in (REPO / "templates").glob("*.j2"):
        found |= set(SHELL.findall(path.read_text()))
    return found


def test_the_table_is_the_names_the_code_reads():
    read = names_in_code()
    assert read - set(envnames.NAMES) - set(envnames.RETIRED) == set(), "read but not in hpcjax/protocol/envnames.py"
    assert set(envnames.NAMES) - read == set(), "in hpcjax/protocol/envnames.py but read nowhere"


def test_a_name_close_to_one_is_refused_with_it_and_others_pass():
    import pytest

    from hpcjax.values.errors import SpecError

    envnames.check(["HPCJAX_HANG_FLOOR", "PATH", "MY_HPCJAX_THING"])
    with pytest.raises(SpecError, match="did you mean HPCJAX_INIT_TIMEOUT"):
        envnames.check(["HPCJAX_INIT_TIMOUT"])
