"""`hpcjax site`: learn a cluster in one command. Reads its SLURM (here, or over SSH with --cluster)
and one of its compute nodes (hpcjax.slurm.site), prints what it found (stdout; --json for a
program) and writes a site profile into the profiles file, each value commented with where it came
from. A value is written only where the cluster leaves one choice; the others are comments that list
the choices (a person picks). Nothing is written when the profile's name is taken."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from dataclasses import asdict
from datetime import date
from pathlib import Path

from hpcjax.cli.reach import add_cluster_options, cluster_from_args
from hpcjax.slurm import enforce
from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.values.voice import say
from hpcjax.cli.verbs import HELP

PROFILE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a bare TOML key: [profiles.NAME]
NODE_TIMEOUT_S = 600  # the node's step waits in the queue; the rest of the site is written without it
RUNTIMES = (("apptainer", "apptainer"), ("singularity", "singularity"), ("charliecloud", "charliecloud"))


def read(host, partition: str | None, probe: bool, say):
    """The site as this host's SLURM and one compute node show it."""
    from hpcjax.slurm import commands, site as reading
    from hpcjax.slurm.controller import slurm_on

    slurm, found = slurm_on(host), reading.Site()
    say("reading the controller's configuration (scontrol show config) and the partitions (sinfo)")
    found.config = reading.read_config(slurm.run(commands.config()))
    found.partitions = reading.read_partitions(slurm.run(commands.partitions()))
    user = host.run(["id", "-un"]).stdout.strip()
    say(f"reading {user}'s accounts and QOS (sacctmgr)")
    try:
        found.associations = reading.read_rows(slurm.run(commands.associations(user)), commands.ASSOC_FIELDS)
        found.qos = {row["Name"]: row for row in reading.read_rows(slurm.run(commands.qos_limits()),
                                                                    commands.QOS_FIELDS)}
        found.default_account = next(iter(slurm.run(commands.default_account(user)).split()), "")
    except HpcjaxError as error:
        found.unread["accounts"] = f"sacctmgr did not answer ({error.message.splitlines()[0]})"
    say("asking SLURM what it refuses: a job without --time, one without --account (sbatch --test-only: "
        "nothing is submitted)")
    found.refuses_without = refusals_of(host, partition, found.default_account)
    helped = host.run(commands.srun_help())
    found.pyxis = "--container-image" in helped.stdout if helped.returncode == 0 else None
    chosen = partition or getattr(found.default_partition(), "name", None)
    if not probe:
        found.unread["node"] = "not probed (--no-node)"
        return found
    has_gpus = any(p.gpus for p in found.partitions if p.name == chosen)
    say(f"probing one node of partition {chosen or '(the default)'} in a 2-minute step (srun"
        f"{', 1 GPU' if has_gpus else ''}): it waits for a node like any job; --no-node skips it")
    try:
        step = host.run(commands.probe_node(partition, has_gpus, reading.NODE_PROBE), timeout=NODE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        found.unread["node"] = f"no node within {NODE_TIMEOUT_S} s (the queue is busy): run again, or --no-node"
        return found
    if step.returncode != 0:
        found.unread["node"] = f"the probe's step failed: {(step.stderr or step.stdout).strip()[:300]}"
    else:
        found.node = reading.read_node(step.stdout)
    return found


def refusals_of(host, partition: str | None, account: str) -> dict[str, str]:
    """What the site refuses a job without (a submit filter's rule, its enforcement of accounts), in
    SLURM's words: each option left out of a job that is otherwise fine, asked of sbatch --test-only."""
    from hpcjax.slurm import commands

    refused = {}
    for option, argv in (("--time", commands.test_only_without(partition, None, account or None)),
                         ("--account", commands.test_only_without(partition, "00:01:00", None))):
        done = host.run(argv, timeout=30)
        said = [line.removeprefix("sbatch: error: ").strip() for line in (done.stderr + done.stdout).splitlines()
                if line.strip() and "allocation failure" not in line and "Batch job submission failed" not in line]
        if done.returncode != 0:
            refused[option] = "; ".join(said) or (done.stderr + done.stdout).strip()
    return refused


def profile_lines(found, partition: str | None, destination: str | None,
                  through: str | None = None) -> list[tuple[str, str]]:
    """(TOML line, where it came from) for the profile: a value only where the site leaves one choice.
    `destination`: the SSH destination it was read through; `through`: the profile that named it
    (extended, so its way to the cluster, its SSH options and remote directory, stay one)."""
    lines: list[tuple[str, str]] = []
    version = found.config.get("SLURM_VERSION", "?")
    where = found.config.get("ClusterName", "this cluster")
    lines.append((f'description = "written by hpcjax site on {date.today().isoformat()} from {where} '
                  f'(SLURM {version})"', ""))
    if through:
        lines.append((f"extends = {json.dumps(through)}", "the profile this was read through (its host)"))
    elif destination:
        lines.append((f"host = {json.dumps(destination)}", "the SSH destination this was read through"))
    with_gpus = [p for p in found.partitions if p.gpus]
    chosen = next((p for p in found.partitions if p.name == partition), None) if partition else \
        next((p for p in with_gpus if p.default), None) or (with_gpus[0] if len(with_gpus) == 1 else None)
    if chosen is not None:
        why = "--partition" if partition else "sinfo: SLURM's default partition" if chosen.default else \
            "sinfo: the only partition with GPUs"
        lines.append((f"partition = {json.dumps(chosen.name)}", f"{why} ({chosen.nodes} nodes, time limit "
                                                                  f"{chosen.time_limit}, {chosen.state})"))
        per_node = {count for _, count, _ in chosen.gpus}
        kinds = sorted({kind or "untyped" for kind, _, _ in chosen.gpus})
        if len(per_node) == 1:
            lines.append((f"gpus_per_node = {per_node.pop()}", f"sinfo: every GPU node of {chosen.name} has "
                                                                f"that many ({', '.join(kinds)})"))
        elif per_node:
            lines.append(("# gpus_per_node = ?", f"sinfo: {chosen.name}'s nodes differ: "
                                                  + ", ".join(f"{n} x {k or 'gpu'}:{c}" for k, c, n in chosen.gpus)))
        if len(kinds) == 1 and kinds != ["untyped"]:
            lines.append((f"gpu_type = {json.dumps(kinds[0])}", f"sinfo: {chosen.name}'s GPUs are typed "
                                                                 f"{kinds[0]} (--gpus-per-node={kinds[0]}:N)"))
        elif len(kinds) > 1:
            lines.append(("# gpu_type = ?", f"sinfo: {chosen.name} has GPUs of {len(kinds)} kinds, "
                                            f"{', '.join(kinds)}: a job may name one (--gpu-type), or take any"))
        others = [p.name for p in with_gpus if p is not chosen]
        if others:
            lines.append(("# other partitions with GPUs", f"sinfo: {', '.join(others)} (`hpcjax site --partition NAME "
                                                          "--name NAME` writes a profile for one)"))
    elif with_gpus:
        lines.append(("# partition = ?", "sinfo: partitions with GPUs, none SLURM's default: "
                                         + ", ".join(p.name for p in with_gpus)))
    accounts = sorted({row["Account"] for row in found.associations if row.get("Account")})
    if "--account" in found.refuses_without and found.default_account:
        lines.append((f"account = {json.dumps(found.default_account)}", "sbatch --test-only: the site refuses a job "
                      f"without --account ({found.refuses_without['--account']}); your default account (sacctmgr)"
                      + (f"; yours are {', '.join(accounts)}" if len(accounts) > 1 else "")))
    elif "--account" in found.refuses_without:
        lines.append(("# account = ?", "sbatch --test-only: the site refuses a job without --account ("
                      f"{found.refuses_without['--account']}); yours: {', '.join(accounts) or 'none readable'}"))
    elif len(accounts) > 1:
        lines.append(("# account = ?", f"sacctmgr: yours are {', '.join(accounts)}; SLURM uses your default one "
                                       "unless a job names another"))
    for qos in sorted({q for row in found.associations for q in row.get("QOS", "").split(",") if q}):
        said = ", ".join(f"{k} {v}" for k, v in found.qos.get(qos, {}).items() if k != "Name" and v)
        if said:
            lines.append((f"# qos {qos}", f"sacctmgr: limits {said}"))
    if "--time" in found.refuses_without:
        lines.append(("# time", "sbatch --test-only: the site refuses a job without --time ("
                      f"{found.refuses_without['--time']}); hpcjax always gives one (--time, 01:00:00 unless set)"))
    runtimes = [name for key, name in RUNTIMES if key in found.node]
    if found.pyxis and "enroot" in found.node:
        runtimes.append("pyxis")
    if found.node:
        if len(runtimes) == 1:
            lines.append((f"runtime = {json.dumps(runtimes[0])}", f"the node: {runtimes[0]} is its only "
                                                                  "container runtime"))
        elif runtimes:
            lines.append(("# runtime = ?", f"the node has {', '.join(runtimes)}: pick one"))
        else:
            lines.append(("# runtime", "the node has no container runtime: jobs run in the node's own Python"))
        if found.node.get("modules"):
            lines.append(("# modules = [...]", "the node's modules that JAX may need (pick): "
                                               + ", ".join(found.node["modules"][:12])))
    return lines


def profile_text(name: str, lines: list[tuple[str, str]]) -> str:
    body = "".join(f"{line}{'  # ' + why if why and not line.startswith('#') else ': ' + why if why else ''}\n"
                   for line, why in lines)
    return f"\n[profiles.{name}]\n{body}"


def summary(found) -> str:
    """What a person checks at a glance (stdout)."""
    out = [f"SLURM {found.config.get('SLURM_VERSION', '?')} ({found.config.get('ClusterName', '?')}), "
           f"{found.config.get('SelectType', '?')}, GRES types {found.config.get('GresTypes', 'none')}, "
           f"MPI default {found.config.get('MpiDefault', '?')}"]
    for p in found.partitions:
        gpus = ", ".join(f"{n} x gpu{':' + k if k else ''}:{c}" for k, c, n in p.gpus) or "no GPUs"
        out.append(f"partition {p.name}{' (default)' if p.default else ''}: {p.nodes} nodes, {gpus}, "
                   f"time limit {p.time_limit}, {p.state}")
    for row in found.associations:
        out.append(f"account {row.get('Account') or '?'}" + (f" on {row['Partition']}" if row.get("Partition") else "")
                   + f": QOS {row.get('QOS') or '-'}" + (f", limits {row['MaxTRES']}" if row.get("MaxTRES") else ""))
    if found.node:
        node = found.node
        out.append(f"node {node.get('node', ['?'])[0]}: " + "; ".join(
            f"{key} {', '.join(node[key])}" for key in ("apptainer", "singularity", "charliecloud", "enroot", "gpu",
                                                         "cuda") if key in node)
            + ("; module command" if "module" in node else "; no module command"))
    rules = ",".join(sorted(enforce.enforced(found.config))) or "none"
    out.append(f"enforced: {rules} (AccountingStorageEnforce)" + "".join(
        f"; refuses a job without {option}: {words}" for option, words in found.refuses_without.items()))
    out.append(f"pyxis (srun --container-image): {'yes' if found.pyxis else 'no' if found.pyxis is False else '?'}")
    out += [f"not read: {what}: {why}" for what, why in found.unread.items()]
    return "\n".join(out)


def cmd_site(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.job import profiles

    from hpcjax.cli import checkoptions

    check = checkoptions.asked(args)
    if check is not None:
        from hpcjax.cli import acceptance

        return acceptance.run(check, lambda text: say(text, "site --check"))
    cluster = cluster_from_args(args)
    host = cluster.host()
    path = Path(args.profile_file).expanduser() if args.profile_file else profiles.default_path()
    if path.exists() and not path.is_file():
        raise UsageError(f"the profiles file {str(path)!r} is not a file", "name a file with --profile-file")
    _, existing = profiles.load(path) if path.is_file() else (path, {})

    found = read(host, args.partition, not args.no_node, lambda text: say(text, "site"))
    name = args.name if args.name is not None else found.config.get("ClusterName") or "site"
    if not PROFILE_NAME.fullmatch(name):
        raise UsageError(f"profile name {name!r}: a profile's name is letters, digits, - and _",
                         "give one with --name, e.g. --name mycluster")
    if name in existing and not args.print:
        raise UsageError(f"profile {name!r} is already in {path}: nothing was written",
                         "give another name (--name), or remove its [profiles." + name + "] section first")
    if args.partition and args.partition not in {p.name for p in found.partitions}:
        raise UsageError(f"--partition {args.partition!r}: the cluster has no such partition",
                         f"its partitions: {', '.join(p.name for p in found.partitions) or 'none'}")
    through = args.cluster if args.cluster in existing else None
    text = profile_text(name, profile_lines(found, args.partition, cluster.destination, through))
    if args.json:
        print(json.dumps({**asdict(found), "profile": {"name": name, "text": text}}, indent=1))
    else:
        print(summary(found))
    if args.print:
        print(text, end="")
        return 0
    profiles.add_section(path, name, text)
    say(f"wrote profile {name} to {path}: `hpcjax profile show {name}`; use it with --profile {name}", "site")
    return 0


def add_site_verb(sub) -> None:
    site = sub.add_parser("site", help=HELP["site"])
    site.add_argument("--name", help="the profile's name (default: the cluster's ClusterName)")
    site.add_argument("--partition", help="the partition to write and to probe a node of (default: SLURM's default)")
    site.add_argument("--no-node", action="store_true", help="do not probe a compute node (no step is run)")
    site.add_argument("--print", action="store_true", help="print the profile instead of writing it")
    site.add_argument("--json", action="store_true", help="what was read as JSON on stdout")
    add_cluster_options(site, profile_file=True)
    from hpcjax.cli.checkoptions import add_check_options

    add_check_options(site)
    site.set_defaults(run=cmd_site, takes_command=False)
