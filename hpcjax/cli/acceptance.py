"""`hpcjax site --check`: the acceptance check a user runs once on a new cluster. It submits the
smallest jobs that prove hpcjax works there, each through hpcjax's own verbs as a user would type
them (so it proves those, with the user's profile, cluster and container), and writes one page
saying what passed and, for what did not, the exact hint:

  smoke, one process per GPU        the layout's devices and an all-reduce on every rank
  smoke, one process per node       the same with each process owning its node's GPUs
  container                         the two smokes ran in the chosen runtime with the image
  preflight                         the allocation proved before the program (`--preflight`)
  an unmodified script's exit       plain jax.distributed.initialize(), exit 3: the job ends
                                    at once with the program's own status
  logs, stacks, cancel              a running job's output, its Python stacks, its cancel

Each check's jobs are small (the time limit is --time, 10 minutes by default) and run one after
another; what one needs that the site lacks (no image given, py-spy not on the nodes) is said as
skipped or failed with its hint, never hidden."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from hpcjax.cli.checkoptions import Asked
from hpcjax.values.errors import UsageError

EXIT_PROBE = """\
# Written by `hpcjax site --check`: a plain JAX program, as a user's script is (no hpcjax in it).
import sys

import jax

jax.distributed.initialize()
import jax.numpy as jnp
from jax.experimental import multihost_utils

