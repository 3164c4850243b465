"""Lines a site needs that hpcjax does not model: extra `#SBATCH` options (a licence,
a burst buffer, a reservation), and commands before and after the launch.

An `#SBATCH` line is one option, on one line; an option hpcjax already sets is refused
with the option to use instead, because two values for one option are resolved by
sbatch silently (the last one wins) and hpcjax's own would no longer be the truth.
Prologue and epilogue lines are the user's shell code, used as written: one command
per line; the rendered script is checked with `bash -n`.
"""

from __future__ import annotations

import re

from hpcjax.values.errors import SpecError

# sbatch option (long or short name) -> the hpcjax option that sets it.
OWNED = {
    "job-name": "--job-name", "J": "--job-name", "nodes": "--nodes", "N": "--nodes",
    "ntasks": "--nodes, --gpus-per-node and --gpus-per-process", "n": "--nodes, --gpus-per-node and --gpus-per-process",
    "ntasks-per-node": "--gpus-per-node and --gpus-per-process", "tasks-per-node": "--gpus-per-node and "
    "--gpus-per-process", "gpus-per-node": "--gpus-per-node", "gpus": "--gpus-per-node", "G": "--gpus-per-node",
    "gres": "--gpus-per-node", "gpus-per-task": "--gpus-per-process", "time": "--time", "t": "--time",
    "cpus-per-task": "--cpus-per-task", "c": "--cpus-per-task", "mem": "--mem", "partition": "--partition",
    "p": "--partition", "account": "--account", "A": "--account", "qos": "--qos", "q": "--qos",
    "constraint": "--constraint", "C": "--constraint", "exclusive": "--exclusive", "exclude": "--exclude",
    "x": "--exclude", "output": "--output-dir",
    "o": "--output-dir", "error": "--output-dir", "e": "--output-dir", "signal": "nothing (hpcjax sets the warning "
    "signal its training catches)", "requeue": "--requeue", "no-requeue": "--requeue", "open-mode": "--requeue",
    "ntasks-per-gpu": "--gpus-per-process", "array": "the Python API's map (a job array of calls)",
    "wrap": "the command after --", "chdir": "nothing: the job runs where you submit it (cd there first)",
    "D": "nothing: the job runs where you submit it (cd there first)",
    "dependency": "--after JOBID[:ok|:any] (hpcjax checks the job exists and can still end as asked)",
    "d": "--after JOBID[:ok|:any] (hpcjax checks the job exists and can still end as asked)",
    "kill-on-invalid-dep": "--after (hpcjax sets it)",
}
OPTION = re.compile(r"(--?)([A-Za-z][A-Za-z0-9-]*)(?:[= ](.*))?")


def _one_line(kind: str, text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise SpecError(f"{kind} must be a non-empty string, got {text!r}", f"write each {kind} as one line of text")
    if any(ord(c) < 32 and c != "\t" or ord(c) == 127 for c in text):
        raise SpecError(f"{kind} {text!r} contains a newline or another control character",
                        f"give each {kind} as its own entry, one line each")
    return text


def check_sbatch_line(line: object) -> str:
    """One `#SBATCH` option, e.g. `--licenses=scratch`, `-L scratch` or `-Lscratch`. sbatch takes
    a long option by any unambiguous abbreviation (`--outp` is --output), so a name that begins
    an owned option is that option; a value with a space would be split by sbatch."""
    line = _one_line("#SBATCH line", line).strip()
    if line.startswith("#SBATCH"):
        line = line[len("#SBATCH"):].strip()
    short = re.fullmatch(r"-([A-Za-z])(.*)", line)  # -L scratch, or -Lscratch: the value attached
    match = None if short else OPTION.fullmatch(line)
    if short is None and (match is None or match[1] != "--" or len(match[2]) < 2):
        raise SpecError(f"#SBATCH line {line!r} is not one sbatch option",
                        "write it as sbatch takes it: --licenses=scratch, --reservation=big, -L scratch")
    name, value = (short[1], short[2].strip() or None) if short else (match[2], match[3])
    if value is not None and (not value.strip() or any(c.isspace() for c in value.strip())):
        raise SpecError(f"#SBATCH line {line!r}: the value {value.strip()!r} is empty or holds a space, where "
                        "sbatch splits an option", "give one option with one value: --licenses=scratch:2,fs")
    owned = name if name in OWNED else next((o for o in OWNED if len(name) > 1 and o.startswith(name)), None)
    if owned is not None:
        said = ("-" if len(owned) == 1 else "--") + owned + (f" (sbatch reads --{name} as --{owned})"
                                                             if owned != name else "")
        raise SpecError(f"#SBATCH line {line!r} sets {said}, which hpcjax already sets",
                        f"use {OWNED[owned]} instead")
    return line


def check_command_line(kind: str, line: object) -> str:
    return _one_line(f"{kind} line", line)


NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_node_name(name: object) -> str:
    """A node's name as sbatch --exclude takes it: one name (a list is given as several)."""
    if not isinstance(name, str) or not NODE_NAME.fullmatch(name):
        raise SpecError(f"exclude {name!r} is not a node's name", "name one node per --exclude (e.g. --exclude "
                        "node17); `sinfo -N` lists them", field="exclude")
    return name

