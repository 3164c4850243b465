"""The mesh follows the nodes: which axes stay inside a node, for every strategy, on a
2-node x 4-device layout (one device per process, processes placed on nodes in blocks)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from hpcjax.values.errors import ConfigError

pytestmark = pytest.mark.jax  # needs JAX on this machine

NODES, PER_NODE = 2, 4


def shardings():
    """hpcjax.train.shardings, imported when a test runs: it imports JAX (1.2 s), which every
    worker of the pure tier would pay just to collect this file."""
    from hpcjax.train import shardings as module

    return module
DEVICES = [SimpleNamespace(process_index=i, id=i) for i in range(NODES * PER_NODE)]


def node_of(device) -> int:
    return device.process_index // PER_NODE


def fake_mesh(strategy: str, tensor_size=None):
    shape = shardings().mesh_shape(strategy, len(DEVICES), tensor_size, NODES)
    return SimpleNamespace(devices=np.array(DEVICES, dtype=object).reshape(shape), axis_names=shardings().AXES,
                           shape=dict(zip(shardings().AXES, shape)))


@pytest.mark.parametrize("strategy, tensor_size, shape, spans", [
    ("dp", None, (1, 8, 1), {"replica": 1, "data": 2, "tensor": 1}),
    ("fsdp", None, (1, 8, 1), {"replica": 1, "data": 2, "tensor": 1}),
    ("fsdp_tp", None, (1, 4, 2), {"replica": 1, "data": 2, "tensor": 1}),
    ("fsdp_tp", 4, (1, 2, 4), {"replica": 1, "data": 2, "tensor": 1}),
    ("hsdp", None, (2, 4, 1), {"replica": 2, "data": 1, "tensor": 1}),
])
def test_tensor_and_hybrid_fsdp_groups_stay_inside_a_node(strategy, tensor_size, shape, spans):
    mesh = fake_mesh(strategy, tensor_size)
    assert mesh.devices.shape == shape
    assert shardings().axis_nodes(mesh, node_of) == spans


def test_the_mesh_is_described_with_the_nodes_each_axis_spans():
    assert shardings().describe_mesh(fake_mesh("hsdp"), node_of) == "replica 2 (across 2 nodes) x data 4 (within a node) x tensor 1"


@pytest.mark.parametrize("strategy, tensor_size, words", [
    ("fsdp_tp", 8, "tensor size 8 does not divide a node's 4 devices"),
    ("fsdp_tp", 3, "tensor size 3 does not divide a node's 4 devices"),
    ("tp", None, "across 2 nodes"),
])
def test_a_tensor_axis_that_would_cross_nodes_is_refused(strategy, tensor_size, words):
    with pytest.raises(ConfigError) as err:
        shardings().mesh_shape(strategy, 8, tensor_size, NODES)
    assert words in err.value.message and "inside" in err.value.hint


def test_on_one_node_the_tensor_axis_may_take_every_device():
    assert shardings().mesh_shape("fsdp_tp", 8, 8, 1) == (1, 1, 8) and shardings().mesh_shape("tp", 8, None, 1) == (1, 1, 8)
    assert shardings().mesh_shape("hsdp", 8, None, 1) == (1, 8, 1)  # one node: hsdp is fsdp
