"""One reader per way a process can be started, each returning what it knows
with where it learned it. `mapping.resolve` composes them by precedence.

Readers: explicit arguments, JAX's own variables, the srun step, submitit's
local executor (also hpcjax's local backend), and a single process. Pure
functions of an environment mapping: testable without JAX or SLURM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from hpcjax.protocol.contract import RESTART_COUNT, derived_port
from hpcjax.protocol.placement import step_nodelist
from hpcjax.values.errors import LayoutError
from hpcjax.values.nodelist import expand_hostlist

# What JAX itself reads (jax/_src/distributed.py), honoured before any launcher.
JAX_COORDINATOR_ADDRESS = "JAX_COORDINATOR_ADDRESS"
JAX_COORDINATOR_PORT = "JAX_COORDINATOR_PORT"
JAX_LOCAL_DEVICE_IDS = "JAX_LOCAL_DEVICE_IDS"
JAX_NUM_PROCESSES = "JAX_NUM_PROCESSES"
JAX_PROCESS_ID = "JAX_PROCESS_ID"
# What srun sets for every task of a step.
SLURM_JOB_ID = "SLURM_JOB_ID"
SLURM_STEP_ID = "SLURM_STEP_ID"
SLURM_STEP_NUM_TASKS = "SLURM_STEP_NUM_TASKS"
SLURM_STEP_NUM_NODES = "SLURM_STEP_NUM_NODES"
SLURM_NTASKS = "SLURM_NTASKS"
SLURM_PROCID = "SLURM_PROCID"
SLURM_LOCALID = "SLURM_LOCALID"
# What submitit's local executor (and hpcjax's local backend) sets.
SUBMITIT_LOCAL_JOB_ID = "SUBMITIT_LOCAL_JOB_ID"
SUBMITIT_LOCAL_NTASKS = "SUBMITIT_LOCAL_NTASKS"
SUBMITIT_LOCAL_GLOBALID = "SUBMITIT_LOCAL_GLOBALID"
SUBMITIT_LOCAL_LOCALID = "SUBMITIT_LOCAL_LOCALID"

LOCALHOST = "127.0.0.1"


@dataclass(frozen=True)
class Sourced:
    value: object
    source: str


Reading = dict  # field name -> Sourced; a reader leaves out what it does not know


def env_int(environ: Mapping[str, str], name: str) -> int | None:
    value = environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise LayoutError(f"{name}={value!r} is not an integer",
                          f"unset {name} or give it a whole number") from None


def _from_env(environ: Mapping[str, str], **fields: str) -> Reading:
    """{field: Sourced(int(environ[var]), var)} for every variable that is set."""
    found = {name: env_int(environ, var) for name, var in fields.items()}
    return {name: Sourced(value, fields[name]) for name, value in found.items() if value is not None}


def split_address(address: str) -> tuple[str, int | None]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return address, None
    return host, int(port)


def read_arguments(coordinator_address: str | None = None, **values) -> Reading:
    reading = {name: Sourced(value, "argument") for name, value in values.items() if value is not None}
    if coordinator_address:
        host, port = split_address(coordinator_address)
        reading["coordinator_host"] = Sourced(host, "argument")
        if port is not None:
            reading["coordinator_port"] = Sourced(port, "argument")
    return reading


def read_jax_env(environ: Mapping[str, str]) -> Reading:
    reading = _from_env(environ, num_processes=JAX_NUM_PROCESSES, process_id=JAX_PROCESS_ID,
                        coordinator_port=JAX_COORDINATOR_PORT)
    address = environ.get(JAX_COORDINATOR_ADDRESS)
    if address:
        host, port = split_address(address)
        reading["coordinator_host"] = Sourced(host, JAX_COORDINATOR_ADDRESS)
        if port is not None:  # a port in the address wins over JAX_COORDINATOR_PORT
            reading["coordinator_port"] = Sourced(port, JAX_COORDINATOR_ADDRESS)
    return reading


def read_srun_step(environ: Mapping[str, str]) -> Reading:
    reading = _from_env(environ, num_processes=SLURM_NTASKS, process_id=SLURM_PROCID, local_rank=SLURM_LOCALID,
                        num_nodes=SLURM_STEP_NUM_NODES)
    reading.update(_from_env(environ, num_processes=SLURM_STEP_NUM_TASKS))  # the step's count wins the job's
    nodelist_var, nodelist = step_nodelist(environ)
    if nodelist:
        reading["coordinator_host"] = Sourced(expand_hostlist(nodelist)[0], f"first host of {nodelist_var}={nodelist}")
    job, step = env_int(environ, SLURM_JOB_ID) or 0, env_int(environ, SLURM_STEP_ID) or 0
    restarts = env_int(environ, RESTART_COUNT) or 0
    reading["coordinator_port"] = Sourced(derived_port(job, step, restarts), f"derived from job {job} step {step}"
                                          + (f" attempt {restarts + 1}" if restarts else "")
                                          + f" (set {JAX_COORDINATOR_PORT} to choose)")
    return reading


def read_submitit_local(environ: Mapping[str, str]) -> Reading:
    reading = _from_env(environ, num_processes=SUBMITIT_LOCAL_NTASKS, process_id=SUBMITIT_LOCAL_GLOBALID,
                        local_rank=SUBMITIT_LOCAL_LOCALID)
    job = env_int(environ, SUBMITIT_LOCAL_JOB_ID) or 0
    reading["coordinator_host"] = Sourced(LOCALHOST, "this machine")
    reading["coordinator_port"] = Sourced(derived_port(job, 0), f"derived from local job {job} "
                                                                f"(set {JAX_COORDINATOR_PORT} to choose)")
    return reading


def read_single_process(environ: Mapping[str, str]) -> Reading:
    return {"num_processes": Sourced(1, "default"), "process_id": Sourced(0, "default"),
            "local_rank": Sourced(0, "default"), "coordinator_host": Sourced(LOCALHOST, "this machine"),
            "coordinator_port": Sourced(derived_port(0, 0), "unused: a single process needs no coordinator")}


def in_srun_step(environ: Mapping[str, str]) -> bool:
    return SLURM_STEP_ID in environ and SLURM_PROCID in environ


def in_submitit_local(environ: Mapping[str, str]) -> bool:
    return SUBMITIT_LOCAL_JOB_ID in environ


def jax_env_complete(reading: Reading) -> bool:
    """JAX's variables (or arguments) alone describe the whole group."""
    return all(name in reading for name in ("coordinator_host", "num_processes", "process_id"))


READERS = {"srun": read_srun_step, "submitit-local": read_submitit_local, "jax-env": lambda environ: {},
           "single": read_single_process}
