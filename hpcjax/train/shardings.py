"""Meshes and PartitionSpecs for the training strategies of the JAX training cookbook
("Achieving High Performance"): data parallel, FSDP, tensor parallel, FSDP + TP, and
hybrid sharding (FSDP within each node, data parallel across nodes).

Every strategy uses one 3-D mesh with axes ("replica", "data", "tensor"): the batch
is split over ("replica", "data"); FSDP splits parameters over "data"; tensor
parallelism splits attention heads and the MLP's hidden units over "tensor".
"replica" has one entry except for hsdp, where it is the nodes. The mesh follows
the nodes: devices are in global order (a process's devices together, a node's
processes together), so a "tensor" group and, for hsdp, a "data" group stay
inside one node, where the network is fast; a tensor axis larger than a node is
refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from hpcjax.values.errors import ConfigError
from hpcjax.train.config import PIPELINES, STRATEGIES

REPLICA, DATA, TENSOR = "replica", "data", "tensor"
AXES = (REPLICA, DATA, TENSOR)
STAGE = "stage"  # the pipeline strategies' outer axis: consecutive stages on consecutive devices
BATCH = (REPLICA, DATA)  # the batch dimension is split over both


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


_ACTIVATIONS = dict(act_ids=P(BATCH), act_seq=P(BATCH, None, None))
SPECS = {
    "dp": Specs(embed=P(), pos_embed=P(), att_qkv=P(), att_out=P(), mlp_in=P(), mlp_out=P(), out_kernel=P(),
                vector=P(), act_att=P(BATCH, None, None, None), act_hidden=P(BATCH, None, None), **_ACTIVATIONS),
    "fsdp": Specs(embed=P(None, None), pos_embed=P(None, None), att_qkv=P(None, DATA, None, None),
                  att_out=P(DATA, None, None), mlp_in=P(DATA, None), mlp_out=P(None, DATA),
                  out_kernel=P(DATA, None), vector=P(), act_att=P(BATCH, None, None, None),
                  act_hidden=P(BATCH, None, None), **_ACTIVATIONS),
}
SPECS["hsdp"] = SPECS["fsdp"]  # the same specs: "data" is a node's devices, "replica" the nodes
# Pipelines: parameters are made as for dp, then each layer's arrays are stacked and split
# over "stage" (train.pipeline); inside a stage the batch is split over "data".
SPECS["pp"] = SPECS["dp_pp"] = SPECS["dp"]
# Tensor parallel (and its 2-D form): heads and MLP units over "tensor".
SPECS["tp"] = SPECS["fsdp_tp"] = Specs(
    embed=P(None, None), pos_embed=P(None, TENSOR), att_qkv=P(None, DATA, TENSOR, None),
    att_out=P(DATA, None, None), mlp_in=P(DATA, TENSOR), mlp_out=P(TENSOR, DATA), out_kernel=P(DATA, None),
    vector=P(), act_att=P(BATCH, None, TENSOR, None), act_hidden=P(BATCH, None, TENSOR), **_ACTIVATIONS)


def mesh_shape(strategy: str, num_devices: int, tensor_size: int | None, nodes: int = 1) -> tuple[int, int, int]:
    """(replica, data, tensor) for `num_devices` spread evenly over `nodes`."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"unknown strategy {strategy!r}", f"valid values: {', '.join(STRATEGIES)}")
    per_node = num_devices // nodes
    if strategy in ("dp", "fsdp"):
        return 1, num_devices, 1
    if strategy == "hsdp":
        return nodes, per_node, 1
    if strategy == "tp":
        if nodes > 1:
            raise ConfigError(f"tp puts all {num_devices} devices on the tensor axis, across {nodes} nodes",
                              "tensor parallelism needs the fast network inside a node: use fsdp_tp with "
                              f"--tensor-size at most {per_node} (a node's devices), or hsdp")
        return 1, 1, num_devices
    t = tensor_size or (2 if per_node % 2 == 0 and per_node > 1 else 1)
    if per_node % t:
        where = f"a node's {per_node} devices" if nodes > 1 else f"the {num_devices} devices"
        raise ConfigError(f"tensor size {t} does not divide {where}",
                          f"a tensor group must stay inside one node: pick a divisor of {per_node} for "
                          "--tensor-size" + (" (tensor parallelism across nodes would run every layer's "
                                             "collectives over the slow network)" if t > per_node else ""))
    return 1, num_devices // t, t


def pipeline_stages(strategy: str, num_devices: int, stages: int | None) -> int:
    """The stage axis of pp (every device) or dp_pp (default 2; the rest data parallel)."""
    if strategy == "pp":
        if stages not in (None, num_devices):
            raise ConfigError(f"pp puts every device on the stage axis: {num_devices} stages, not {stages}",
                              f"use --strategy dp_pp --stages {stages} for {stages} stages x "
                              f"{num_devices // stages if num_devices % stages == 0 else '?'} data-parallel "
                              "replicas, or drop --stages")
        return num_devices
    stages = stages or 2
    if num_devices % stages:
        valid = [s for s in range(1, num_devices + 1) if num_devices % s == 0]
        raise ConfigError(f"{stages} pipeline stages do not divide the {num_devices} devices",
                          f"--stages one of {', '.join(map(str, valid))}")
    return stages


def make_mesh(strategy: str, devices, tensor_size: int | None = None, nodes: int = 1,
              stages: int | None = None) -> Mesh:
    """The mesh over `devices` in their global order (each process's devices stay together,
    so a process's share of the batch is one contiguous block of rows; a node's processes
    stay together, so a group along the inner axes stays in one node). A pipeline's stage
    axis is outermost: with two nodes and two stages, each node is a stage."""
    if strategy in PIPELINES:
        s = pipeline_stages(strategy, len(devices), stages)
        return Mesh(np.array(devices).reshape(s, 1, len(devices) // s, 1), (STAGE,) + AXES)
    shape = mesh_shape(strategy, len(devices), tensor_size, nodes)
    return Mesh(np.array(devices).reshape(shape), AXES)


def axis_nodes(mesh: Mesh, node_of) -> dict[str, int]:
    """For each axis, the most nodes one group along it spans (1: it stays inside a node)."""
    devices = mesh.devices
    spans = {}
    for index, axis in enumerate(mesh.axis_names):
        groups = np.moveaxis(devices, index, -1).reshape(-1, devices.shape[index])
        spans[axis] = max(len({node_of(d) for d in group}) for group in groups)
    return spans


def describe_mesh(mesh: Mesh, node_of) -> str:
    spans = axis_nodes(mesh, node_of)
    return " x ".join(f"{axis} {size}" + (f" (across {spans[axis]} nodes)" if spans[axis] > 1 else
                                          " (within a node)" if size > 1 else "")
                      for axis, size in mesh.shape.items())


def named(mesh: Mesh, spec: P) -> NamedSharding:
    return NamedSharding(mesh, spec)
