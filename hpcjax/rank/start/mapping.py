"""A process's environment -> DistributedEnv: a pure function, testable without JAX or SLURM.

Precedence for every value: explicit arguments > JAX's own variables > the
launcher that started this process (the srun step, or submitit's local
executor) > one process. Each launcher has its own reader (`launchers`); this
module picks the launcher, composes the readings, derives the GPU ordinals and
the platform, and checks the result against the layout hpcjax rendered. Every
value remembers where it came from, so `hpcjax env` can explain it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Mapping

from hpcjax.protocol import contract
from hpcjax.values.errors import LayoutError
from hpcjax.rank.start import launchers
from hpcjax.rank.start.launchers import JAX_LOCAL_DEVICE_IDS, SLURM_JOB_ID, env_int

JAX_PLATFORMS = "JAX_PLATFORMS"
SLURM_GPUS_ON_NODE = "SLURM_GPUS_ON_NODE"
CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
PORT_BASE = contract.PORT_BASE


@dataclass(frozen=True)
class DistributedEnv:
    coordinator_host: str
    coordinator_port: int
    num_processes: int
    process_id: int
    local_device_ids: tuple[int, ...] | None  # GPU ordinals after CUDA_VISIBLE_DEVICES renumbering
    devices_per_process: int  # K: GPUs this process owns (CPU devices emulated on CPU)
    platform: str  # "gpu" or "cpu"
    launcher: str  # "srun", "submitit-local", "jax-env" or "single"
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def coordinator_address(self) -> str:
        return f"{self.coordinator_host}:{self.coordinator_port}"

    @property
    def is_distributed(self) -> bool:
        return self.num_processes > 1

    def as_dict(self) -> dict:
        return {**asdict(self), "coordinator_address": self.coordinator_address}

    def explain(self) -> str:
        rows = [("coordinator", self.coordinator_address, "coordinator"),
                ("processes", self.num_processes, "num_processes"),
                ("process id", self.process_id, "process_id"),
                ("devices per process", self.devices_per_process, "devices_per_process"),
                ("local device ids", list(self.local_device_ids) if self.local_device_ids is not None
                 else "- (CPU devices)", "local_device_ids"),
                ("platform", self.platform, "platform")]
        lines = [f"launcher: {self.launcher}"]
        lines += [f"{name:<20} {str(value):<24} from {self.sources.get(key, '-')}"
                  for name, value, key in rows]
        return "\n".join(lines)


def visible_gpu_count(environ: Mapping[str, str]) -> int | None:
    """How many GPUs CUDA_VISIBLE_DEVICES shows (integers, GPU-UUIDs or MIG ids alike)."""
    value = environ.get(CUDA_VISIBLE_DEVICES)
    if value is None:
        return None
    return len([entry for entry in value.split(",") if entry.strip()])


def device_ids_for(local_rank: int, k: int, visible: int | None) -> tuple[int, ...]:
    """Ordinals (after CUDA renumbering) that a process with this local rank owns."""
    if visible is not None and visible == k:
        return tuple(range(k))  # SLURM bound exactly this process's GPUs (--gpus-per-task)
    if visible is not None and visible < (local_rank + 1) * k:
        if k == 1:
            raise LayoutError(
                f"local rank {local_rank} needs a GPU of its own but only {visible} are visible "
                f"(CUDA_VISIBLE_DEVICES): more processes than GPUs on this node",
                "ask for one GPU per task: `#SBATCH --gpus-per-node=<tasks per node>` with "
                "`srun --gpus-per-task=1`, or lower `#SBATCH --ntasks-per-node`")
        raise LayoutError(
            f"local rank {local_rank} needs GPUs {local_rank * k}..{(local_rank + 1) * k - 1} "
            f"({k} per process) but only {visible} are visible (CUDA_VISIBLE_DEVICES)",
            f"give each task {k} GPUs: `srun --gpus-per-task={k}` and "
            f"`#SBATCH --gpus-per-node=<{k} x tasks per node>`")
    return tuple(range(local_rank * k, (local_rank + 1) * k))


def _platform(environ: Mapping[str, str], gpu_available: bool, explicit: str | None) -> tuple[str, str]:
    if explicit:
        return explicit, "argument"
    if environ.get(contract.PLATFORM_ENV):
        return environ[contract.PLATFORM_ENV], contract.PLATFORM_ENV
    forced = environ.get(JAX_PLATFORMS, "").split(",")[0].strip().lower()
    if forced:
        return ("cpu" if forced == "cpu" else "gpu"), JAX_PLATFORMS
    return ("gpu", "a CUDA device and JAX's CUDA plugin") if gpu_available else \
        ("cpu", "no GPU usable by JAX: GPUs emulated as CPU devices")


def check_layout(environ: Mapping[str, str], num_processes: int, nodes: int | None) -> None:
    """The layout hpcjax rendered must be what the launcher started."""
    layout = contract.Layout.from_env(environ)
    if layout is None:
        return
    if layout.num_processes != num_processes:
        raise LayoutError(
            f"the layout ({layout.nodes} nodes x {layout.gpus_per_node} GPUs, {layout.gpus_per_process} per "
            f"process) needs {layout.num_processes} processes but {num_processes} were started",
            f"set `#SBATCH --nodes={layout.nodes}` and `#SBATCH --ntasks-per-node={layout.tasks_per_node}` "
            f"(and srun --ntasks={layout.num_processes}), or re-render the script with hpcjax")
    if nodes is not None and nodes != layout.nodes:
        raise LayoutError(f"the layout needs {layout.nodes} nodes but the step runs on {nodes}",
                          f"set `#SBATCH --nodes={layout.nodes}`")


def which_launcher(environ: Mapping[str, str], given: launchers.Reading) -> str:
    """srun step > submitit-local > JAX's variables alone > one process; python run
    inside a SLURM job but outside srun is refused (it would be one process of many)."""
    if launchers.in_srun_step(environ):
        return "srun"
    if launchers.in_submitit_local(environ):
        return "submitit-local"
    if launchers.jax_env_complete(given):
        return "jax-env"
    if SLURM_JOB_ID in environ:
        k = environ.get(contract.GPUS_PER_PROCESS_ENV, "1")
        raise LayoutError(f"python runs inside SLURM job {environ[SLURM_JOB_ID]} but outside an srun step, "
                          "so there is one process instead of one per task",
                          f"launch every rank with srun inside the job, e.g. `srun --gpus-per-task={k} python "
                          "train.py`, or let `hpcjax render` write the script")
    return "single"


def resolve(environ: Mapping[str, str], *, gpu_available: bool = False,
            coordinator_address: str | None = None, num_processes: int | None = None,
            process_id: int | None = None, local_device_ids: list[int] | None = None,
            devices_per_process: int | None = None, platform: str | None = None) -> DistributedEnv:
    """Everything jax.distributed.initialize needs, and why, from an environment."""
    given = {**launchers.read_jax_env(environ),
             **launchers.read_arguments(coordinator_address, num_processes=num_processes, process_id=process_id)}
    launcher = which_launcher(environ, given)
    reading = {**launchers.read_single_process(environ), **launchers.READERS[launcher](environ), **given}
    n, pid = reading["num_processes"].value, reading["process_id"].value
    if not 0 <= pid < n:
        raise LayoutError(f"process id {pid} is outside 0..{n - 1}",
                          "check JAX_PROCESS_ID / JAX_NUM_PROCESSES or the srun task count")
    if launcher in ("srun", "submitit-local"):
        check_layout(environ, n, reading["num_nodes"].value if "num_nodes" in reading else None)
    sources = {"num_processes": reading["num_processes"].source, "process_id": reading["process_id"].source,
               "coordinator": f"host: {reading['coordinator_host'].source}; "
                              f"port: {reading['coordinator_port'].source}"}
    k = devices_per_process or env_int(environ, contract.GPUS_PER_PROCESS_ENV)
    sources["devices_per_process"] = ("argument" if devices_per_process else contract.GPUS_PER_PROCESS_ENV
                                      if k else "default (one GPU per process)")
    chosen_platform, sources["platform"] = _platform(environ, gpu_available, platform)
    ids, sources["local_device_ids"] = _device_ids(environ, local_device_ids, reading["local_rank"].value,
                                                   k or 1, chosen_platform)
    return DistributedEnv(coordinator_host=reading["coordinator_host"].value,
                          coordinator_port=reading["coordinator_port"].value, num_processes=n, process_id=pid,
                          local_device_ids=ids, devices_per_process=k or 1, platform=chosen_platform,
                          launcher=launcher, sources=sources)


def _device_ids(environ, explicit, local_rank: int, k: int, platform: str) -> tuple[tuple[int, ...] | None, str]:
    """The GPU ordinals this process owns, and where they came from."""
    if explicit is not None:
        return tuple(explicit), "argument"
    visible = visible_gpu_count(environ)
    if environ.get(JAX_LOCAL_DEVICE_IDS):
        text = environ[JAX_LOCAL_DEVICE_IDS]
        try:
            ids = tuple(int(x) for x in text.split(","))
        except ValueError:
            raise LayoutError(f"{JAX_LOCAL_DEVICE_IDS}={text!r} is not a comma-separated list of integers",
                              "e.g. JAX_LOCAL_DEVICE_IDS=0,1") from None
        if platform == "gpu" and visible is not None and max(ids) >= visible:
            # Ordinals count the GPUs this task sees, not the node's (jax#23452).
            raise LayoutError(f"{JAX_LOCAL_DEVICE_IDS}={text} names GPU ordinal {max(ids)} but this task sees "
                              f"{visible} GPU(s) ({CUDA_VISIBLE_DEVICES}={environ[CUDA_VISIBLE_DEVICES]!r})",
                              f"ordinals count from 0 among the visible GPUs: use 0..{visible - 1}, or unset "
                              f"{JAX_LOCAL_DEVICE_IDS} and let hpcjax derive them")
        return ids, JAX_LOCAL_DEVICE_IDS
    if not visible and platform == "cpu":  # unset, or "" as submitit's local executor sets it
        return None, f"none: {k} emulated CPU device(s) instead"
    if visible is None:
        visible = env_int(environ, SLURM_GPUS_ON_NODE) or env_int(environ, contract.GPUS_PER_NODE_ENV)
    return device_ids_for(local_rank, k, visible), (
        f"local rank {local_rank}, {k} per process, {visible} visible in "
        f"{CUDA_VISIBLE_DEVICES}={environ.get(CUDA_VISIBLE_DEVICES)!r}")
