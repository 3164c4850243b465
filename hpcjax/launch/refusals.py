"""The check step: every refusal a submission can meet, before anything is written, shipped or
submitted (so a dry run that passes is a submit that starts). Each check runs once per
submission, whatever the entry point:

  this machine   the job records can be written; uploads, the working tree's size, Data
                 directories and their links; a multi-node job's storage is shared where the
                 backend needs it to be
  where it goes  what the backend wants to know there (programs, paths, jobs, configuration),
                 and the cluster's remote directory, asked in ONE round trip over SSH (a probe),
                 or directly on this machine; then the backend's own refusals from the answers
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from hpcjax.catalog import records
from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.hosts import ship
from hpcjax.hosts.here import node_local_reason
from hpcjax.launch import uploads
from hpcjax.values.validate import require_utf8

MARK = "@@hpcjax-probe"


@dataclass(frozen=True)
class Probe:
    """What the check step learned of where the job goes (a value: the steps after read it)."""

    home: str = ""  # the cluster's remote directory, absolute there ('' on this machine)
    missing_programs: frozenset = frozenset()
    missing_paths: frozenset = frozenset()
    answers: dict = field(default_factory=dict)  # name -> (exit code, output) of each command asked
    tree_files: tuple = ()  # the working tree's files that are shipped, listed (and size-checked) once
    tree_bytes: int = 0

    def answer(self, name: str) -> tuple[int, str]:
        return self.answers.get(name, (127, ""))


def check(sub) -> Probe:
    """Every refusal of this submission, no side effect; the probe, for the steps after."""
    records.require_writable()
    require_utf8("the working directory", os.getcwd())  # the job's record and script name it
    if (sub.spec.on or sub.hold) and not sub.backend.holds_allocations:
        raise UsageError(f"the {sub.backend.name} backend has no allocation to hold" + (
            f" (--on {sub.spec.on})" if sub.spec.on else ""), "holds are SLURM's: use --backend slurm (here or with "
            "--cluster), or drop --on and run the job on its own")
    names, total = check_tree(sub) if sub.cluster.remote else ((), 0)
    if sub.cluster.remote:
        uploads.check_uploads(sub.uploads, list(names), sub.tree, sub.ship_code)
    for path in sub.local_data():
        uploads.check_links(Path(path), f"Data({path!r})")
    if sub.call is not None:  # the API's function and arguments travel pickled: one that cannot is said now
        sub.call.check()
    for what, path in sub.storage_paths():
        require_shared(sub, what, path)
    wants = sub.backend.wants(sub)
    if sub.call is not None and sub.cluster.remote:  # a call's code may travel by value: which Python loads it
        wants = {**wants, "commands": {**wants.get("commands", {}), "python": [
            sub.cluster.python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]}}
    probe = dataclasses.replace(ask(sub, wants), tree_files=names, tree_bytes=total)
    sub.backend.check(sub, probe)
    if sub.call is not None and sub.cluster.remote:
        sub.call.check_python(probe.answer("python"), sub.cluster.name)
    if sub.cluster.remote and "rsync" in probe.missing_programs:
        raise HpcjaxError(f"`rsync` is not installed on {sub.cluster.name}", "hpcjax ships code with rsync; ask "
                          "the site for it, or run hpcjax on the login node itself")
    return probe


def check_tree(sub) -> tuple[tuple[str, ...], int]:
    """The files the submission ships (none here) and their size, refused when over the limit."""
    if not sub.ship_code:
        return (), 0
    names = ship.tree_files(sub.tree, tuple(sub.kept_run_dirs().values()))
    return tuple(names), ship.check_size(sub.tree, names, sub.limit_mb)


def require_shared(sub, what: str, path: str) -> None:
    """A multi-node job's files must be where every node sees them, on a backend whose nodes share
    only what is on shared storage (SLURM's; not this machine's processes)."""
    nodes = sub.spec.layout.nodes
    if not sub.backend.shared_storage or nodes < 2 or sub.cluster.remote:
        return
    reason = node_local_reason(path)
    if reason:
        raise UsageError(f"{what} {str(path)!r} is not shared storage for a {nodes}-node job: {reason}",
                         "use a directory every node mounts (home, project or scratch space), e.g. "
                         "RunConfig(storage_path='~/hpcjax-results')")


def ask(sub, wants: dict) -> Probe:
    """The probe's questions answered: over SSH in one round trip, or here directly."""
    programs, paths = list(wants.get("programs", ())), [p for p in wants.get("paths", ()) if p]
    commands = dict(wants.get("commands", {}))
    if not sub.cluster.remote:
        answers = {}
        for name, argv in commands.items():
            if shutil.which(argv[0]) is None:
                continue
            done = subprocess.run(argv, capture_output=True, text=True)
            answers[name] = (done.returncode, done.stdout + done.stderr)
        return Probe(missing_programs=frozenset(p for p in programs if shutil.which(p) is None),
                     missing_paths=frozenset(p for p in paths if not Path(p).exists()), answers=answers)
    return ask_there(sub.cluster, programs + ["rsync"], paths, commands)


def ask_there(cluster, programs: list[str], paths: list[str], commands: dict[str, list[str]]) -> Probe:
    """One shell on the login node answers everything: the remote directory (expanded, and usable
    or makeable: nothing is made), the programs and paths that are missing, each command's output."""
    host = cluster.host()
    host.connect()  # a wrong host, a refused key: a clear error within seconds
    parts = [f"printf '{MARK} home\\n'; {cluster.home_script(create=False)}; printf '{MARK} code %s\\n' $?"]
    for program in programs:
        parts.append(f"command -v {shlex.quote(program)} >/dev/null || printf '{MARK} program %s\\n' "
                     f"{shlex.quote(program)}")
    for path in paths:
        parts.append(f"[ -e {shlex.quote(path)} ] || printf '{MARK} path %s\\n' {shlex.quote(path)}")
    for name, argv in commands.items():
        parts.append(f"printf '{MARK} answer {name}\\n'; {shlex.join(argv)} 2>&1; printf '{MARK} code %s\\n' $?")
    done = host.run(["sh", "-c", "\n".join(parts)])
    home, missing_programs, missing_paths, answers, current, lines = "", set(), set(), {}, None, []
    for line in done.stdout.splitlines():
        if not line.startswith(MARK + " "):
            lines.append(line)
            continue
        kind, _, value = line[len(MARK) + 1:].partition(" ")
        if kind == "program":
            missing_programs.add(value)
        elif kind == "path":
            missing_paths.add(value)
        elif kind in ("home", "answer"):
            current, lines = value or "home", []
        elif kind == "code" and current:
            if current == "home":
                if value != "0":
                    raise HpcjaxError(f"the remote directory {cluster.remote_dir} is not usable on {cluster.name}: "
                                      f"{' '.join(lines) or done.stderr.strip()}",
                                      'set remote_dir in the profile to a directory you can write there, e.g. '
                                      'remote_dir = "$SCRATCH/hpcjax"')
                home = lines[-1].strip() if lines else ""
            else:
                answers[current] = (int(value), "\n".join(lines))
            current = None
    if not home:
        raise HpcjaxError(f"could not ask {cluster.name} what hpcjax needs there: {done.stderr.strip()[-300:]}",
                          f"try `ssh {cluster.destination} sh -c true` in a terminal")
    return Probe(home=home, missing_programs=frozenset(missing_programs), missing_paths=frozenset(missing_paths),
                 answers=answers)
