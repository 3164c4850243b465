"""How each entry point of the seam matrix starts its cell's job, as a user starts it: the CLI
(submit, hpcjax train through submit, smoke, relaunch, a sweep's element, a chain's second link)
or the Python API (Trainer.fit, a remote function's .submit and .map, from a script). Each
returns a Started: the job the follow-ups look at, and how to wait for its starter."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from support import MODEL
from targets import Target

SUBMITTED = re.compile(r"(?:submitted job|local job|queued job) (\d+(?:_\d+|\.s\d+)?)\b")
DRIVER = Path(__file__).resolve().parent / "api_driver.py"
HANG_SHORT = {"HPCJAX_HANG_FLOOR": "10", "HPCJAX_HANG_CEILING": "300"}


def walltime(follow_up: str) -> str:
    """A cell's time limit. A hang_default cell holds its GPUs for five minutes, and a whole-cluster
    job queued behind it would hold back every job queued after that one (SLURM starts jobs in
    order) unless backfill may start them first: it may only when they would end before the
    whole-cluster job could start. The hang cells' two hours leave room for the tests' usual hour."""
    return "02:00:00" if follow_up == "hang_default" else "00:15:00"


@dataclass
class Started:
    job: str  # the cell's job: what every follow-up looks at
    process: subprocess.Popen  # the starter (it waits for the job, as a user's would)
    kind: str  # what the catalog calls it
    run_dir: bool = False  # whether the job has a run directory (fetch and report bring it)
    probe: bool = True  # whether its ranks run probe.py (and say "probe rank ...")
    release: str = ""  # the file its ranks wait for (mode wait)
    others: list = field(default_factory=list)  # (release path) of jobs the cell waits on (a chain's first)
    said: list = field(default_factory=list)  # the starter's stderr lines read so far
    others_released: bool = False
    pending: bool = False  # a cancel comes while it waits to start (it never runs)

    def finish(self, timeout: float = 900) -> tuple[int, str, str]:
        out, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, out, "".join(self.said) + err


def mode_of(follow_up: str) -> str:
    return {"stacks": "wait", "requeue": "wait", "cancel": "wait", "hang_short": "hang",
            "hang_default": "hang"}.get(follow_up, "ok")


def env_of(follow_up: str) -> dict:
    return HANG_SHORT if follow_up == "hang_short" else {}


def env_options(env: dict) -> list[str]:
    return [x for key, value in env.items() for x in ("--env", f"{key}={value}")]


def first_id(process: subprocess.Popen, started: Started | None = None, stream: str = "stdout") -> str:
    """The job id a starter prints: submit's first stdout line, or the line on stderr that says so."""
    if stream == "stdout":
        line = process.stdout.readline().strip()
        assert re.fullmatch(r"\d+(_\d+|\.s\d+)?", line), (line, process.stderr.read() if process.poll() is not None else "")
        return line
    said = []
    for line in process.stderr:
        said.append(line)
        found = SUBMITTED.search(line)
        if found:
            if started is not None:
                started.said = said
            return found[1]
    raise AssertionError("no job id in: " + "".join(said) + process.stdout.read())


def submit(t: Target, follow_up: str, release: str) -> Started:
    mode = mode_of(follow_up)
    p = t.start("submit", *t.layout(), "--time", walltime(follow_up), "--wait", *env_options(env_of(follow_up)),
                "--", "python3", "probe.py", mode, release)
    return Started(first_id(p), p, "command", release=release)


def train(t: Target, follow_up: str, release: str) -> Started:
    steps = {"watch": "8", "follow": "8", "requeue": "60", "stacks": "60"}.get(follow_up, "400")
    program = ["probe.py", "train-hang"] if mode_of(follow_up) == "hang" else ["-m", "hpcjax", "train"]
    p = t.start("submit", *t.layout(), "--time", walltime(follow_up), "--wait", *env_options(env_of(follow_up)), "--",
                "python3", *program, "--strategy", "dp", "--steps", steps, "--checkpoint-every", "5",
                "--run-dir", "runs/train", *MODEL)
    # a wrapped `hpcjax train` (its rank 1 stuck) is a command to the catalog, which reads the command line
    return Started(first_id(p), p, "command" if program[0] == "probe.py" else "train", run_dir=True, probe=False)


def smoke(t: Target, follow_up: str, release: str) -> Started:
    # Its checks take seconds and cannot be held: a cancel comes while SLURM holds it pending.
    later = ["--sbatch=--begin=now+120"] if follow_up == "cancel" and t.name != "local" else []
    p = t.start("smoke", *t.layout(), *later, "--json")
    started = Started("", p, "smoke", probe=False, pending=bool(later))
    started.job = first_id(p, started, stream="stderr")
    return started


def relaunch(t: Target, follow_up: str, release: str) -> Started:
    first = t.hpcjax("submit", *t.layout(), "--time", walltime(follow_up), "--wait", "--", "python3", "probe.py", "ok",
                     release, timeout=600)
    assert first.returncode == 0, first.stderr
    p = t.start("relaunch", first.stdout.split()[0], "--wait", *env_options(env_of(follow_up)), "--",
                "python3", "probe.py", mode_of(follow_up), release)
    return Started(first_id(p), p, "command", release=release)


def sweep(t: Target, follow_up: str, release: str) -> Started:
    p = t.start("submit", *t.layout(), "--time", walltime(follow_up), "--wait", *env_options(env_of(follow_up)),
                "--sweep", f"m=ok:0,{mode_of(follow_up)}:1", "--", "python3", "probe.py", "{m}", release)
    return Started(f"{first_id(p)}_1", p, "command", release=release)


def chain(t: Target, follow_up: str, release: str) -> Started:
    before = t.release_path(Path(release).name + "-first")
    first = t.start("submit", *t.layout(), "--time", walltime(follow_up), "--wait", "--", "python3", "probe.py", "wait",
                    before)
    head = first_id(first)
    p = t.start("submit", *t.layout(), "--time", walltime(follow_up), "--wait", "--after", head,
                *env_options(env_of(follow_up)), "--", "python3", "probe.py", mode_of(follow_up), release)
    return Started(first_id(p), p, "command", release=release, others=[(before, first)],
                   pending=follow_up == "cancel")


def api(entry: str):
    def start(t: Target, follow_up: str, release: str) -> Started:
        shutil.copy(DRIVER, t.project / "api_driver.py")
        settings = {"scaling": t.scaling(), "backend": t.backend(), "storage": t.storage("calls"),
                    "env": env_of(follow_up), "time": walltime(follow_up)}
        p = t.python("api_driver.py", entry, mode_of(follow_up), release, json.dumps(settings))
        if entry == "trainer":
            started = Started("", p, "api", run_dir=True, release=release)
            started.job = first_id(p, started, stream="stderr")
            return started
        line = p.stdout.readline()
        assert line.startswith('{"submitted"'), (line, p.stderr.read() if p.poll() is not None else "")
        return Started(json.loads(line)["submitted"][-1], p, "api", release=release)
    return start


ENTRY = {"submit": submit, "train": train, "smoke": smoke, "relaunch": relaunch, "sweep": sweep, "chain": chain,
         "trainer": api("trainer"), "remote_submit": api("submit"), "remote_map": api("map")}
