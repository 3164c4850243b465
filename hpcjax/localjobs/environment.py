"""What each rank of a local job is given, and what the local backend refuses: the variables
submitit's local executor sets (so the rank side maps it through the same reader as any
submitit-local task), the layout a rendered script exports, K emulated GPUs as CPU devices,
and what makes a plain `jax.distributed.initialize()` right here."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

from hpcjax.protocol import contract, placement
from hpcjax.values import jobid, shellword
from hpcjax.containers import binds
from hpcjax.values.errors import UsageError
from hpcjax.job.spec import JobSpec

# Variables of an enclosing SLURM job would make the runtime map the SLURM step
# instead of these local processes.
DROPPED_PREFIXES = ("SLURM_", "SLURMD_", "SUBMITIT_", "JAX_COORDINATOR", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES",
                    "JAX_LOCAL_DEVICE_IDS")


def check_local_spec(spec: JobSpec) -> None:
    if spec.container.in_container:
        raise UsageError(f"the local backend runs the command bare, not through {spec.container.runtime}",
                         "drop --image/--runtime for --backend local, or submit to SLURM")
    most = max(64, 8 * (os.cpu_count() or 1))  # more is a typo, not a job for one machine
    if spec.layout.num_processes > most:
        raise UsageError(f"the local backend would start {spec.layout.num_processes} processes on this machine "
                         f"(at most {most} here)", "check --nodes and --gpus-per-node, or submit to SLURM")
    program = spec.command[0]
    if shutil.which(program) is None:
        raise UsageError(f"the command {program!r} is not found on this machine",
                         "give a program on the PATH or a path to an executable file")
    if spec.requeue:
        raise UsageError("the local backend does not requeue: --requeue is the SLURM job requeueing itself",
                         "drop --requeue for --backend local (run again to resume from the checkpoint), "
                         "or submit to SLURM")
    if spec.modules:
        raise UsageError("the local backend cannot `module load` (that is the cluster's module system)",
                         "drop --module for --backend local, or submit to SLURM")


def rank_environment(spec: JobSpec, job_id: str, rank: int, port: int) -> dict[str, str]:
    layout = spec.layout
    parts = jobid.parse(job_id)
    array_job, index = (parts.job, parts.task) if parts else (job_id, None)
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED_PREFIXES)}
    for key, value in spec.env:  # in order, as the batch script exports them
        env[key] = shellword.expand(value, env)
    env.update(layout.env())
    env.update({contract.PLATFORM_ENV: "cpu", contract.NODE_NAME_ENV: placement.local_node_name(rank, layout),
                contract.LOG_DIR_ENV: str(Path(spec.output_dir).resolve())})
    env.update(
        SUBMITIT_LOCAL_JOB_ID=array_job, SUBMITIT_LOCAL_NTASKS=str(layout.num_processes),
        SUBMITIT_LOCAL_GLOBALID=str(rank), SUBMITIT_LOCAL_LOCALID=str(rank % layout.tasks_per_node),
        SUBMITIT_LOCAL_NODEID=str(layout.node_of(rank)),
        SUBMITIT_LOCAL_JOB_NUM_NODES=str(layout.nodes), SUBMITIT_EXECUTOR="local",
        JAX_COORDINATOR_PORT=str(port), PYTHONUNBUFFERED="1",
    )
    if index:  # an element of a job array, as SLURM tells it
        env.update(SLURM_ARRAY_JOB_ID=array_job, SLURM_ARRAY_TASK_ID=index,
                   SLURM_ARRAY_TASK_COUNT=str(spec.array), SLURM_ARRAY_TASK_MIN="0",
                   SLURM_ARRAY_TASK_MAX=str(spec.array - 1))
    env.update(plain_jax_environment(spec, array_job, rank, port))
    hook = binds.exit_hook_dir(spec)
    if hook:  # the exit guard (hpcjax.rank.watch.exitguard) for an unmodified program too
        env["PYTHONPATH"] = hook + (f":{env['PYTHONPATH']}" if env.get("PYTHONPATH") else "")
    return env


def plain_jax_environment(spec: JobSpec, job_id: str, rank: int, port: int) -> dict[str, str]:
    """What makes a plain `jax.distributed.initialize()` right on this machine's CPU.
    JAX reads the coordinator and the device ids from its own variables and the device
    count from its configuration, but the process count and id only from a cluster it
    detects: so each rank is also presented as a task of a one-node SLURM step (the five
    variables JAX's SLURM detection reads, nothing else of SLURM's). The coordinator is
    given explicitly, so the node list is never parsed."""
    layout = spec.layout
    return {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_PLATFORMS": "cpu",
            "JAX_LOCAL_DEVICE_IDS": contract.jax_local_device_ids(layout.gpus_per_process),
            "JAX_NUM_CPU_DEVICES": str(layout.gpus_per_process),
            "SLURM_JOB_ID": job_id, "SLURM_STEP_NODELIST": "localhost", "SLURM_NTASKS": str(layout.num_processes),
            "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank % layout.tasks_per_node)}


def free_port() -> int:
    """A port of this machine nobody listens on now (the local backend's coordinator)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def local_job_of(pid: int) -> str | None:
    """The local backend's job a process is a rank of (from its environment), or None: a pid read
    from a record is signalled only when it is one of that job's ranks."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # gone, or not this user's
        return None
    found = [item.split(b"=", 1)[1] for item in environ if item.startswith(b"SUBMITIT_LOCAL_JOB_ID=")]
    return found[0].decode(errors="replace") if found else None
