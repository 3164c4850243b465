"""What hpcjax tells its users names only things that exist (issue 47: a hint said "build it
with launch.sweeps", a module that was gone).

Every string the package holds (its errors, hints, help, progress lines and docstrings) is read
from the source, and what it names is looked up: an `hpcjax VERB ...` command (in backquotes,
or a verb followed by its options) must be one the parser knows, options included; an
`HPCJAX_*` variable must be one hpcjax.protocol.envnames defines; a dotted name in a room of
hpcjax (`launch.steps`, `hpcjax.rank.progress`) and a path of the repository (`docs/failures.md`,
`profiles/examples.toml`) must exist."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from conftest import REPO
from support import unknown_words
from test_docs import ROOMS, missing

from hpcjax.protocol.envnames import NAMES, RETIRED

QUOTED_COMMAND = re.compile(r"`(hpcjax [^`]+)`")
COMMAND_WITH_OPTIONS = re.compile(r"\bhpcjax ((?:[a-z][a-z-]* ){1,2}--[a-z][a-z-]*(?: [^\s,;:()'\"`]+)*)")
VARIABLE = re.compile(r"\bHPCJAX_[A-Z0-9_]*[A-Z0-9]\b")
DOTTED = re.compile(rf"\b(?:hpcjax\.)?(?:{'|'.join(sorted(ROOMS))})(?:\.[a-z_][a-z0-9_]*)+\b")
PATH = re.compile(r"\b(?:hpcjax/)?(?:docs|profiles|examples|scripts|templates|containers|slurm|bench)/[A-Za-z0-9_./-]*[A-Za-z0-9]")
FILE_SUFFIXES = ("py", "json", "jsonl", "toml", "log", "sh", "html", "txt", "md", "sif", "pkl", "png", "yml", "sqlite",
                 "conf")


@functools.lru_cache(maxsize=1)
def known_variables() -> set[str]:
    """The environment's HPCJAX_* variables, retired ones, and the HPCJAX_* names the package
    defines as Python constants (not variables of the environment). Read when a test runs."""
    return set(NAMES) | set(RETIRED) | {target.id for module in (REPO / "hpcjax").rglob("*.py") for node in ast.walk(ast.parse(module.read_text()))
            if isinstance(node, ast.Assign) for target in node.targets
            if isinstance(target, ast.Name) and target.id.startswith("HPCJAX_")}


def strings(path: Path):
    """(line, text) of every string constant of a module, f-strings' literal parts included."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def wrong_names(text: str) -> list[str]:
    """What a text names that does not exist."""
    wrong = []
    for command in QUOTED_COMMAND.findall(text) + ["hpcjax " + c for c in COMMAND_WITH_OPTIONS.findall(text)]:
        verbs, _, rest = command.removeprefix("hpcjax ").partition(" ")
        if "{" in command or verbs.endswith(":"):
            continue  # a format string's field (the value comes at run time); a progress line's prefix (`hpcjax site: ...`)
        for verb in verbs.split("/"):  # `hpcjax status/logs/cancel`
            wrong += [f"{word!r} in {command!r}" for word in unknown_words(f"hpcjax {verb} {rest}")]
    wrong += [name for name in VARIABLE.findall(text) if name not in known_variables()]
    for dotted in DOTTED.findall(text):
        if dotted.rsplit(".", 1)[-1] not in FILE_SUFFIXES and missing(dotted if dotted.startswith("hpcjax.")
                                                                     else f"hpcjax.{dotted}"):
            wrong.append(dotted)
    wrong += [path for path in PATH.findall(text) if missing(path)]
    return wrong


def test_every_name_hpcjax_says_exists():
    bad, read = [], 0
    for module in sorted((REPO / "hpcjax").rglob("*.py")):
        for line, text in strings(module):
            read += 1
            bad += [f"{module.relative_to(REPO)}:{line}: {name}" for name in wrong_names(text)]
    assert read > 2000, read  # every module's strings were read
    assert not bad, "\n".join(bad)


def test_the_check_finds_what_does_not_exist():
    assert wrong_names("hint: build it with launch.sweeps, or `hpcjax submit --sweeep lr=1`") == \
        ["'--sweeep' in 'hpcjax submit --sweeep lr=1'", "'--sweeep' in 'hpcjax submit --sweeep lr=1'", "launch.sweeps"]
    assert wrong_names("set HPCJAX_HANG_FLOR, see docs/no-such-page.md") == ["HPCJAX_HANG_FLOR", "docs/no-such-page.md"]
    assert wrong_names("hpcjax logs --tail 5 JOB; launch.steps; HPCJAX_HANG_FLOOR; docs/failures.md; train.py") == []
    assert wrong_names("hpcjax does not know it; `hpcjax {verb} --x`; `hpcjax status/logs JOB`") == []
    assert wrong_names("`hpcjax status/lgos JOB`; hpcjax/containers/runtimes/; hpcjax/nothing/") == ["'lgos' in 'hpcjax status/lgos JOB'"]
