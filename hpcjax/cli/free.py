"""`hpcjax free`: the GPUs free now, by partition and GPU type (nodes that can take a job now), and
SLURM's estimate of when a layout would start in each partition (`sbatch --test-only`: nothing is
submitted). Here, or on a cluster over SSH (--cluster)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import asdict

from hpcjax.cli import kinds
from hpcjax.cli.reach import add_cluster_options, cluster_from_args
from hpcjax.values.voice import say
from hpcjax.cli.verbs import HELP


def cmd_free(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.job.spec import JobSpec, Layout
    from hpcjax.slurm import commands, fit, free, site
    from hpcjax.values.errors import UsageError
    from hpcjax.slurm.controller import slurm_on

    # the layout and time a job would have, refused by the job's own rules before anything is asked
    spec = JobSpec(command=("true",), layout=Layout(nodes=args.nodes, gpus_per_node=args.gpus_per_node),
                   time=args.time)
    cluster = cluster_from_args(args)
    host = cluster.host()
    slurm = slurm_on(host)
    where = cluster.name
    partitions = {p.name: p for p in site.read_partitions(slurm.run(commands.partitions()))}
    if args.partition is not None:  # one SLURM does not have was an empty answer and exit 0
        fit.chosen(dataclasses.replace(spec, partition=args.partition), list(partitions.values()), where)
    rows = free.by_partition(free.read_nodes(slurm.run(commands.node_gpus(args.partition))), args.gpus_per_node)
    layout = f"{args.nodes} node(s) x {args.gpus_per_node} GPU(s), --time {args.time}"
    say(f"hpcjax free: asking SLURM when {layout} would start in each partition (sbatch --test-only: "
        "nothing is submitted)")
    starts = {}
    for partition in sorted({row.partition for row in rows}):
        try:  # what submit refuses there (a time over the partition's limit, too few such nodes) never starts
            fit.check_partition(dataclasses.replace(spec, partition=partition), partitions.get(partition), where)
        except UsageError as never:
            starts[partition] = f"never: {never.message.split(': SLURM would')[0]}"
            continue
        said = host.run(commands.start_estimate(args.nodes, args.gpus_per_node, args.time, partition))
        starts[partition] = free.read_estimate(said.returncode, said.stderr + said.stdout)
    if args.json:
        print(json.dumps([{**asdict(row), "start": starts[row.partition]} for row in rows], indent=1))
        return 0
    if not rows:
        say("no partition here has GPUs (sinfo's Gres)" + (f" in {args.partition}" if args.partition else ""))
        return 0
    print(f"{'partition':<12} {'GPU':<10} {'nodes':>5} {'free/total':>11} {'fit now':>8}  soonest start of {layout}")
    for row in rows:
        print(f"{row.partition:<12} {row.kind or 'gpu':<10} {row.nodes:>5} {f'{row.free}/{row.total}':>11} "
              f"{row.fitting:>8}  {starts[row.partition]}")
    return 0


def add_free_verb(sub) -> None:
    free = sub.add_parser("free", help=HELP["free"])
    free.add_argument("--nodes", type=kinds.positive, default=1, help="the layout's nodes (default 1)")
    free.add_argument("--gpus-per-node", type=kinds.positive, default=1, help="its GPUs per node (default 1)")
    free.add_argument("--time", default="01:00:00", help="its time limit, which the estimate depends on "
                                                          "(default 01:00:00)")
    free.add_argument("--partition", help="only this partition")
    free.add_argument("--json", action="store_true", help="one object per partition and GPU type on stdout")
    add_cluster_options(free, profile_file=True)
    free.set_defaults(run=cmd_free, takes_command=False)
