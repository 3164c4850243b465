"""How long the everyday verbs take, against floors measured now in the same run.

Floors: a bare `python -c pass`, and `python -c 'import jinja2'` (what rendering a template cannot
do without). Verbs: `hpcjax render` (goal: at most 1.2x the jinja2 floor), `hpcjax --help` (goal:
at most 1.2x `python -c pass`), `hpcjax runs`, and, when SLURM is here (the dev cluster), `hpcjax
status` of a finished job against `python -c pass` plus one `sacct` of it (goal: at most 1.2x),
and `hpcjax submit` without
--wait: when its job id is on stdout, and when it returns, against `sbatch --wrap` itself (goal:
the id within 0.3 s of sbatch's time). Every command runs RUNS times,
interleaved (so a busy moment of the machine hits them all alike); medians are printed.

    python bench/cli_speed.py
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = 15


def seconds(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def submit_times(hpcjax: list[str], env: dict) -> tuple[float, float, float]:
    """(seconds to hpcjax submit's job id, to its return, of `sbatch --wrap` alone); both jobs cancelled."""
    start = time.perf_counter()
    proc = subprocess.Popen([*hpcjax, "submit", "--nodes", "1", "--gpus-per-node", "1", "--time", "00:01:00", "--",
                             "sleep", "30"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    job = proc.stdout.readline().strip()
    to_id = time.perf_counter() - start
    proc.wait()
    to_return = time.perf_counter() - start
    start = time.perf_counter()
    plain = subprocess.run(["sbatch", "--parsable", "-N1", "-t", "1", "--wrap", "sleep 30"], capture_output=True,
                           text=True, env=env)
    sbatch = time.perf_counter() - start
    subprocess.run(["scancel", job, plain.stdout.strip().split(";")[0]], env=env)
    return to_id, to_return, sbatch


def finished_slurm_job(hpcjax: list[str], env: dict) -> str | None:
    if shutil.which("sbatch") is None:
        return None
    done = subprocess.run([*hpcjax, "submit", "--nodes", "1", "--gpus-per-node", "1", "--time", "00:02:00", "--wait",
                           "--", "true"], capture_output=True, text=True, env=env)
    return done.stdout.split()[0] if done.returncode == 0 and done.stdout.strip() else None


def main() -> None:
    # `python -m hpcjax`, not a console script: pyenv's shims are bash scripts that cost more than hpcjax.
    hpcjax = [sys.executable, "-m", "hpcjax"]
    work = tempfile.mkdtemp(prefix="hpcjax-cli-speed-")
    os.chdir(work)
    env = {**os.environ, "HPCJAX_HOME": os.path.join(work, "home")}
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import jinja2'": [sys.executable, "-c", "import jinja2"],
        "hpcjax render": [*hpcjax, "render", "--nodes", "2", "--gpus-per-node", "4", "--", "python", "t.py"],
        "hpcjax runs": [*hpcjax, "runs"],
        "hpcjax --help": [*hpcjax, "--help"],
    }
    job = finished_slurm_job(hpcjax, env)
    if job:
        commands["sacct -j JOB"] = ["sacct", "-j", job, "-X", "-n", "-P"]
        commands["hpcjax status JOB"] = [*hpcjax, "status", job]
    else:
        print("no SLURM here (or the job failed): status is not measured", file=sys.stderr)
    for argv in commands.values():  # warm: the template cache, the OS's page cache
        seconds(argv, env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(RUNS):
        for name, argv in commands.items():
            times[name].append(seconds(argv, env))
    median = {name: statistics.median(values) for name, values in times.items()}
    if job:
        submits = [submit_times(hpcjax, env) for _ in range(5)]
        for i, name in enumerate(("hpcjax submit: job id", "hpcjax submit: returned", "sbatch --wrap")):
            median[name] = statistics.median(s[i] for s in submits)
    for name, value in median.items():
        print(f"{name:28} {value * 1000:7.1f} ms")
    floor, bare = median["python -c 'import jinja2'"], median["python -c pass"]
    print(f"ratio render / jinja2 floor:           {median['hpcjax render'] / floor:.2f}  (goal <= 1.2)")
    print(f"ratio --help / python -c pass:         {median['hpcjax --help'] / bare:.2f}  (goal <= 1.2)")
    print(f"ratio runs / jinja2 floor:             {median['hpcjax runs'] / floor:.2f}")
    if job:  # status renders nothing: its floor is Python's own start and the one sacct it cannot do without
        baseline = bare + median["sacct -j JOB"]
        print(f"ratio status / (python -c pass + one sacct): {median['hpcjax status JOB'] / baseline:.2f}  (goal <= 1.2)")
        late = median["hpcjax submit: job id"] - median["sbatch --wrap"]
        print(f"submit's job id after sbatch's own time: {late * 1000:.0f} ms  (goal <= 300 ms)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
