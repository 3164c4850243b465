# Prints, as one JSON line, what JAX itself resolves on this rank (its own detection code)
# and what hpcjax's mapping derives from SLURM alone (the script's JAX_* exports removed).
import json
import os

from hpcjax.rank.start.mapping import resolve
from hpcjax.rank.start.plainjax import resolve_like_jax

plain = resolve_like_jax(os.environ)
slurm_only = {k: v for k, v in os.environ.items() if k not in ("JAX_COORDINATOR_ADDRESS", "JAX_LOCAL_DEVICE_IDS")}
ours = resolve(slurm_only)
print(json.dumps({"plain": plain, "ours": {
    "coordinator_address": ours.coordinator_address, "num_processes": ours.num_processes,
    "process_id": ours.process_id, "local_device_ids": list(ours.local_device_ids or [])},
    "rank": int(os.environ["SLURM_PROCID"]), "step": os.environ.get("SLURM_STEP_ID"),
    "visible": os.environ.get("CUDA_VISIBLE_DEVICES", "")}))
