"""mkdocs hook (mkdocs.yml `hooks:`): the reference pages that cannot drift, made at every build
from the one place that defines them:

  reference/cli.md          every verb and option, from the command line's argparse parsers
                            (hpcjax.cli.build_parser)
  reference/environment.md  every HPCJAX_* variable hpcjax reads, from hpcjax.protocol.envnames
  reference/api.md          every name `import hpcjax` gives (hpcjax._LAZY), each rendered from its
                            docstring and signature by mkdocstrings
  changelog.md              CHANGELOG.md at the top of the repository (one file, two places to read it)
"""

from __future__ import annotations

import argparse

from mkdocs.structure.files import File


def on_files(files, config):
    for uri, make in (("reference/cli.md", cli_page), ("reference/environment.md", environment_page),
                      ("reference/api.md", api_page), ("changelog.md", changelog_page)):
        files.append(File.generated(config, uri, content=make()))
    return files


def cell(text: object) -> str:
    """Text as Markdown reads it literally: in a table cell, brackets not taken for links."""
    text = str(text or "").replace("\n", " ")
    for char, escaped in (("\\", "\\\\"), ("|", "\\|"), ("[", "\\["), ("]", "\\]"), ("<", "&lt;"), ("*", "\\*"),
                          ("_", "\\_")):
        text = text.replace(char, escaped)
    return text


def cli_page() -> str:
    from hpcjax.cli import build_parser

    parser = build_parser()
    [verbs] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    lines = ["# Command line", "", "Every verb of `hpcjax` and its options, read from the parsers at each build of these",
             "docs (`hpcjax VERB --help` says the same).", ""]
    helps = {choice.dest: choice.help for choice in verbs._choices_actions}
    for name, sub in verbs.choices.items():
        lines += [f"## hpcjax {name}", "", cell(helps.get(name)), "", "    " + sub.format_usage().strip().replace(
            "\n", "\n    "), ""]
        rows = [a for a in sub._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
        if rows:
            lines += ["| option | value | what it does |", "|---|---|---|"]
            for action in rows:
                names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest}`"
                value = "" if action.nargs == 0 else cell(action.metavar or action.dest.upper())
                help_text = cell(action.help % {"default": action.default} if action.help and "%(default)" in
                                 action.help else action.help)
                lines.append(f"| {names} | {value} | {help_text} |")
            lines.append("")
        nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        for group in nested:
            for inner, inner_parser in group.choices.items():
                lines += [f"### hpcjax {name} {inner}", "", "    " + inner_parser.format_usage().strip().replace(
                    "\n", "\n    "), ""]
    return "\n".join(lines) + "\n"


def environment_page() -> str:
    from hpcjax.protocol.envnames import NAMES, RETIRED

    lines = ["# Environment variables", "", "Every `HPCJAX_*` variable hpcjax reads, from the one table that names",
             "them (`hpcjax.protocol.envnames`): a misspelt one in a job's `--env` or a profile's `env` is",
             "refused with the name meant.", "", "| variable | set by | what it does |", "|---|---|---|"]
    lines += [f"| `{name}` | {cell(who)} | {cell(what)} |" for name, (who, what) in NAMES.items()]
    lines += ["", "Retired, refused with what replaced them: " + ", ".join(
        f"`{old}` (now `{new}`)" for old, new in RETIRED.items()) + "."]
    return "\n".join(lines) + "\n"


def api_page() -> str:
    import hpcjax

    lines = ["# Python API", "", "Every name a plain `import hpcjax` gives, from its docstring (the table of names is",
             "`hpcjax._LAZY`; each loads its module when first used).", ""]
    for name, (module, attribute) in hpcjax._LAZY.items():
        lines += [f"## hpcjax.{name}", "", f"::: {module}.{attribute}", "    options:", "      show_root_heading: false",
                  ""]
    return "\n".join(lines) + "\n"


def changelog_page() -> str:
    from pathlib import Path

    return (Path(__file__).resolve().parent.parent / "CHANGELOG.md").read_text()
