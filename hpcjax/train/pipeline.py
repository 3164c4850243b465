"""Pipeline parallelism with a GPipe schedule, written with JAX's explicit collectives.

The layers are split into S stages along the mesh's "stage" axis: each layer's arrays are
stacked (layers, ...) and sharded over "stage", so a stage holds only its own L/S layers.
Inside `shard_map` every stage runs the same program for M + S - 1 ticks: at tick t stage
0 takes micro-batch t, every stage applies its layers to what it holds, and `ppermute`
hands each result to the next stage; the last stage keeps micro-batch t - (S - 1). This is
the fill / steady / drain of GPipe; the backward pass is the same schedule in reverse,
which JAX derives (the transpose of a ppermute is the ppermute the other way). The loss is
the mean over every token, as without a pipeline, so gradients agree with data parallelism.

Ticks where a stage has no micro-batch (the bubble, (S-1)/(M+S-1) of the schedule) compute
on values that are then discarded: in SPMD the bubble is wasted work rather than idle time.
The embedding and the output head are small and replicated; every stage computes them and
only stage 0's embedding and the last stage's logits count.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from hpcjax.train import model
from hpcjax.train.config import ModelConfig
from hpcjax.train.shardings import DATA, REPLICA, STAGE, named


def bubble_fraction(stages: int, microbatches: int) -> float:
    """GPipe's idle share of the schedule: (S - 1) / (M + S - 1)."""
    return (stages - 1) / (microbatches + stages - 1)


def stack_layers(params: dict, mesh) -> dict:
    """The list of layers as one dict of arrays with a leading layer axis, split over
    "stage" (made from the same per-layer values as every other strategy's parameters)."""
    stacked = jax.tree.map(lambda *layers: jnp.stack(layers), *params["layers"])
    placed = jax.tree.map(lambda a: jax.device_put(a, named(mesh, P(STAGE))), stacked)
    return {**params, "layers": placed}


def stack_abstract(params: dict, mesh) -> dict:
    """`stack_layers` on shapes only (ShapeDtypeStructs): what a restore fills."""
    layers = params["layers"]
    stacked = jax.tree.map(lambda first: jax.ShapeDtypeStruct((len(layers), *first.shape), first.dtype,
                                                               sharding=named(mesh, P(STAGE))), layers[0])
    return {**params, "layers": stacked}


def loss_fn(config: ModelConfig, mesh, microbatches: int, dtype):
    """loss(params, batch) for params whose layers are stacked (stack_layers)."""
    stages = mesh.shape[STAGE]
    batch_axes = (REPLICA, DATA)

    def per_device(layers, rest, inputs, targets):
        stage = jax.lax.axis_index(STAGE)
        rows, seq = inputs.shape
        per_micro = rows // microbatches
        layers = jax.tree.map(lambda a: a.astype(dtype), layers)
        rest = jax.tree.map(lambda a: a.astype(dtype), rest)
        x_in = model.embed(rest, inputs.reshape(microbatches, per_micro, seq))

        def run_stage(x):
            return jax.lax.scan(lambda h, layer: (model.block(config, layer, h, dtype), None), x, layers)[0]

        held = jnp.zeros_like(x_in[0])
        outputs = jnp.zeros_like(x_in)
        for tick in range(microbatches + stages - 1):
            out = run_stage(jnp.where(stage == 0, x_in[min(tick, microbatches - 1)], held))
            done = tick - (stages - 1)  # the micro-batch the last stage finishes now
            if 0 <= done < microbatches:
                outputs = outputs.at[done].set(jnp.where(stage == stages - 1, out, outputs[done]))
            held = jax.lax.ppermute(out, STAGE, [(i, i + 1) for i in range(stages - 1)])
        logits = model.head(rest, outputs.reshape(rows, seq, -1))
        loss = jnp.where(stage == stages - 1, model.next_token_loss(logits, targets), 0.0)
        return jax.lax.pmean(jax.lax.psum(loss, STAGE), batch_axes)

    sharded = jax.shard_map(per_device, mesh=mesh, out_specs=P(),
                            in_specs=(P(STAGE), P(), P(batch_axes, None), P(batch_axes, None)))

    def loss(params, batch):
        rest = {k: v for k, v in params.items() if k != "layers"}
        return sharded(params["layers"], rest, batch["inputs"], batch["targets"])

    return loss
