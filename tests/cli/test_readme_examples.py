"""Every command of the docs runs or says where it needs to (issues 24 and 47).

The README and every page of docs/ show code in fenced blocks that name their language. A shell
block (```sh) without a title holds commands that run on any machine with hpcjax installed, no
cluster needed: each one runs here as written, as a user would type it (a shell word split, in a
fresh directory beside the repository's profiles), and must exit 0 without an error. A shell
block that cannot run here says why in its title, one of MARKS (the site shows the title above
the block); what the dev cluster's tests run of those commands is on docs/testing.md."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from conftest import REPO, run_hpcjax
from support import unknown_words

# The titles a shell block may carry, and who runs its commands instead of this test.
MARKS = {
    "needs a GPU cluster": "a real cluster and your program: the dev cluster's tests run the same verbs",
    "on a fresh machine": "installs and the README's two commands: CI runs them from a fresh clone",
    "for development": "the test suite's and the docs site's own commands: scripts/test.sh runs them",
}
LANGUAGES = ("sh", "python", "toml", "text")
FENCE = re.compile(r'^```(?P<language>\S*)(?:\s+title="(?P<title>[^"]*)")?\s*$')
# A word a reader replaces (JOBID), a choice ([--json], a|b) or an elision (...): not runnable as written.
PLACEHOLDER = re.compile(r"\.\.\.|\[|\||\b(JOBID|NAME|FILE|IMAGE|RECIPE|CLUSTER|ID)\b")


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks_of(page: Path) -> list[tuple[int, str, str | None, list[str]]]:
    """(line, language, title, lines) of each fenced block of a page."""
    found, opened = [], None
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if opened is None:
            fence = FENCE.match(line)
            if fence:
                opened = (number, fence["language"], fence["title"], [])
        elif line.startswith("```"):
            found.append(opened)
            opened = None
        else:
            opened[3].append(line)
    assert opened is None, f"{page.name}:{opened[0]}: a block that is never closed"
    return found


def commands_of(lines: list[str]) -> list[str]:
    """Each command of a shell block: continuation lines joined, comments and blank lines left out."""
    commands, pending = [], ""
    for line in lines:
        text = line.strip()
        if not pending and (not text or text.startswith("#")):
            continue
        pending += text
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip() + " "
            continue
        commands.append(re.split(r"\s+#", pending)[0].strip())
        pending = ""
    return commands


def runnable() -> list:
    params = []
    for page in pages():
        for line, language, title, lines in blocks_of(page):
            if language == "sh" and title is None:
                for command in commands_of(lines):
                    where = f"{page.relative_to(REPO)}:{line}"
                    # a training run on the local backend starts JAX: the JAX tier's
                    marks = [pytest.mark.jax] if " train" in command else []
                    params.append(pytest.param(command, where, id=f"{where} {command[:60]}", marks=marks))
    return params


def test_every_block_names_its_language_and_every_shell_title_is_a_known_mark():
    bad = []
    for page in pages():
        for line, language, title, lines in blocks_of(page):
            where = f"{page.relative_to(REPO)}:{line}"
            if language not in LANGUAGES:
                bad.append(f"{where}: language {language!r}, not one of {LANGUAGES}")
            elif language == "sh" and title is not None and title not in MARKS:
                bad.append(f"{where}: title {title!r} is none of {sorted(MARKS)}")
            elif language == "sh" and title is None:
                bad += [f"{where}: {command!r} is not runnable as written: mark its block"
                        for command in commands_of(lines) if PLACEHOLDER.search(command)
                        or not command.startswith("hpcjax ")]
    assert not bad, "\n".join(bad)


def test_the_check_refuses_a_bad_block(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('```sh\nhpcjax status JOBID   # state\n```\n\n```sh title="later"\nhpcjax site\n```\n'
                    "```\nplain\n```\n")
    [(_, _, _, first), (_, _, title, _), (_, language, _, _)] = blocks_of(page)
    assert [bool(PLACEHOLDER.search(c)) for c in commands_of(first)] == [True]
    assert title not in MARKS and language not in LANGUAGES
    assert commands_of(["hpcjax render \\", "  --nodes 2 -- python x.py   # a comment", "", "# alone"]) == \
        ["hpcjax render --nodes 2 -- python x.py"]


def test_the_docs_have_commands_to_run():
    assert len(runnable()) >= 5, runnable()


@pytest.mark.parametrize("command, where", runnable())
def test_a_docs_command_runs_as_written(tmp_path, command, where):
    (tmp_path / "profiles").symlink_to(REPO / "profiles")
    words = shlex.split(command)
    result = run_hpcjax(*words[1:], cwd=tmp_path, env={"HPCJAX_HOME": str(tmp_path / "home")}, timeout=600)
    assert result.returncode == 0, (where, result.stderr[-3000:])
    assert "error:" not in result.stderr and "Traceback" not in result.stderr, (where, result.stderr[-3000:])
    if " -o " not in command:
        assert result.stdout.strip() or " submit " in f" {command}", f"{where}: an example that prints nothing"


def test_every_documented_hpcjax_command_names_a_verb_and_options_that_exist():
    """Run here or not, every `hpcjax ...` command of a shell block is one its parser knows."""
    bad, checked = [], 0
    for page in pages():
        for line, language, _title, lines in blocks_of(page):
            for command in commands_of(lines) if language == "sh" else ():
                for text in re.findall(r"(?:^|\$\()(hpcjax [^)]*)", command):
                    checked += 1
                    bad += [f"{page.relative_to(REPO)}:{line}: {word!r} in {text!r}" for word in unknown_words(text)]
    assert not bad, "\n".join(bad)
    assert checked >= 40, checked  # the docs' commands were found (57 when this was written)
    assert unknown_words("hpcjax submit --nodes 2 --no-such-option -- python x.py --also") == ["--no-such-option"]
    assert unknown_words("hpcjax runs show 1234 --json") == [] and unknown_words("hpcjax sbumit") == ["sbumit"]
