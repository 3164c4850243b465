"""What a plain `jax.distributed.initialize()` would resolve on this rank, by JAX's
own code, and where that differs from hpcjax's mapping.

JAX reads JAX_COORDINATOR_ADDRESS and JAX_LOCAL_DEVICE_IDS (jax/_src/distributed.py),
then lets its cluster detection fill what is still unset (jax/_src/clusters). Calling
that detection connects to nothing; it is the only honest oracle for "what would an
unmodified script get here", so `hpcjax env` shows it beside the mapping.
"""

from __future__ import annotations

import os
from typing import Mapping

from hpcjax.rank.start.launchers import JAX_COORDINATOR_ADDRESS, JAX_LOCAL_DEVICE_IDS
from hpcjax.rank.start.mapping import DistributedEnv

FIELDS = ("coordinator_address", "num_processes", "process_id", "local_device_ids")


def resolve_like_jax(environ: Mapping[str, str] = os.environ) -> dict | None:
    """JAX's own answer for the four values, or None when this JAX has no detection API."""
    try:
        from jax._src import clusters
    except ImportError:
        return None
    address = environ.get(JAX_COORDINATOR_ADDRESS) or None
    ids_text = environ.get(JAX_LOCAL_DEVICE_IDS)
    ids = [int(x) for x in ids_text.split(",")] if ids_text else None
    try:
        address, count, pid, ids = clusters.ClusterEnv.auto_detect_unset_distributed_params(
            address, None, None, ids, None, 300)
    except Exception as err:  # detection itself failed: that is what the user's script would meet
        return {"error": f"{type(err).__name__}: {err}"}
    return {"coordinator_address": address, "num_processes": count, "process_id": pid,
            "local_device_ids": list(ids) if ids is not None else None}


def differences(denv: DistributedEnv, plain: dict) -> list[str]:
    """The values where a plain script would get something else than hpcjax's runtime.
    GPU ordinals only matter on GPUs: JAX ignores them on the CPU."""
    if "error" in plain:
        return [f"JAX's detection fails: {plain['error']}"]
    if not denv.is_distributed and plain["num_processes"] is None:
        return []  # one process: JAX needs no values
    ours = {"coordinator_address": denv.coordinator_address, "num_processes": denv.num_processes,
            "process_id": denv.process_id,
            "local_device_ids": list(denv.local_device_ids) if denv.local_device_ids is not None else None}
    fields = FIELDS if denv.platform == "gpu" else FIELDS[:3]
    return [f"{name}: plain JAX {plain[name]!r}, hpcjax {ours[name]!r}" for name in fields
            if plain[name] != ours[name]]
