"""How long `hpcjax render` takes on a login node, against baselines measured now.

Prints the median wall time of each command over several runs and the ratios:
render / bare python start-up, and render / `import jax` (what render would cost
if it imported JAX).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

RUNS = 7


def median_seconds(argv: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    hpcjax = [shutil.which("hpcjax")] if shutil.which("hpcjax") else [sys.executable, "-m", "hpcjax"]
    python = median_seconds([sys.executable, "-c", "pass"])
    jax = median_seconds([sys.executable, "-c", "import jax"])
    render = median_seconds([*hpcjax, "render", "--nodes", "2", "--gpus-per-node", "4", "--", "python", "t.py"])
    print(f"bare python start-up   {python * 1000:8.1f} ms")
    print(f"python -c 'import jax' {jax * 1000:8.1f} ms")
    print(f"hpcjax render          {render * 1000:8.1f} ms")
    print(f"ratio render / bare python: {render / python:.2f}")
    print(f"ratio render / import jax:  {render / jax:.2f}")


if __name__ == "__main__":
    main()
