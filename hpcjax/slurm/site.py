"""A site read from its SLURM (`hpcjax site`): the controller's configuration, the partitions with
their GPUs by type, the user's accounts and QOS with their limits, and what one compute node has
(container runtimes, GPUs and driver, the module command and the modules a JAX job may load).
Each value keeps where it came from; what cannot be read is left out with the reason, never guessed.
The readers take the commands' text, so the formats are tested without a cluster."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hpcjax.slurm import versions
from hpcjax.slurm.commands import PARTITION_FORMAT

# scontrol show config: what a profile or a person needs from it
CONFIG_KEYS = ("SLURM_VERSION", "ClusterName", "SelectType", "SelectTypeParameters", "GresTypes", "MpiDefault",
               "KillWait", "MinJobAge", "AccountingStorageType", "SchedulerType", "AccountingStorageEnforce")
# The modules a JAX job may load, by name.
MODULE_WORDS = re.compile(r"jax|cuda|cudnn|nccl", re.I)

# Run on one compute node (bash -l: the login environment, where `module` is defined): KEY=VALUE lines.
NODE_PROBE = r'''
say() { printf '%s=%s\n' "$1" "$(printf '%s' "$2" | head -n 1)"; }
export USER="${USER:-$(id -un)}"  # a step's environment may lack it, and ch-run refuses to start without it
say node "${SLURMD_NODENAME:-$(hostname)}"
command -v apptainer >/dev/null && say apptainer "$(apptainer --version 2>&1)"
command -v singularity >/dev/null && say singularity "$(singularity --version 2>&1)"
command -v ch-run >/dev/null && say charliecloud "$(ch-run --version 2>&1)"
command -v enroot >/dev/null && say enroot "$(enroot version 2>&1)"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | while IFS= read -r g; do say gpu "$g"; done
  say cuda "$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p')"
fi
if type module >/dev/null 2>&1; then
  say module yes
  module -t avail 2>&1 | grep -iE 'jax|cuda|cudnn|nccl' | sort -u | head -n 40 | while IFS= read -r m; do say modules "$m"; done
fi
exit 0
'''


@dataclass(frozen=True)
class Partition:
    name: str
    default: bool
    state: str  # up, down, drain, inact
    time_limit: str  # SLURM's: infinite, 1-00:00:00, 2:00:00
    nodes: int
    gpus: tuple[tuple[str, int, int], ...]  # (type, or "" untyped; GPUs per node; nodes with that many)


@dataclass
class Site:
    config: dict[str, str] = field(default_factory=dict)
    partitions: list[Partition] = field(default_factory=list)
    associations: list[dict] = field(default_factory=list)  # sacctmgr's rows, the user's
    qos: dict[str, dict] = field(default_factory=dict)  # name: its limits
    node: dict[str, list[str]] = field(default_factory=dict)  # what the probe said, by key
    pyxis: bool | None = None  # srun --help names --container-image (pyxis's SPANK plugin)
    unread: dict[str, str] = field(default_factory=dict)  # what was not read, and why
    default_account: str = ""  # sacctmgr's DefaultAccount of the user ('' not known)
    refuses_without: dict[str, str] = field(default_factory=dict)  # option: SLURM's words refusing a job without it

    @property
    def version(self) -> tuple[int, int] | None:
        return versions.parse(self.config.get("SLURM_VERSION", ""))

    def default_partition(self) -> Partition | None:
        return next((p for p in self.partitions if p.default), None)


def read_config(text: str) -> dict[str, str]:
    """`scontrol show config`'s `Key = value` lines, the keys hpcjax reads."""
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in CONFIG_KEYS:
            found[key.strip()] = value.strip()
    return found


GRES = re.compile(r"^gpu(?::(?P<type>[^:(,]+))?:(?P<count>\d+)")


def gpus_of(gres: str) -> list[tuple[str, int]]:
    """sinfo's %G of one node configuration: `gpu:a100:4(S:0-1),gpu:v100:2`, `gpu:4`, `(null)`."""
    found = []
    for part in re.split(r",(?![^(]*\))", gres or ""):
        match = GRES.match(part.strip())
        if match:
            found.append((match["type"] or "", int(match["count"])))
    return found


def read_partitions(text: str) -> list[Partition]:
    """sinfo -h -o PARTITION_FORMAT: a partition's lines (one per node configuration) as one."""
    by_name: dict[str, dict] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != PARTITION_FORMAT.count("|") + 1:
            continue
        name, state, limit, nodes, _cpus, _memory, gres = parts
        entry = by_name.setdefault(name.rstrip("*"), {"default": name.endswith("*"), "state": state,
                                                      "time_limit": limit, "nodes": 0, "gpus": []})
        count = int(nodes) if nodes.isdigit() else 0
        entry["nodes"] += count
        entry["gpus"] += [(kind, per_node, count) for kind, per_node in gpus_of(gres)]
    return [Partition(name, e["default"], e["state"], e["time_limit"], e["nodes"], tuple(e["gpus"]))
            for name, e in by_name.items()]


def read_rows(text: str, fields: tuple[str, ...]) -> list[dict]:
    """sacctmgr -n -P rows in these fields."""
    rows = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) >= len(fields):
            rows.append(dict(zip(fields, (p.strip() for p in parts))))
    return rows


def read_node(text: str) -> dict[str, list[str]]:
    """NODE_PROBE's KEY=VALUE lines: each key's values in order (gpu and modules repeat)."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.isidentifier() and value.strip():
            found.setdefault(key, []).append(value.strip())
    return found


def gpu_limit(tres: str) -> int | None:
    """A TRES limit's GPUs: `gres/gpu=8,cpu=64` or `gres/gpu:a100=4` gives 8 or 4; None without one."""
    found = re.search(r"gres/gpu(?::[^=,]+)?=(\d+)", tres or "")
    return int(found[1]) if found else None
