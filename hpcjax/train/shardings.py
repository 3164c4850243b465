"""Meshes and PartitionSpecs for the training strategies of the JAX training cookbook
("Achieving High Performance"): data parallel, FSDP, tensor parallel, FSDP + TP.

Every strategy uses one 2-D mesh with axes ("data", "tensor"): the batch is split
over "data"; FSDP also splits parameters over "data"; tensor parallelism splits
attention heads and the MLP's hidden units over "tensor". dp and fsdp use a
(n, 1) mesh, tp a (1, n) mesh, fsdp_tp a (n / t, t) mesh.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from hpcjax.errors import ConfigError
from hpcjax.train.config import STRATEGIES

DATA, TENSOR = "data", "tensor"


@dataclass(frozen=True)
class Specs:
    """PartitionSpecs of every parameter and of the activations that matter."""

    embed: P  # (vocab, d_model)            the cookbook's in_kernel
    pos_embed: P  # (seq_len, d_model)
    att_qkv: P  # (3, d_model, heads, head_dim)
    att_out: P  # (d_model, heads, head_dim)
    mlp_in: P  # (d_model, d_ff)
    mlp_out: P  # (d_ff, d_model)
    out_kernel: P  # (d_model, vocab)
    vector: P  # layer-norm scales/biases and the output bias: replicated
    act_ids: P  # (batch, seq) token ids
    act_seq: P  # (batch, seq, d_model)
    act_att: P  # (batch, seq, heads, head_dim)
    act_hidden: P  # (batch, seq, d_ff)


_ACTIVATIONS = dict(act_ids=P(DATA), act_seq=P(DATA, None, None))
SPECS = {
    "dp": Specs(embed=P(), pos_embed=P(), att_qkv=P(), att_out=P(), mlp_in=P(), mlp_out=P(), out_kernel=P(),
                vector=P(), act_att=P(DATA, None, None, None), act_hidden=P(DATA, None, None), **_ACTIVATIONS),
    "fsdp": Specs(embed=P(None, None), pos_embed=P(None, None), att_qkv=P(None, DATA, None, None),
                  att_out=P(DATA, None, None), mlp_in=P(DATA, None), mlp_out=P(None, DATA),
                  out_kernel=P(DATA, None), vector=P(), act_att=P(DATA, None, None, None),
                  act_hidden=P(DATA, None, None), **_ACTIVATIONS),
}
# Tensor parallel (and its 2-D form): heads and MLP units over "tensor".
SPECS["tp"] = SPECS["fsdp_tp"] = Specs(
    embed=P(None, None), pos_embed=P(None, TENSOR), att_qkv=P(None, DATA, TENSOR, None),
    att_out=P(DATA, None, None), mlp_in=P(DATA, TENSOR), mlp_out=P(TENSOR, DATA), out_kernel=P(DATA, None),
    vector=P(), act_att=P(DATA, None, TENSOR, None), act_hidden=P(DATA, None, TENSOR), **_ACTIVATIONS)


def mesh_shape(strategy: str, num_devices: int, tensor_size: int | None) -> tuple[int, int]:
    if strategy not in STRATEGIES:
        raise ConfigError(f"unknown strategy {strategy!r}", f"valid values: {', '.join(STRATEGIES)}")
    if strategy in ("dp", "fsdp"):
        return num_devices, 1
    if strategy == "tp":
        return 1, num_devices
    t = tensor_size or (2 if num_devices % 2 == 0 and num_devices > 1 else 1)
    if num_devices % t:
        raise ConfigError(f"tensor size {t} does not divide the {num_devices} devices",
                         f"pick a divisor of {num_devices} for --tensor-size")
    return num_devices // t, t


def make_mesh(strategy: str, devices, tensor_size: int | None = None) -> Mesh:
    """The mesh over `devices` in their global order (each process's devices stay together,
    so a process's share of the batch is one contiguous block of rows)."""
    shape = mesh_shape(strategy, len(devices), tensor_size)
    return Mesh(np.array(devices).reshape(shape), (DATA, TENSOR))


def named(mesh: Mesh, spec: P) -> NamedSharding:
    return NamedSharding(mesh, spec)
