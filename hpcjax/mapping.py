"""SLURM's environment -> DistributedEnv: a pure function, testable without JAX or SLURM.

Precedence for every value (DESIGN.md, runtime mapping rules): explicit
arguments > JAX_* variables > the srun step > submitit's local executor > one
process. Each value remembers where it came from, so `hpcjax env` can explain it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Mapping

from hpcjax.errors import LayoutError
from hpcjax.nodelist import expand_hostlist

# What JAX itself reads, honoured first.
JAX_COORDINATOR_ADDRESS = "JAX_COORDINATOR_ADDRESS"
JAX_COORDINATOR_PORT = "JAX_COORDINATOR_PORT"
JAX_LOCAL_DEVICE_IDS = "JAX_LOCAL_DEVICE_IDS"
JAX_NUM_PROCESSES = "JAX_NUM_PROCESSES"
JAX_PROCESS_ID = "JAX_PROCESS_ID"
JAX_PLATFORMS = "JAX_PLATFORMS"
# What srun sets for every task of a step.
SLURM_JOB_ID = "SLURM_JOB_ID"
SLURM_STEP_ID = "SLURM_STEP_ID"
SLURM_STEP_NODELIST = "SLURM_STEP_NODELIST"
SLURM_STEP_NUM_TASKS = "SLURM_STEP_NUM_TASKS"
SLURM_STEP_NUM_NODES = "SLURM_STEP_NUM_NODES"
SLURM_NTASKS = "SLURM_NTASKS"
SLURM_PROCID = "SLURM_PROCID"
SLURM_LOCALID = "SLURM_LOCALID"
SLURM_GPUS_ON_NODE = "SLURM_GPUS_ON_NODE"
CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
# What submitit's local executor (and hpcjax's local backend) sets.
SUBMITIT_LOCAL_JOB_ID = "SUBMITIT_LOCAL_JOB_ID"
SUBMITIT_LOCAL_NTASKS = "SUBMITIT_LOCAL_NTASKS"
SUBMITIT_LOCAL_GLOBALID = "SUBMITIT_LOCAL_GLOBALID"
SUBMITIT_LOCAL_LOCALID = "SUBMITIT_LOCAL_LOCALID"
# What hpcjax's rendered scripts set: the layout, and a platform override.
HPCJAX_NODES = "HPCJAX_NODES"
HPCJAX_GPUS_PER_NODE = "HPCJAX_GPUS_PER_NODE"
HPCJAX_GPUS_PER_PROCESS = "HPCJAX_GPUS_PER_PROCESS"
HPCJAX_PLATFORM = "HPCJAX_PLATFORM"

LOCALHOST = "127.0.0.1"
# Derived ports stay below Linux's ephemeral range (32768+), where an outgoing
# connection could already hold the port: 10000 + 16 * (job % 1400) + step % 16.
PORT_BASE, PORT_JOBS, PORT_STEPS = 10000, 1400, 16


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


def _int(environ: Mapping[str, str], name: str) -> int | None:
    value = environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise LayoutError(f"{name}={value!r} is not an integer",
                          f"unset {name} or give it a whole number") from None


def _srun_hint(environ: Mapping[str, str]) -> str:
    k = environ.get(HPCJAX_GPUS_PER_PROCESS, "1")
    return (f"launch every rank with srun inside the job, e.g. `srun --gpus-per-task={k} python train.py`, "
            "or let `hpcjax render` write the script")


def _split_address(address: str) -> tuple[str, int | None]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return address, None
    return host, int(port)


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
    if environ.get(HPCJAX_PLATFORM):
        return environ[HPCJAX_PLATFORM], HPCJAX_PLATFORM
    forced = environ.get(JAX_PLATFORMS, "").split(",")[0].strip().lower()
    if forced:
        return ("cpu" if forced == "cpu" else "gpu"), JAX_PLATFORMS
    return ("gpu", "a CUDA device and JAX's CUDA plugin") if gpu_available else \
        ("cpu", "no GPU usable by JAX: GPUs emulated as CPU devices")


def _check_layout(environ: Mapping[str, str], num_processes: int, nodes: int | None) -> None:
    """Rule 7: the layout hpcjax rendered must be what SLURM started."""
    want_nodes, gpus, k = (_int(environ, n) for n in (HPCJAX_NODES, HPCJAX_GPUS_PER_NODE,
                                                       HPCJAX_GPUS_PER_PROCESS))
    if not (want_nodes and gpus and k):
        return
    per_node = gpus // k
    if want_nodes * per_node != num_processes:
        raise LayoutError(
            f"the layout ({want_nodes} nodes x {gpus} GPUs, {k} per process) needs "
            f"{want_nodes * per_node} processes but {num_processes} were started",
            f"set `#SBATCH --nodes={want_nodes}` and `#SBATCH --ntasks-per-node={per_node}` "
            f"(and srun --ntasks={want_nodes * per_node}), or re-render the script with hpcjax")
    if nodes is not None and nodes != want_nodes:
        raise LayoutError(f"the layout needs {want_nodes} nodes but the step runs on {nodes}",
                          f"set `#SBATCH --nodes={want_nodes}`")


def resolve(environ: Mapping[str, str], *, gpu_available: bool = False,
            coordinator_address: str | None = None, num_processes: int | None = None,
            process_id: int | None = None, local_device_ids: list[int] | None = None,
            devices_per_process: int | None = None, platform: str | None = None) -> DistributedEnv:
    """Everything jax.distributed.initialize needs, and why, from an environment."""
    sources: dict[str, str] = {}
    in_step = SLURM_STEP_ID in environ and SLURM_PROCID in environ
    local = SUBMITIT_LOCAL_JOB_ID in environ
    overridden = (coordinator_address or environ.get(JAX_COORDINATOR_ADDRESS)) and \
        (num_processes is not None or JAX_NUM_PROCESSES in environ) and \
        (process_id is not None or JAX_PROCESS_ID in environ)
    if SLURM_JOB_ID in environ and not in_step and not local and not overridden:
        raise LayoutError("python runs inside SLURM job " + environ[SLURM_JOB_ID] +
                          " but outside an srun step, so there is one process instead of one per task",
                          _srun_hint(environ))
    launcher = "srun" if in_step else "submitit-local" if local else "jax-env" if overridden else "single"

    # Number of processes and this process's id.
    if launcher == "srun":
        default_n = _int(environ, SLURM_STEP_NUM_TASKS) or _int(environ, SLURM_NTASKS)
        n_source = SLURM_STEP_NUM_TASKS if SLURM_STEP_NUM_TASKS in environ else SLURM_NTASKS
        default_id, id_source, local_rank = _int(environ, SLURM_PROCID), SLURM_PROCID, _int(environ, SLURM_LOCALID)
    elif launcher == "submitit-local":
        default_n, n_source = _int(environ, SUBMITIT_LOCAL_NTASKS), SUBMITIT_LOCAL_NTASKS
        default_id, id_source = _int(environ, SUBMITIT_LOCAL_GLOBALID), SUBMITIT_LOCAL_GLOBALID
        local_rank = _int(environ, SUBMITIT_LOCAL_LOCALID)
    else:
        default_n, n_source, default_id, id_source, local_rank = 1, "default", 0, "default", 0
    n, sources["num_processes"] = _pick(num_processes, _int(environ, JAX_NUM_PROCESSES), JAX_NUM_PROCESSES,
                                        default_n or 1, n_source)
    pid, sources["process_id"] = _pick(process_id, _int(environ, JAX_PROCESS_ID), JAX_PROCESS_ID,
                                       default_id or 0, id_source)
    if not 0 <= pid < n:
        raise LayoutError(f"process id {pid} is outside 0..{n - 1}",
                          "check JAX_PROCESS_ID / JAX_NUM_PROCESSES or the srun task count")
    local_rank = local_rank if local_rank is not None else 0

    host, port = _coordinator(environ, launcher, coordinator_address, sources)
    if launcher == "single":
        sources["coordinator"] = "unused: a single process needs no coordinator"
    if launcher == "srun":
        _check_layout(environ, n, _int(environ, SLURM_STEP_NUM_NODES))
    elif launcher == "submitit-local":
        _check_layout(environ, n, None)

    k, sources["devices_per_process"] = _pick(devices_per_process, _int(environ, HPCJAX_GPUS_PER_PROCESS),
                                              HPCJAX_GPUS_PER_PROCESS, 1, "default (one GPU per process)")
    chosen_platform, sources["platform"] = _platform(environ, gpu_available, platform)
    ids = _device_ids(environ, local_device_ids, local_rank, k, chosen_platform, sources)
    return DistributedEnv(coordinator_host=host, coordinator_port=port, num_processes=n, process_id=pid,
                          local_device_ids=ids, devices_per_process=k, platform=chosen_platform,
                          launcher=launcher, sources=sources)


def _pick(explicit, from_env, env_name: str, default, default_source: str):
    if explicit is not None:
        return explicit, "argument"
    if from_env is not None:
        return from_env, env_name
    return default, default_source


def _coordinator(environ: Mapping[str, str], launcher: str, explicit: str | None,
                 sources: dict[str, str]) -> tuple[str, int]:
    address = explicit or environ.get(JAX_COORDINATOR_ADDRESS)
    host, port = _split_address(address) if address else (None, None)
    host_source = ("argument" if explicit else JAX_COORDINATOR_ADDRESS) if address else ""
    if host is None:
        if launcher == "srun":
            nodelist = environ.get(SLURM_STEP_NODELIST) or environ.get("SLURM_JOB_NODELIST", "")
            host, host_source = expand_hostlist(nodelist)[0], f"first host of {SLURM_STEP_NODELIST}={nodelist}"
        else:
            host, host_source = LOCALHOST, "this machine"
    port_source = host_source
    if port is None and _int(environ, JAX_COORDINATOR_PORT) is not None:
        port, port_source = _int(environ, JAX_COORDINATOR_PORT), JAX_COORDINATOR_PORT
    if port is None:
        port, port_source = _derived_port(environ, launcher)
    sources["coordinator"] = f"host: {host_source}; port: {port_source}"
    return host, port


def _derived_port(environ: Mapping[str, str], launcher: str) -> tuple[int, str]:
    if launcher == "srun":
        job, step = _int(environ, SLURM_JOB_ID) or 0, _int(environ, SLURM_STEP_ID) or 0
        where = f"job {job} step {step}"
    else:
        job, step = _int(environ, SUBMITIT_LOCAL_JOB_ID) or 0, 0
        where = f"local job {job}"
    port = PORT_BASE + PORT_STEPS * (job % PORT_JOBS) + step % PORT_STEPS
    return port, f"derived from {where} (set {JAX_COORDINATOR_PORT} to choose)"


def _device_ids(environ, explicit, local_rank, k, platform, sources) -> tuple[int, ...] | None:
    if explicit is not None:
        sources["local_device_ids"] = "argument"
        return tuple(explicit)
    if environ.get(JAX_LOCAL_DEVICE_IDS):
        sources["local_device_ids"] = JAX_LOCAL_DEVICE_IDS
        try:
            return tuple(int(x) for x in environ[JAX_LOCAL_DEVICE_IDS].split(","))
        except ValueError:
            raise LayoutError(f"{JAX_LOCAL_DEVICE_IDS}={environ[JAX_LOCAL_DEVICE_IDS]!r} is not a "
                              "comma-separated list of integers", "e.g. JAX_LOCAL_DEVICE_IDS=0,1") from None
    visible = visible_gpu_count(environ)
    if not visible and platform == "cpu":  # unset, or "" as submitit's local executor sets it
        sources["local_device_ids"] = f"none: {k} emulated CPU device(s) instead"
        return None
    if visible is None:
        visible = _int(environ, SLURM_GPUS_ON_NODE) or _int(environ, HPCJAX_GPUS_PER_NODE)
    ids = device_ids_for(local_rank, k, visible)
    sources["local_device_ids"] = (f"local rank {local_rank}, {k} per process, {visible} visible in "
                                   f"{CUDA_VISIBLE_DEVICES}={environ.get(CUDA_VISIBLE_DEVICES)!r}")
    return ids
