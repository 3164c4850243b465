"""The verbs that run on a rank: `env` (what the mapping derives here, and why)
and `check` (prove the layout inside a job step). JAX is imported only by the
commands that initialize it; nothing here needs more than JAX and NumPy."""

from __future__ import annotations

import argparse
import json
import os

from hpcjax.cli import kinds
from hpcjax.cli.kinds import parse_sizes
from hpcjax.protocol.contract import ALL_CHECKS, NODES_ENV
from hpcjax.values.voice import say
from hpcjax.cli.verbs import HELP


def cmd_env(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.rank.start.mapping import resolve
    from hpcjax.rank.start.plainjax import differences, resolve_like_jax
    from hpcjax.values.errors import HpcjaxError
    from hpcjax.rank.start.runtime import check_gpu_usable, container_name, detect_gpu, init_timeout_s

    denv = resolve(os.environ, gpu_available=detect_gpu())
    plain = resolve_like_jax(os.environ)
    diff = differences(denv, plain) if plain is not None else []
    try:
        check_gpu_usable(denv)
        problem = None
    except HpcjaxError as error:  # said here; `check` and training refuse to start
        problem = str(error)
    if args.json:
        print(json.dumps({**denv.as_dict(), "init_timeout_s": init_timeout_s(), "plain_jax": plain,
                          "plain_jax_differs": diff, "container": container_name(), "problem": problem},
                         indent=2))
        return 0
    print(denv.explain())
    print(f"{'container':<20} {container_name() or '- (bare)'}")
    if problem:
        print(f"PROBLEM: {problem}")
    print(f"{'init timeout':<20} {init_timeout_s()} s")
    if plain is not None and "error" not in plain:
        ids = plain["local_device_ids"]
        print(f"plain jax.distributed.initialize() would use: coordinator {plain['coordinator_address']}, "
              f"{plain['num_processes']} processes, process id {plain['process_id']}, local device ids {ids}")
    for line in diff:
        print(f"DIFFERS: {line}")
    if plain is not None and not diff:
        print("a plain jax.distributed.initialize() agrees with hpcjax here")
    return 0


def cmd_check(args: argparse.Namespace, command: list[str]) -> int:
    sizes = parse_sizes(args.sizes) if args.sizes else None  # a bad value is refused before JAX starts
    from hpcjax.rank.prove import checks
    from hpcjax.rank.start.runtime import initialize

    denv = initialize()
    names = list(ALL_CHECKS) + (["bandwidth"] if args.bandwidth else []) if args.which == "all" else [args.which]
    run = {"devices": checks.check_devices, "allreduce": checks.check_allreduce,
           "bandwidth": lambda d: checks.check_bandwidth(d, sizes=sizes or checks.DEFAULT_SIZES, iters=args.iters)}
    ok = True
    for name in names:
        report = run[name](denv)
        ok = ok and report["ok"]
        if args.json:
            print(json.dumps(report), flush=True)
            say(checks.format_report(report))
        else:
            print(checks.format_report(report), flush=True)
    return 0 if ok else 1


def cmd_preflight(args: argparse.Namespace, command: list[str]) -> int:
    import os

    from hpcjax.rank.prove import preflight
    from hpcjax.protocol.preflight_rules import Floors
    from hpcjax.rank.start.runtime import initialize

    floors = Floors.from_env(os.environ)  # a bad floor is refused before JAX starts
    if args.spares:  # this step runs on the layout's nodes and the spares
        os.environ[NODES_ENV] = str(int(os.environ.get(NODES_ENV, "0") or 0) + args.spares)
    return preflight.run(initialize(), floors, args.directory, args.spares)


def add_rank_verbs(sub) -> None:
    env = sub.add_parser("env", help=HELP["env"])
    env.add_argument("--json", action="store_true", help="the mapping as JSON on stdout")
    env.set_defaults(run=cmd_env, takes_command=False)

    preflight = sub.add_parser("preflight", help=HELP["preflight"])
    preflight.add_argument("--directory", help="the storage to prove from every node (default: the working "
                                               "directory)")
    preflight.add_argument("--spares", type=kinds.count, default=0,
                           help="the step has this many nodes more than the layout: name the best of the rest")
    preflight.set_defaults(run=cmd_preflight, takes_command=False)

    check = sub.add_parser("check", help=HELP["check"])
    check.add_argument("which", choices=["devices", "allreduce", "bandwidth", "all"],
                       help="devices (counts), allreduce (a sum over every device), bandwidth, or all")
    check.add_argument("--json", action="store_true", help="one JSON line per check on stdout")
    check.add_argument("--bandwidth", action="store_true", help="with `all`: add the bandwidth sweep")
    check.add_argument("--sizes", help="bandwidth message sizes per device: MIN:MAX in powers of 4 "
                                       "(default 4K:64M) or a list 4K,1M")
    check.add_argument("--iters", type=kinds.positive, default=5, help="timed iterations per size")
    check.set_defaults(run=cmd_check, takes_command=False)
