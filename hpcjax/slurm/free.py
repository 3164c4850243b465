"""What is free now, and when a layout would start (`hpcjax free`): each node's GPUs and the GPUs
its jobs use (sinfo's Gres and GresUsed), summed by partition and GPU type over the nodes that can
take a job now; and SLURM's own estimate of a layout's start (`sbatch --test-only`, which submits
nothing). Readers of the commands' text, so the formats are tested without a cluster."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from hpcjax.slurm.site import gpus_of

# A node that can take a job now (sinfo's StateLong): idle or mixed, also powered down (~, it boots for
# the job); not one that does not respond (*), is reserved for maintenance ($), or waits to reboot (@).
TAKES_JOBS = ("idle", "mixed", "idle~", "mixed~")
USED = re.compile(r"gpu(?::(?P<type>[^:(,]+))?:(?P<count>\d+)")
START = re.compile(r"to start at (\S+)")


@dataclass(frozen=True)
class NodeGpus:
    node: str
    partition: str
    state: str
    gpus: tuple[tuple[str, int], ...]  # (type or "", count)
    used: tuple[tuple[str, int], ...]

    def free(self, kind: str) -> int:
        """Free GPUs of a type on this node, 0 where it cannot take a job now."""
        if self.state not in TAKES_JOBS:
            return 0
        total = sum(c for k, c in self.gpus if k == kind)
        # GresUsed names a type where the GRES has one; an untyped count is the node's only kind then
        used = sum(c for k, c in self.used if k == kind or (not k and len({g for g, _ in self.gpus}) == 1))
        return max(0, total - used)


def read_nodes(text: str) -> list[NodeGpus]:
    """sinfo -h -N -O NODE_GPUS_FORMAT: a node once per partition it is in."""
    found = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 5:
            continue
        node, partition, state, gres, used = parts[:5]
        found.append(NodeGpus(node, partition.rstrip("*"), state, tuple(gpus_of(gres)),
                              tuple((m["type"] or "", int(m["count"])) for m in USED.finditer(used or ""))))
    return found


@dataclass(frozen=True)
class Free:
    partition: str
    kind: str  # the GPU type, "" untyped
    nodes: int
    total: int
    free: int
    fitting: int  # nodes with at least the layout's GPUs per node free now


def by_partition(nodes: list[NodeGpus], gpus_per_node: int) -> list[Free]:
    rows: dict[tuple[str, str], list[NodeGpus]] = {}
    for node in nodes:
        for kind, _ in node.gpus:
            rows.setdefault((node.partition, kind), []).append(node)
    return [Free(partition, kind, len(group), sum(c for n in group for k, c in n.gpus if k == kind),
                 sum(n.free(kind) for n in group), sum(n.free(kind) >= gpus_per_node for n in group))
            for (partition, kind), group in sorted(rows.items())]


def read_estimate(returncode: int, said: str, now: datetime | None = None) -> str:
    """sbatch --test-only's answer as words: `now`, `2026-11-27 05:45:58`, or `never: SLURM's reason`."""
    found = START.search(said)
    if returncode == 0 and found:
        when, now = datetime.fromisoformat(found[1]), now or datetime.now()
        if (when - now).days > 365:  # seen in CI: 2537, behind a job with no time limit
            return f"not known (SLURM's estimate, {when.date()}, means a job ahead of it has no time limit)"
        return "now" if when <= now else when.isoformat(sep=" ")
    reason = [line.strip() for line in said.splitlines() if line.strip()]
    return "never: " + (reason[-1].removeprefix("allocation failure: ") if reason else "sbatch refused it")
