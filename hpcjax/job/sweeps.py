"""Sweeps from the command line: `--sweep lr=1e-3,3e-4 --sweep layers=2,4 -- python train.py
--lr {lr} --layers {layers}` is the cross product as one job array, each element's command with
its values in place of the placeholders.

A value replaces `{name}` inside one argument of the command, never splits or joins arguments,
and reaches the program as that argument (the script quotes every argument): no value can
become shell syntax. `{{` and `}}` are a literal brace. A placeholder without a --sweep of its
name, or a sweep no placeholder uses, is refused before anything is submitted.
"""

from __future__ import annotations

import itertools
import re

from hpcjax.values.errors import UsageError

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
MOST_ELEMENTS = 10_000  # SLURM's default MaxArraySize is 1001; more is a typo
FORM = "write --sweep NAME=V1,V2,... (e.g. --sweep lr=1e-3,3e-4) and use {NAME} in the command"


def parse(texts: list[str]) -> list[tuple[str, list[str]]]:
    """--sweep values -> [(name, values)] in the order given."""
    sweeps: list[tuple[str, list[str]]] = []
    for text in texts:
        name, sep, listed = text.partition("=")
        if not sep or not NAME.fullmatch(name):
            raise UsageError(f"--sweep {text!r} is not NAME=V1,V2,...", FORM)
        values = listed.split(",")
        if not listed or any(v == "" for v in values):
            raise UsageError(f"--sweep {text!r} has an empty value", FORM + "; give each value between commas")
        if len(set(values)) != len(values):
            raise UsageError(f"--sweep {text!r} repeats a value", "give each value once")
        if name in (n for n, _ in sweeps):
            raise UsageError(f"--sweep {name} is given twice", f"give all its values at once: --sweep {name}=A,B,C")
        sweeps.append((name, values))
    return sweeps


def placeholders(command) -> list[str]:
    return [m[1] for word in command for m in PLACEHOLDER.finditer(word) if m[1]]


def fill(word: str, values: dict[str, str]) -> str:
    return PLACEHOLDER.sub(lambda m: values[m[1]] if m[1] else m[0][0], word)


def expand(command, texts: list[str]) -> tuple[list[tuple[str, ...]], list[dict[str, str]]]:
    """(each element's command, each element's values), the first sweep varying slowest."""
    sweeps = parse(texts)
    names = [n for n, _ in sweeps]
    used = placeholders(command)
    unknown = sorted(set(used) - set(names))
    if unknown:
        raise UsageError(f"the command uses {{{unknown[0]}}}, but no --sweep {unknown[0]}=... is given"
                         + (f" (the sweeps: {', '.join(names)})" if names else ""),
                         f"add --sweep {unknown[0]}=V1,V2, or fix the name; a literal brace is written {{{{ }}}}")
    unused = [n for n in names if n not in used]
    if unused:
        raise UsageError(f"--sweep {unused[0]} is not used by the command: no {{{unused[0]}}} in it",
                         f"put {{{unused[0]}}} where the value goes, e.g. -- python train.py --{unused[0]} "
                         f"{{{unused[0]}}}")
    combos = [dict(zip(names, chosen)) for chosen in itertools.product(*(v for _, v in sweeps))]
    if len(combos) > MOST_ELEMENTS:
        raise UsageError(f"the sweep has {len(combos)} elements (at most {MOST_ELEMENTS})",
                         "sweep fewer values, or split the sweep")
    return [tuple(fill(word, values) for word in command) for values in combos], combos
