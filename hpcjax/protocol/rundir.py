"""A run's directory: every name in it, and the fields of its metrics record, in one place.

`hpcjax train` (hpcjax.train) and a Trainer run (hpcjax.api.session) write it; `hpcjax
report` (hpcjax.report), the Trainer's caller and, later, anything that fetches a run read
it. Standard library only: it is imported on every rank and on the login side.

    <run>/checkpoints/        Orbax's steps (hpcjax train); copies of reported checkpoints (Trainer)
    <run>/metrics.jsonl       one JSON object per line, appended (see the kinds below)
    <run>/config.json         the run's configuration and layout
    <run>/profile/            JAX profiler traces (--profile-steps)
    <run>/compile-cache/      JAX's persistent compilation cache (--compile-cache auto), and the
                              step's serialized executables in executables/ (rank.cache.executables)
    <run>/data/               the training corpus, built once and read by every later start
    <run>/tensorboard/        TensorBoard event files (train.scalars)
    <run>/reports.jsonl       a Trainer run's reports, in order (api.session)
    <run>/checkpoint.json     a Trainer run's latest checkpoint (api.session)
"""

from __future__ import annotations

from pathlib import Path

CHECKPOINTS = "checkpoints"
METRICS = "metrics.jsonl"
CONFIG = "config.json"
PROFILE = "profile"
COMPILE_CACHE = "compile-cache"
DATA = "data"
TENSORBOARD = "tensorboard"
REPORTS = "reports.jsonl"
LATEST_CHECKPOINT = "checkpoint.json"
REPORT_PAGE = "report.html"
# A run directory holds at least one of these (what `hpcjax fetch` checks before copying one).
MARKS = (METRICS, CONFIG, CHECKPOINTS, REPORTS, LATEST_CHECKPOINT)

# metrics.jsonl's kinds of line, told apart by their fields:
#   a step       {"step", "loss", "grad_norm", "learning_rate", "step_time_s", "tokens_per_s", "mfu"}
#   a run began  {"step", "run_started": true, "resumed": bool}
#   a run ended  {"step", "val_loss": float|null, "stopped_early": bool}
#   a capture    {"step", "pace": {...}}                              (train.pace)
#   a start      {"step", "time_to_first_step": {"total_s", "phases": [{"phase", "s", "how"}], ...}}
#                (train.observe: one per attempt, after its first step)
STEP_FIELDS = ("step", "loss", "grad_norm", "learning_rate", "step_time_s", "tokens_per_s", "mfu")
STEP, START, END, PACE, FIRST_STEP = "step", "start", "end", "pace", "first_step"


def kind_of(entry: dict) -> str | None:
    """Which kind of metrics line `entry` is (None: none hpcjax writes)."""
    if entry.get("run_started"):
        return START
    if "loss" in entry:
        return STEP
    if "val_loss" in entry or "stopped_early" in entry:
        return END
    if isinstance(entry.get("pace"), dict):
        return PACE
    if isinstance(entry.get("time_to_first_step"), dict):
        return FIRST_STEP
    return None


RUN_DIR_FLAG = "--run-dir"  # how `hpcjax train` and the examples name a run's directory


def run_dir_argument(command) -> str | None:
    """The run directory a job's command names (`--run-dir X` or `--run-dir=X`), if any."""
    command = list(command)
    for i, word in enumerate(command):
        if word == RUN_DIR_FLAG and i + 1 < len(command):
            return command[i + 1]
        if word.startswith(RUN_DIR_FLAG + "="):
            return word.split("=", 1)[1]
    return None


def _entry(name: str, doc: str) -> property:
    return property(lambda self: self.path / name, doc=doc)


class RunDir:
    """The paths of one run directory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __str__(self) -> str:
        return str(self.path)

    checkpoints = _entry(CHECKPOINTS, "Orbax's steps, or a Trainer run's copies of reported checkpoints")
    metrics = _entry(METRICS, "the metrics record, one JSON object per line")
    config = _entry(CONFIG, "the run's configuration and layout")
    profile = _entry(PROFILE, "JAX profiler traces")
    compile_cache = _entry(COMPILE_CACHE, "JAX's persistent compilation cache, when the run keeps its own")
    data = _entry(DATA, "the training corpus, built once per run directory")
    tensorboard = _entry(TENSORBOARD, "TensorBoard event files")
    reports = _entry(REPORTS, "a Trainer run's reports")
    latest_checkpoint = _entry(LATEST_CHECKPOINT, "a Trainer run's latest checkpoint")
    report_page = _entry(REPORT_PAGE, "`hpcjax report`'s page")

    def checkpoint_steps(self) -> list[int]:
        """The steps saved under checkpoints/ (Orbax names a finished step by its number)."""
        if not self.checkpoints.is_dir():
            return []
        return sorted(int(p.name) for p in self.checkpoints.iterdir() if p.name.isascii() and p.name.isdigit())
