"""The verbs about the runtime: `env` and `check` (run on every rank), `smoke`
(submits the checks and gives one verdict), and the backend choice shared
with `submit`. JAX is imported only inside the commands that initialize it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys

from hpcjax.errors import HpcjaxError, UsageError

BACKENDS = ("auto", "slurm", "local")
SIZE = re.compile(r"(\d+)([KMG]?)", re.IGNORECASE)


def choose_backend(name: str) -> str:
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}", f"valid backends: {', '.join(BACKENDS)}")
    if name != "auto":
        return name
    if shutil.which("sbatch"):
        return "slurm"
    print("no SLURM on this machine (no `sbatch`): running locally on this machine's CPU, "
          "GPUs emulated as CPU devices", file=sys.stderr)
    return "local"


def parse_size(text: str) -> int:
    match = SIZE.fullmatch(text.strip())
    if not match or int(match[1]) <= 0:
        raise UsageError(f"malformed size {text!r}", "sizes are bytes with an optional K, M or G: 4K, 64M")
    return int(match[1]) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match[2].upper()]


def parse_sizes(text: str) -> tuple[int, ...]:
    """'4K:64M' = every power of 4 from 4 KiB to 64 MiB; '4K,1M' = exactly those."""
    if ":" in text:
        low, high = (parse_size(part) for part in text.split(":", 1))
        if high < low:
            raise UsageError(f"size range {text!r} runs backwards", "write MIN:MAX, e.g. 4K:64M")
        sizes = [low]
        while sizes[-1] * 4 <= high:
            sizes.append(sizes[-1] * 4)
        return tuple(sizes)
    return tuple(parse_size(part) for part in text.split(","))


def cmd_env(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.mapping import resolve
    from hpcjax.runtime import detect_gpu, init_timeout_s

    denv = resolve(os.environ, gpu_available=detect_gpu())
    if args.json:
        print(json.dumps({**denv.as_dict(), "init_timeout_s": init_timeout_s()}, indent=2))
    else:
        print(denv.explain())
        print(f"{'init timeout':<20} {init_timeout_s()} s")
    return 0


def cmd_check(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax import checks
    from hpcjax.runtime import initialize

    sizes = parse_sizes(args.sizes) if args.sizes else checks.DEFAULT_SIZES
    denv = initialize()
    names = {"all": ["devices", "allreduce"] + (["bandwidth"] if args.bandwidth else [])}.get(
        args.which, [args.which])
    run = {"devices": checks.check_devices, "allreduce": checks.check_allreduce,
           "bandwidth": lambda d: checks.check_bandwidth(d, sizes=sizes, iters=args.iters)}
    ok = True
    for name in names:
        report = run[name](denv)
        ok = ok and report["ok"]
        if args.json:
            print(json.dumps(report), flush=True)
            print(checks.format_report(report), file=sys.stderr, flush=True)
        else:
            print(checks.format_report(report), flush=True)
    return 0 if ok else 1


def cmd_smoke(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax import smoke
    from hpcjax.cli import spec_from_args

    if command:
        raise UsageError("`hpcjax smoke` runs its own checks and takes no command",
                         "use `hpcjax submit ... -- COMMAND` to run a program")
    if args.sizes:
        parse_sizes(args.sizes)  # refuse a bad value before anything runs
    spec = smoke.smoke_spec(spec_from_args(args, ["placeholder"]), args.bandwidth, args.sizes)
    backend = choose_backend(args.backend)
    logs, num = (_smoke_on_slurm(spec) if backend == "slurm" else _smoke_locally(spec))
    rows = smoke.verdicts(smoke.read_reports(logs), num, args.bandwidth)
    if args.json:
        print(json.dumps({"layout": spec.layout.name, "backend": backend, "ranks": rows,
                          "ok": all(r["ok"] for r in rows)}, indent=2))
    else:
        print(f"smoke test {spec.layout.name} ({backend}):")
        print(smoke.format_table(rows, args.bandwidth))
    return 0 if all(r["ok"] for r in rows) else 1


def _smoke_on_slurm(spec):
    from hpcjax import dispatch, jobs

    job = dispatch.submit(spec)
    dispatch.wait_and_report(job.job_id)
    return jobs.rank_logs(job.job_id), spec.layout.num_processes


def _smoke_locally(spec):
    from hpcjax.local import run_local

    run = run_local(spec)
    return {rank: run.log_path(rank) for rank in range(spec.layout.num_processes)}, spec.layout.num_processes


def add_runtime_verbs(sub, add_job_options) -> None:
    env = sub.add_parser("env", help="what the runtime derives here, and why (initializes nothing)")
    env.add_argument("--json", action="store_true")
    env.set_defaults(run=cmd_env, takes_command=False)

    check = sub.add_parser("check", help="run on every rank of a job step: prove the layout works")
    check.add_argument("which", choices=["devices", "allreduce", "bandwidth", "all"])
    check.add_argument("--json", action="store_true", help="one JSON line per check on stdout")
    check.add_argument("--bandwidth", action="store_true", help="with `all`: add the bandwidth sweep")
    check.add_argument("--sizes", help="bandwidth message sizes per device: MIN:MAX in powers of 4 "
                                       "(default 4K:64M) or a list 4K,1M")
    check.add_argument("--iters", type=int, default=5, help="timed iterations per size")
    check.set_defaults(run=cmd_check, takes_command=False)

    smoke = sub.add_parser("smoke", help="submit one job that checks devices and all-reduce on every rank")
    add_job_options(smoke, job_name="hpcjax-smoke", time="00:10:00")
    smoke.add_argument("--bandwidth", action="store_true", help="also run the bandwidth sweep")
    smoke.add_argument("--sizes", help="bandwidth sizes, as for `hpcjax check`")
    smoke.add_argument("--backend", default="auto", help="slurm, local, or auto (slurm when sbatch exists)")
    smoke.add_argument("--json", action="store_true", help="the verdict as JSON on stdout")
    smoke.set_defaults(run=cmd_smoke, takes_command=True)


def run_submit_locally(spec) -> int:
    """`hpcjax submit --backend local`: run here, report like the SLURM path."""
    from hpcjax.jobs import describe_rank_failure
    from hpcjax.local import run_local

    run = run_local(spec)
    print(run.job_id)
    if run.ok:
        return 0
    if run.first_failure is not None:
        rank = run.first_failure
        print(describe_rank_failure(rank, f"local{rank // spec.layout.tasks_per_node}",
                                    f"exit code {run.exit_codes[rank]}", run.log_path(rank)), file=sys.stderr)
        code = run.exit_codes[rank] or 1
        return code if 0 < code < 256 else 1
    raise HpcjaxError(f"local job {run.job_id} reached its time limit", "raise --time")
