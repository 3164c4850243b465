"""Training at cluster scale, measured in one run: the time to the first step with a
warm compilation cache over a cold one (the goal is at most 0.5), and tokens per
second of hybrid sharding (hsdp) over plain FSDP on the same layout.

    python bench/first_step.py [--backend slurm|local] [--nodes 2] [--gpus-per-node 4]

8 ranks on the dev cluster by default (2 nodes x 4 emulated GPUs). Prints seconds and
ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from hpcjax import launch
from hpcjax.launch.spec import JobSpec, Layout

MODEL = ["--seq-len", "64", "--d-model", "128", "--heads", "8", "--layers", "2", "--d-ff", "512",
         "--batch-size", "32", "--corpus-bytes", str(1 << 20), "--checkpoint-every", "0"]


def run(args, work: Path, name: str, *options: str) -> dict:
    spec = JobSpec(command=(sys.executable, "-m", "hpcjax", "train", "--json", "--run-dir", str(work / name),
                            *MODEL, *options),
                   layout=Layout(nodes=args.nodes, gpus_per_node=args.gpus_per_node), output_dir=str(work / "logs"),
                   time="00:30:00")
    job = launch.submit(spec, args.backend)
    job.wait(progress=False).raise_if_failed()
    return json.loads(job.logs(rank=0).strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="slurm")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--steps", default="30")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        work = Path(tmp).resolve()
        cache = str(work / "cache")
        cold = run(args, work, "cold", "--steps", "3", "--compile-cache", cache)["time_to_first_step"]
        warm = run(args, work, "warm", "--steps", "3", "--compile-cache", cache)["time_to_first_step"]
        print(f"time to first step ({args.nodes} x {args.gpus_per_node}, {args.backend}): "
              f"cold {cold['total_s']:.1f} s (compile {cold['compile_s']:.1f} s), "
              f"warm {warm['total_s']:.1f} s (compile {warm['compile_s']:.1f} s); "
              f"warm/cold {warm['total_s'] / cold['total_s']:.2f} (goal <= 0.5)")
        for name, d in (("cold", cold), ("warm", warm)):
            print(f"  {name}: to JAX initialized {d['start_to_initialized_s']:.1f} s, compile {d['compile_s']:.1f} s, "
                  f"first step {d['first_step_s']:.2f} s, the rest (imports, data, model init) "
                  f"{d['total_s'] - d['start_to_initialized_s'] - d['compile_s'] - d['first_step_s']:.1f} s")
        speed = {s: run(args, work, s, "--strategy", s, "--steps", args.steps, "--compile-cache", cache)["tokens_per_s"]
                 for s in ("fsdp", "hsdp")}
        print(f"tokens/s: fsdp {speed['fsdp']:.0f}, hsdp {speed['hsdp']:.0f}; hsdp/fsdp "
              f"{speed['hsdp'] / speed['fsdp']:.2f}")


if __name__ == "__main__":
    main()
