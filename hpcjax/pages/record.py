"""What a training run's directory says, read back for the report pages (hpcjax.protocol.rundir writes it).

Restarts are found in the record itself: each run writes a line saying where it started and whether
it resumed (older runs: a step that comes again). A half-written last line (a killed run) is skipped
and said so; a loss that stopped being a number is kept: it is the run's divergence.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from hpcjax.values import jsonlines
from hpcjax.protocol import rundir
from hpcjax.values.errors import UsageError


@dataclass
class RunRecord:
    steps: list[dict] = field(default_factory=list)  # the records of the steps, the latest of each step
    evals: list[dict] = field(default_factory=list)
    restarts: list[int] = field(default_factory=list)  # the step each resumed run started from
    checkpoints: list[int] = field(default_factory=list)
    pace: list[dict] = field(default_factory=list)  # {"step": N, "pace": {...}} of train.pace, in order
    starts: list[dict] = field(default_factory=list)  # each attempt's time to its first step, in order
    config: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def read_run(run_dir: Path) -> RunRecord:
    """What a run directory says, read line by line: a line of a shape hpcjax does not write
    (a half-written line, a list, a step without its numbers) is skipped and named in problems."""
    if not run_dir.is_dir():
        raise UsageError(f"run directory {str(run_dir)!r} does not exist",
                         "give the --run-dir of a training run (it holds metrics.jsonl)")
    held = {p.name for p in run_dir.iterdir()}
    if held and not held & set(rundir.MARKS):  # empty: a run about to write its first step
        raise UsageError(f"{str(run_dir)!r} is not a run directory: it holds none of {', '.join(rundir.MARKS)}",
                         "give the --run-dir of a training run; the page is written into it")
    record = RunRecord()
    run = rundir.RunDir(run_dir)
    path = run.metrics
    try:
        # JSON lines end at \n only (splitlines would also cut at \x85 or \u2028 inside a string)
        lines = path.read_bytes().decode(errors="replace").removesuffix("\n").split("\n") if path.is_file() else []
        lines = [] if lines == [""] else lines
    except OSError as err:
        lines = []
        record.problems.append(f"cannot read {path}: {err.strerror}")
    if not lines and not record.problems:
        record.problems.append(f"no metrics in {path}: the run has not written a step yet")
    by_step: dict[int, dict] = {}
    last = -1
    for number, line in enumerate(lines, 1):
        entry, why = _entry(line)
        if why:
            record.problems.append(f"line {number} of {path.name} {why}; skipped")
            continue
        kind = rundir.kind_of(entry)
        if kind == rundir.START:
            if entry.get("resumed") and entry["step"] not in record.restarts:
                record.restarts.append(entry["step"])  # runs since this version say where they resumed
        elif kind == rundir.STEP:
            if entry["step"] <= last and entry["step"] not in record.restarts:
                record.restarts.append(entry["step"])  # older runs: found by a step that comes again
            by_step[entry["step"]] = entry  # a step redone after a restart: the later line counts
            last = entry["step"]
        elif kind == rundir.END and is_number(entry.get("val_loss")):
            record.evals.append(entry)
        elif kind == rundir.PACE:
            record.pace.append(entry)
        elif kind == rundir.FIRST_STEP:
            record.starts.append(entry)
    record.steps = [by_step[s] for s in sorted(by_step)]
    record.checkpoints = run.checkpoint_steps()
    try:
        config = json.loads(run.config.read_text(errors="replace"))
    except (OSError, ValueError):
        record.problems.append(f"no {rundir.CONFIG}: the configuration is unknown (written by runs since this version)")
    else:
        if isinstance(config, dict):
            record.config = config
        else:
            record.problems.append(f"{rundir.CONFIG} is not a JSON object; the configuration is not shown")
    return record


DIVERGING = ("loss", "grad_norm")  # what a diverged run writes as NaN or inf


def _float(value) -> bool:
    return isinstance(value, float)


def diverged(record: "RunRecord") -> str:
    """Where the loss stopped being a number: the first such step, or '-'."""
    bad = [s for s in record.steps if not math.isfinite(s["loss"]) or not math.isfinite(s["grad_norm"])]
    return f"at step {bad[0]['step']} (loss {bad[0]['loss']}, {len(bad)} step(s) not finite)" if bad else "-"


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _entry(line: str) -> tuple[dict, str]:
    """(the line's object, '') or ({}, why it is skipped): each kind with the fields the page uses."""
    entry, why = jsonlines.parse(line)
    if entry is None:
        return {}, why
    if not (isinstance(entry.get("step"), int) and not isinstance(entry["step"], bool) and entry["step"] >= 0):
        return {}, "has no step number"
    kind = rundir.kind_of(entry)
    if kind == rundir.STEP:
        # A loss or gradient norm that is NaN or infinite is the run's divergence, kept and shown.
        bad = [f for f in rundir.STEP_FIELDS if not (is_number(entry.get(f)) or f in DIVERGING and _float(entry.get(f)))]
        return ({}, f"is a step without a number for {', '.join(bad)}") if bad else (entry, "")
    if kind == rundir.PACE:
        pace = entry["pace"]
        shares = [pace.get("collective_s"), pace.get("traced_s")]
        ok = all(isinstance(v, list) and all(is_number(x) for x in v) for v in shares) and \
            len(shares[0]) == len(shares[1]) and is_number(pace.get("steps")) and pace["steps"] > 0 and \
            isinstance(pace.get("slow", ""), (str, type(None)))
        return (entry, "") if ok else ({}, "is a pace capture without its per-rank times")
    if kind == rundir.FIRST_STEP:
        start = entry["time_to_first_step"]
        phases = start.get("phases")
        ok = isinstance(phases, list) and all(isinstance(p, dict) and isinstance(p.get("phase"), str) and
                                              is_number(p.get("s")) for p in phases)
        return (entry, "") if ok else ({}, "is a start without its phases")
    return entry, ""
