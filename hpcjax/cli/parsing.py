"""argparse the house way, for every verb: its errors in the house format (`error: ...`, a blank
line, `hint: ...`, exit 2), and option values that themselves start with "--". Light on purpose:
`hpcjax --help` imports this and the verb table, nothing else of the command line."""

from __future__ import annotations

import argparse

from hpcjax.values.errors import UsageError

# Options whose value may itself start with "--" (`--container-flag --cleanenv`);
# argparse would take such a value for an option of its own.
DASHED_VALUES = ("--container-flag",)


class Parser(argparse.ArgumentParser):
    """argparse with the house error format: `error: ...`, blank line, `hint: ...`, exit 2."""

    def error(self, message: str):  # type: ignore[override]
        stray = message.partition("unrecognized arguments: ")[2].split()
        if stray and not stray[0].startswith("-"):  # a program's words where options belong
            raise UsageError(message, f"the job's command goes after `--`: hpcjax VERB [options] -- {' '.join(stray)}"
                                      f"; see `{self.prog} --help`")
        raise UsageError(message, f"see `{self.prog} --help`")


def join_dashed_values(argv: list[str]) -> list[str]:
    """`--container-flag --cleanenv` -> `--container-flag=--cleanenv`, so argparse reads it as a value."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in DASHED_VALUES and i + 1 < len(argv):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out
