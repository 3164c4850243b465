"""Whether a job can ever run where it asks, read from the site before sbatch: the partition exists,
has GPUs of the type asked for (`--gpu-type`), enough nodes with that many of them, and a time limit
the job fits; its QOS lets it have that many GPUs for that long. SLURM takes such a job and keeps it
pending for ever (PartitionTimeLimit, QOSMaxGRESPerJob, ...) or refuses it with a terse line; this says
what the site has, before anything is submitted. What cannot be read (no accounting, a partition list
that did not answer) is not guessed at: that check is left to SLURM."""

from __future__ import annotations

from hpcjax.values.errors import SpecError, UsageError
from hpcjax.job.spec import JobSpec
from hpcjax.job.walltime import format_walltime, parse_walltime
from hpcjax.slurm.site import Partition, gpu_limit

PARTITION_HINT = "`sinfo -o '%P %D %G %l'` lists the partitions; `hpcjax free` shows what each has free"


class QosLimit(UsageError):
    """The job is over a limit of its QOS: held for ever where the site enforces limits (hpcjax.slurm.enforce)."""


def check(spec: JobSpec, partitions: list[Partition], qos: dict[str, dict], where: str) -> None:
    """UsageError when the job could never start in its partition or under its QOS (see the module)."""
    if partitions:
        check_partition(spec, chosen(spec, partitions, where), where)
    if spec.qos and spec.qos in qos:
        check_qos(spec, qos[spec.qos])


def chosen(spec: JobSpec, partitions: list[Partition], where: str) -> Partition | None:
    """The job's partition (SLURM's default when it names none). A list (gpu,a100: SLURM starts the job in
    whichever can first) is checked for names only; what each could run is left to SLURM."""
    if spec.partition is None:
        return next((p for p in partitions if p.default), None)
    names = {p.name: p for p in partitions}
    unknown = [name for name in spec.partition.split(",") if name not in names]
    if unknown:
        raise UsageError(f"--partition {spec.partition!r}: {where} has no partition {', '.join(unknown)}; it has "
                         f"{', '.join(p.name + (' (default)' if p.default else '') for p in partitions)}",
                         PARTITION_HINT)
    return names.get(spec.partition)


def check_partition(spec: JobSpec, partition: Partition | None, where: str) -> None:
    if partition is None:
        return
    layout, name = spec.layout, f"partition {partition.name}"
    if spec.gpu_type:
        types = sorted({kind for kind, _, _ in partition.gpus if kind})
        if spec.gpu_type not in types:
            has = ", ".join(f"{nodes} node(s) of gpu:{kind + ':' if kind else ''}{count}"
                            for kind, count, nodes in partition.gpus) or "no GPUs"
            raise UsageError(f"--gpu-type {spec.gpu_type}: {name} of {where} has no GPU of that type; it has {has}",
                             (f"--gpu-type {' or '.join(types)}" if types else "leave --gpu-type out (its GPUs are "
                              "untyped)") + f", or another partition: {PARTITION_HINT}")
    wanted = spec.gpu_type or ""
    fitting = sum(nodes for kind, count, nodes in partition.gpus
                  if (kind == wanted or not wanted) and count >= layout.gpus_per_node)
    needed = layout.nodes + spec.spares
    if partition.gpus and fitting < needed:
        most = max((count for kind, count, _ in partition.gpus if kind == wanted or not wanted), default=0)
        what = f"{spec.gpu_type} GPUs" if spec.gpu_type else "GPUs"
        raise UsageError(f"the job needs {needed} node(s) with {layout.gpus_per_node} {what} each; {name} of {where} "
                         f"has {fitting} such node(s) (at most {most} {what} on a node)",
                         f"ask for what it has (--nodes, --gpus-per-node at most {most}), or another partition: "
                         + PARTITION_HINT)
    limit = seconds(partition.time_limit)
    if limit is not None and spec.time_seconds is not None and spec.time_seconds > limit:
        raise UsageError(f"--time {spec.time} is over {name}'s limit of {format_walltime(limit)}: SLURM would keep the "
                         "job pending for ever (PartitionTimeLimit)",
                         f"ask for at most --time {format_walltime(limit)} (save and resume across jobs: `hpcjax "
                         "train` checkpoints), or another partition: " + PARTITION_HINT)


def check_qos(spec: JobSpec, limits: dict) -> None:
    gpus = spec.layout.nodes * spec.layout.gpus_per_node
    for field, per in (("MaxTRES", "per job"), ("MaxTRESPU", "per user")):
        most = gpu_limit(limits.get(field, ""))
        if most is not None and gpus > most:
            raise QosLimit(f"the job asks for {gpus} GPUs; QOS {spec.qos} allows {most} {per} ({field} "
                             f"{limits[field]}): SLURM would keep it pending for ever",
                             f"ask for at most {most} GPUs (--nodes x --gpus-per-node), or another QOS: "
                             "`sacctmgr show assoc user=$USER format=qos` lists yours")
    most_time = seconds(limits.get("MaxWall", ""))
    if most_time is not None and spec.time_seconds is not None and spec.time_seconds > most_time:
        raise QosLimit(f"--time {spec.time} is over QOS {spec.qos}'s MaxWall of {format_walltime(most_time)}: SLURM "
                       "would keep it pending for ever",
                       f"ask for at most --time {format_walltime(most_time)}, or another QOS")


def seconds(limit: str) -> int | None:
    """A limit as sinfo or sacctmgr print it (2:00:00, 1-00:00:00, infinite, empty), None for none."""
    try:
        return parse_walltime(limit) if limit.strip() else None
    except SpecError:  # a form this reader does not know: not guessed at
        return None
