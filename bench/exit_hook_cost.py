"""What the exit guard's hook costs a Python that never imports JAX (issue 48: a rank's children,
pip, a prologue's Python all start with it first on PYTHONPATH; the goal is 2 ms at most). Python
is started --runs times with the hook first on PYTHONPATH and as many times with an empty
directory there instead, alternating; prints the median import time of `sitecustomize` as Python's
own -X importtime measures it (the hook's, which also runs the site's own, against the site's own
alone), and the median start-up of the whole process, with the ratio.

    python bench/exit_hook_cost.py [--runs 40]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOOK = Path(__file__).resolve().parent.parent / "hpcjax" / "rank" / "exithook"
SITECUSTOMIZE = re.compile(r"import time:\s+(\d+) \|\s+\d+ \|\s+sitecustomize$", re.M)


def start(pythonpath: str) -> tuple[float, float]:
    """(µs importing sitecustomize, ms for the whole process) of one `python -c pass`."""
    env = {**os.environ, "PYTHONPATH": pythonpath}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed hpcjax has its bytecode: so does this one
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, text=True,
                          env=env, check=True)
    took = (time.perf_counter() - began) * 1000
    match = SITECUSTOMIZE.search(done.stderr)
    return (float(match[1]) if match else 0.0), took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(HOOK)], check=True)
    figures: dict[str, list[tuple[float, float]]] = {"hook": [], "none": []}
    with tempfile.TemporaryDirectory() as empty:
        for i in range(args.runs):
            for name in (("hook", "none") if i % 2 == 0 else ("none", "hook")):
                figures[name].append(start(str(HOOK) if name == "hook" else empty))
    median = {name: (statistics.median(f[0] for f in runs), statistics.median(f[1] for f in runs))
              for name, runs in figures.items()}
    (hook_us, hook_ms), (none_us, none_ms) = median["hook"], median["none"]
    print(f"sitecustomize's import, median of {args.runs}: with the hook {hook_us:.0f} us, without "
          f"{none_us:.0f} us: the hook costs {(hook_us - none_us) / 1000:.2f} ms")
    print(f"whole start-up of python -c pass: with the hook {hook_ms:.1f} ms, without {none_ms:.1f} ms, "
          f"ratio {hook_ms / none_ms:.3f}")


if __name__ == "__main__":
    main()
