"""A decoder-only transformer in plain JAX: parameters are nested dicts created
directly in their shardings with jax.nn.initializers, as the cookbook does.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from hpcjax.train.config import ModelConfig
from hpcjax.train.shardings import Specs, named


def params_initializer(config: ModelConfig, specs: Specs, mesh: Mesh):
    """key -> every parameter, initialized on the devices that hold its shard: one jitted
    program (one compile, not one per parameter) whose out_shardings are the parameters' own."""
    plan, layout = param_plan(config, specs)

    def create(key):
        made = [init(jax.random.fold_in(key, i), shape, jnp.float32) for i, (init, shape, _) in enumerate(plan)]
        return jax.tree.map(lambda i: made[i], layout)

    shardings = jax.tree.map(lambda i: named(mesh, plan[i][2]), layout)
    return jax.jit(create, out_shardings=shardings)


# The initialization runs once per run, and on the CPU LLVM's optimizations were most of its compile:
# 6.1 CPU-s against 1.8 at XLA's backend optimization level 0 (8 emulated devices, the tests' model),
# whatever the devices per process. Unoptimized, it runs slower in proportion to the parameters: 7.1
# CPU-s against 1.1 for 51M of them (matrix weights), where the compile saved 3.7; so only below a quarter
# of where the two broke even here. Its values differ from the optimized program's in 2-4 % of them, by
# at most 3e-7 of the value (a float32's last bits: rounding). On a GPU the defaults are kept: not
# measured there.
UNOPTIMIZED_INIT_BELOW = 8_000_000
UNOPTIMIZED = {"xla_backend_optimization_level": 0}


def init_compiler_options(config: ModelConfig, platform: str) -> dict | None:
    """XLA's options for compiling `params_initializer`'s program: None for the defaults."""
    return UNOPTIMIZED if platform == "cpu" and config.matmul_params() < UNOPTIMIZED_INIT_BELOW else None


def abstract_params(config: ModelConfig, specs: Specs, mesh: Mesh) -> dict:
    """The parameters' shapes, dtypes and shardings, without computing them (a restore fills them)."""
    plan, layout = param_plan(config, specs)
    return jax.tree.map(lambda i: jax.ShapeDtypeStruct(plan[i][1], jnp.float32, sharding=named(mesh, plan[i][2])),
                        layout)


def param_plan(config: ModelConfig, specs: Specs) -> tuple[list, dict]:
    """(initializer, shape, PartitionSpec) per parameter, in the order the keys are folded in,
    and the parameter tree with each leaf's place in that list."""
    he, normal = jax.nn.initializers.he_normal(), jax.nn.initializers.normal(0.02)
    zeros, ones = jax.nn.initializers.zeros, jax.nn.initializers.ones
    c, plan = config, []  # (initializer, shape, PartitionSpec), in the order the keys are folded in

    def make(init, shape, spec, fan_in_axes=None) -> int:
        if fan_in_axes is not None:  # he_normal over the contracted axes only
            init = jax.nn.initializers.variance_scaling(2.0, "fan_in", "truncated_normal",
                                                        in_axis=fan_in_axes[0], out_axis=fan_in_axes[1])
        plan.append((init, shape, spec))
        return len(plan) - 1

    def norm():
        return {"scale": make(ones, (c.d_model,), specs.vector), "bias": make(zeros, (c.d_model,), specs.vector)}

    layers = [{
        "ln1": norm(),
        "att_qkv": make(he, (3, c.d_model, c.heads, c.head_dim), specs.att_qkv, ((1,), (0, 2, 3))),
        "att_out": make(he, (c.d_model, c.heads, c.head_dim), specs.att_out, ((1, 2), (0,))),
        "ln2": norm(),
        "mlp_in": make(he, (c.d_model, c.d_ff), specs.mlp_in),
        "mlp_out": make(he, (c.d_ff, c.d_model), specs.mlp_out),
    } for _ in range(c.layers)]
    layout = {  # each leaf: its place in the plan
        "embed": make(normal, (c.vocab, c.d_model), specs.embed),
        "pos_embed": make(normal, (c.seq_len, c.d_model), specs.pos_embed),
        "layers": layers,
        "ln_f": norm(),
        "out_kernel": make(he, (c.d_model, c.vocab), specs.out_kernel),
        "out_bias": make(zeros, (c.vocab,), specs.vector),
    }
    return plan, layout


def _layer_norm(x, p, eps=1e-5):
    x32 = x.astype(jnp.float32)
    mean = x32.mean(-1, keepdims=True)
    var = ((x32 - mean) ** 2).mean(-1, keepdims=True)
    return (((x32 - mean) * jax.lax.rsqrt(var + eps)) * p["scale"] + p["bias"]).astype(x.dtype)


def model_apply(config: ModelConfig, specs: Specs, mesh: Mesh, params: dict, ids: jax.Array,
                dtype=jnp.float32) -> jax.Array:
    """Logits (batch, seq, vocab) in float32; the body computes in `dtype` (bf16 for mixed precision)."""
    def constrain(x, spec):
        return jax.lax.with_sharding_constraint(x, named(mesh, spec))

    p = jax.tree.map(lambda a: a.astype(dtype), params)
    ids = constrain(ids, specs.act_ids)
    x = constrain(embed(p, ids), specs.act_seq)
    for layer in p["layers"]:
        x = block(config, layer, x, dtype, lambda a, name: constrain(a, getattr(specs, name)))
    return head(p, x)


def embed(p: dict, ids: jax.Array) -> jax.Array:
    return p["embed"][ids] + p["pos_embed"][:ids.shape[-1]]


def head(p: dict, x: jax.Array) -> jax.Array:
    """Logits in float32 from the last layer's activations."""
    x = _layer_norm(x, p["ln_f"])
    return (jnp.einsum("...sd,dv->...sv", x, p["out_kernel"]) + p["out_bias"]).astype(jnp.float32)


def block(config: ModelConfig, layer: dict, x: jax.Array, dtype, constrain=lambda a, name: a) -> jax.Array:
    """One transformer layer on (batch, seq, d_model); `constrain(array, spec name)` places
    activations (a pipeline stage, inside shard_map, leaves them where they are)."""
    seq = x.shape[1]
    causal = jnp.tril(jnp.ones((seq, seq), bool))
    h = _layer_norm(x, layer["ln1"])
    q, k, v = (constrain(jnp.einsum("bsd,dhk->bshk", h, w), "act_att") for w in layer["att_qkv"])
    scores = jnp.einsum("bshk,bthk->bhst", q, k).astype(jnp.float32) / jnp.sqrt(config.head_dim)
    probs = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1).astype(dtype)
    att = constrain(jnp.einsum("bhst,bthk->bshk", probs, v), "act_att")
    x = constrain(x + jnp.einsum("bshk,dhk->bsd", att, layer["att_out"]), "act_seq")
    h = _layer_norm(x, layer["ln2"])
    h = constrain(jax.nn.gelu(jnp.einsum("bsd,df->bsf", h, layer["mlp_in"])), "act_hidden")
    return constrain(x + jnp.einsum("bsf,fd->bsd", h, layer["mlp_out"]), "act_seq")


def next_token_loss(logits: jax.Array, targets: jax.Array) -> jax.Array:
    """Mean cross-entropy of the next byte, in float32."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, targets[..., None], axis=-1).mean()