total = float(multihost_utils.process_allgather(jnp.ones(1)).sum())
print(f"hpcjax-check: {jax.process_count()} processes, all-gather {total:g}", flush=True)
sys.exit(3)
"""
WORKS = ("import time\nprint('hpcjax-check: running', flush=True)\n"
         "def waiting():\n    while True:\n        time.sleep(1)\nwaiting()\n")
EXIT_STATUS = 3
WAIT_S = 900  # a check's job may queue; a cluster that never starts it is said, not waited on for ever


@dataclass
class Result:
    check: str
    verdict: str  # passed, failed, skipped
    ran: str  # the command, as a user would type it
    detail: str  # what it said, in short
    hint: str = ""


def run(asked: Asked, say) -> int:
    """The checks, the page, the summary; exit 0 when nothing failed."""
    common, page = list(asked.job_words), asked.page
    work = Path("hpcjax-check")  # under the working directory: shipped with the tree from a laptop
    refuse_unwritable(page, work)
    refuse_what_submit_refuses(common)
    work.mkdir(exist_ok=True)
    (work / "exit_probe.py").write_text(EXIT_PROBE)
    image = asked.image
    results = []
    for name, per_process in (("smoke, one process per GPU", 1), ("smoke, one process per node", asked.gpus_per_node)):
        say(f"{name}: submitting")
        results.append(verdict_of(name, hpcjax("smoke", *common, "--gpus-per-process", str(per_process))))
    smokes_passed = all(r.verdict == "passed" for r in results)
    runtime = asked.runtime or ("the default runtime" if image else "")
    if image:
        results.append(Result("container", "passed" if smokes_passed else "failed",
                              f"the smokes above, with {runtime} and {image}",
                              f"both smokes ran in {runtime} with {image}" if smokes_passed else
                              "a smoke failed: its hint above says why", "" if smokes_passed else
                              "the smokes' hints name the cause (an image not there, a runtime not on the nodes)"))
    else:
        results.append(Result("container", "skipped", "", "no image given: the smokes ran bare",
                              "give the image your jobs use: hpcjax site --check --image IMAGE [--runtime R], or a "
                              "profile with image and runtime"))
    say("preflight: submitting")
    results.append(preflight_result(hpcjax("submit", *common, "--preflight", "--wait", "--", "true"),
                                    list(asked.where_words)))
    say("an unmodified script's exit: submitting")
    results.append(exit_result(hpcjax("submit", *common, "--wait", "--", "python3", str(work / "exit_probe.py"))))
    say("logs, stacks, cancel: submitting")
    results.append(logs_stacks_cancel(common, list(asked.where_words), say))
    write_whole(page, page_html(results, asked.command_line))
    for result in results:
        say(f"{result.verdict.upper():8} {result.check}: {result.detail}" + (f"\n  hint: {result.hint}"
                                                                              if result.hint else ""))
    if asked.json:
        print(json.dumps({"page": str(page.resolve()), "results": [asdict(r) for r in results]}, indent=1))
    else:
        print(page.resolve())
    return 1 if any(r.verdict == "failed" for r in results) else 0


def refuse_unwritable(page: Path, work: Path) -> None:
    """The page's folder and the working directory (the probe's folder) take a file, proved by
    writing one and removing it before any job is submitted: minutes of jobs are not spent on a
    page that cannot be written (a folder under /proc, one that is not there, or read-only)."""
    import tempfile

    if page.is_dir():
        raise UsageError(f"--page {str(page)!r} is a directory", "name the page's file: --page DIR/hpcjax-check.html")
    for folder, what, hint in ((page.parent, f"--page {str(page)!r}: its folder",
                                "give --page a path in a folder you can write, e.g. --page ~/hpcjax-check.html"),
                               (Path.cwd(), "the working directory (where the check writes its probe, hpcjax-check/)",
                                "run the check from a directory you can write, e.g. cd ~")):
        where = os.path.abspath(folder)
        if not folder.is_dir():
            raise UsageError(f"{what} {where!r} is not there", hint)
        try:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".hpcjax-check-"):
                pass
        except OSError as error:
            raise UsageError(f"{what} {where!r} cannot be written ({error.strerror or error})", hint) from None


def refuse_what_submit_refuses(common: list[str]) -> None:
    """Every check's job is refused alike where one is (an image not there, a runtime hpcjax does
    not have, a partition the cluster lacks): ask submit's own checks once (--dry-run) and say
    its refusal before anything is submitted."""
    words, done = hpcjax("submit", *common, "--dry-run", "--", "true", timeout=300)
    if done.returncode != 0:
        error, hint = said(done)
        raise UsageError(f"the check's jobs would be refused: {error}", hint or f"see all it says: {shown(words)}")


def write_whole(page: Path, text: str) -> None:
    """The page appears whole or not at all (a temporary file beside it, then renamed)."""
    partial = page.with_name(f".{page.name}.partial")
    partial.write_text(text)
    partial.replace(page)


def hpcjax(*words: str, timeout: float = WAIT_S) -> tuple[list[str], subprocess.CompletedProcess]:
    argv = [sys.executable, "-m", "hpcjax", *words]
    try:
        return list(words), subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as late:
        return list(words), subprocess.CompletedProcess(argv, 124, late.stdout or "", f"no end within {timeout:.0f} s")


def shown(words: list[str]) -> str:
    import shlex

    return "hpcjax " + shlex.join(words)


def said(done: subprocess.CompletedProcess) -> tuple[str, str]:
    """(the error's words, its hint) from hpcjax's stderr, or its last lines."""
    text = (done.stderr or "").strip()
    if "\nhint: " in text:
        error, hint = text.rsplit("\nhint: ", 1)
        return error.strip().splitlines()[-1].removeprefix("error: "), hint.strip()
    return " / ".join(text.splitlines()[-3:]) or "(nothing)", ""


def verdict_of(name: str, ran) -> Result:
    words, done = ran
    if done.returncode == 0:
        last = (done.stdout.strip().splitlines() or done.stderr.strip().splitlines() or [""])[-1]
        return Result(name, "passed", shown(words), last)
    error, hint = said(done)
    return Result(name, "failed", shown(words), error, hint or f"run it alone to see all it says: {shown(words)}")


def preflight_result(ran, where: list[str]) -> Result:
    """The preflight's verdict as `status` says it (nodes, devices, the slowest node against the median)."""
    found = verdict_of("preflight", ran)
    job = ran[1].stdout.strip()
    if found.verdict == "passed" and job:
        text = hpcjax("status", job, *where, timeout=120)[1].stdout
        found.detail = next((part.strip().removeprefix("preflight: ") for line in text.splitlines() for part in line.split(";")
                             if part.strip().startswith("preflight:")), f"job {job} completed")
    return found


def exit_result(ran) -> Result:
    words, done = ran
    name = "an unmodified script's exit"
    if done.returncode == EXIT_STATUS and f"(exit code {EXIT_STATUS})" in done.stderr:
        return Result(name, "passed", shown(words), f"plain jax.distributed.initialize(); the job ended with the "
                                                    f"program's own status {EXIT_STATUS}")
    error, hint = said(done)
    return Result(name, "failed", shown(words), f"expected exit {EXIT_STATUS}, got {done.returncode}: {error}",
                  hint or "see the job's report: hpcjax status JOBID")


def logs_stacks_cancel(common: list[str], where: list[str], say) -> Result:
    name = "logs, stacks, cancel"
    words, done = hpcjax("submit", *common, "--", "python3", "-c", WORKS)
    job = done.stdout.strip()
    if done.returncode != 0 or not job:
        error, hint = said(done)
        return Result(name, "failed", shown(words), error, hint)
    steps = [shown(words)]
    try:
        say(f"job {job} submitted: waiting for its first line (up to {WAIT_S} s)")
        seen, printed = wait_for_line(job, where, say)
        if not printed:
            if seen in WAITING_STATES + ("RUNNING",):
                return Result(name, "failed", "; ".join(steps), f"job {job} did not start, or printed nothing, in "
                                                                 f"{WAIT_S} s (state {seen})",
                              f"hpcjax status {job} says why it waits")
            ended = hpcjax("status", job, *where, timeout=120)[1].stdout.strip()
            return Result(name, "failed", "; ".join(steps), f"job {job} ended {seen} before it printed its line: "
                                                             f"{' / '.join(ended.splitlines()[-2:])}",
                          f"hpcjax status {job}; hpcjax logs {job}")
        steps.append(f"hpcjax logs {job}")
        say(f"job {job} running: reading its stacks")
        looked_words, looked = hpcjax("stacks", job, *where)
        steps.append(shown(looked_words))
        if looked.returncode != 0 or "waiting" not in looked.stdout:
            error, hint = said(looked)
            return Result(name, "failed", "; ".join(steps), f"logs passed; stacks: {error}", hint)
    finally:
        hpcjax("cancel", job, *where)
    steps.append(f"hpcjax cancel {job}")
    if not wait_for(lambda: state_of(job, where) == "CANCELLED", timeout_s=120):
        return Result(name, "failed", "; ".join(steps), f"job {job} is {state_of(job, where)} after its cancel",
                      f"hpcjax status {job}; scancel {job}")
    return Result(name, "passed", "; ".join(steps), f"job {job}: its line in logs, its Python stack, CANCELLED")


def state_of(job: str, where: list[str]) -> str:
    done = hpcjax("status", job, "--json", *where, timeout=120)[1]
    try:
        return json.loads(done.stdout).get("state", "")
    except ValueError:
        return ""


WAITING_STATES = ("", "PENDING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED")


def wait_for_line(job: str, where: list[str], say) -> tuple[str, bool]:
    """Wait for the running job's line in its log: (the job's state, whether the line is there).
    A job that has ended (e.g. FAILED) ends the wait at once; one still waiting, after WAIT_S.
    Says the state every 30 s while it waits."""
    deadline = time.monotonic() + WAIT_S
    said_at = time.monotonic()
    while True:
        state = state_of(job, where)
        if state == "RUNNING" and "hpcjax-check: running" in hpcjax("logs", job, *where)[1].stdout:
            return state, True
        if state not in WAITING_STATES + ("RUNNING",) or time.monotonic() > deadline:
            return state, False
        if time.monotonic() - said_at >= 30:
            say(f"job {job}: {state or 'not known yet'}, still waiting for its first line")
            said_at = time.monotonic()
        time.sleep(2)


def wait_for(condition, timeout_s: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(2)
    return False


def page_html(results: list[Result], asked: str) -> str:
    """One self-contained page: a row per check, its verdict, what ran, what it said, the hint."""
    colours = {"passed": "#1a7f37", "failed": "#cf222e", "skipped": "#9a6700"}
    rows = "".join(
        f'<tr class="{r.verdict}"><td>{html.escape(r.check)}</td><td style="color:{colours[r.verdict]};'
        f'font-weight:bold">{r.verdict.upper()}</td><td><code>{html.escape(r.ran)}</code></td>'
        f"<td>{html.escape(r.detail)}</td><td>{html.escape(r.hint)}</td></tr>" for r in results)
    failed = sum(r.verdict == "failed" for r in results)
    head = (f"{failed} of {len(results)} checks failed: fix them in order, with each hint" if failed else
            f"hpcjax works here: {sum(r.verdict == 'passed' for r in results)} of {len(results)} checks passed")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>hpcjax site --check</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:6px;vertical-align:top;text-align:left}}code{{font-size:90%}}</style></head>
<body><h1>hpcjax site --check</h1>
<p id="verdict" data-failed="{failed}" data-checks="{len(results)}">{html.escape(head)}</p>
<p>asked: <code>hpcjax {html.escape(asked)}</code>, on {html.escape(os.uname().nodename)}, {time.strftime('%Y-%m-%d %H:%M')}</p>
<table><tr><th>check</th><th>verdict</th><th>what ran</th><th>what it said</th><th>hint</th></tr>
{rows}</table></body></html>
"""
