"""How a user's value becomes one word of the rendered script, written once.

The rule (docs/first-cluster.md, "Values with variables"): in an `--env` value and a `--bind` path,
`$NAME` and `${NAME}` are the job's variables and expand on the compute node when the
script runs (`--bind '$SCRATCH/data:/data'`, `--env 'PATH=/opt/bin:$PATH'`); `$$` is one
literal `$`; everything else is literal, whatever it holds (`$(...)`, backquotes, `;`,
quotes, globs, spaces): the literal parts are single-quoted, each variable is written
`"${NAME}"`, so nothing but the variable's value ever reaches the shell, and that value
is never split or globbed. The local backend applies the same rule in Python (`expand`).
Standard library only: the rank side's runtime table uses it.
"""

from __future__ import annotations

import re
import shlex

# `$$`, `${NAME}` or `$NAME`; any other `$` is literal.
_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def pieces(text: str) -> list[tuple[str, str]]:
    """[("text", literal) or ("var", NAME), ...] in order; adjacent literals joined."""
    out: list[tuple[str, str]] = []

    def literal(part: str) -> None:
        if not part:
            return
        if out and out[-1][0] == "text":
            out[-1] = ("text", out[-1][1] + part)
        else:
            out.append(("text", part))

    at = 0
    for match in _REFERENCE.finditer(text):
        literal(text[at:match.start()])
        if match[0] == "$$":
            literal("$")
        else:
            out.append(("var", match[1] or match[2]))
        at = match.end()
    literal(text[at:])
    return out


def variables(text: str) -> list[str]:
    """The names of the variables `text` refers to, in order."""
    return [value for kind, value in pieces(text) if kind == "var"]


def word(text: str) -> str:
    """`text` as one shell word: its variables expand, nothing else does."""
    parts = [f'"${{{value}}}"' if kind == "var" else literal(value) for kind, value in pieces(text)]
    return "".join(parts) or "''"


def literal(text: str) -> str:
    """`text` as one shell word that never expands (shlex.quote, and a leading = quoted too)."""
    quoted = shlex.quote(text)
    # `export A==x` and `cd =` are valid bash that read as typos (shellcheck): a leading = is quoted.
    return f"'{text}'" if quoted == text and text.startswith("=") else quoted


def expand(text: str, environ) -> str:
    """`text` with its variables replaced from `environ` (an unset one is empty, as in the shell)."""
    return "".join(environ.get(value, "") if kind == "var" else value for kind, value in pieces(text))
