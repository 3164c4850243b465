"""Training the way the JAX training cookbook teaches: a mesh, parameters born in
their shardings, one jitted step that donates the state, and a loop that never
makes the host wait for the devices.

    from hpcjax.train import TrainConfig, train
    summary = train(TrainConfig(strategy="fsdp", steps=200))

This module holds the pieces of one step (optimizer, schedule, the jitted step,
batches), built once into a StepProgram; `loop` runs it.

Optimizer: optax's clip_by_global_norm + scale_by_adam + add_decayed_weights
(AdamW with decoupled decay, masked off vectors), scaled by a learning rate the
host computes with NumPy and passes in. optax rather than a tree-mapped Adam of
our own: the same arithmetic, tested, and its state maps onto the parameter
shardings with optax.tree_map_params.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P

from hpcjax.protocol.contract import Layout
from hpcjax.rank.start.barriers import line_up
from hpcjax.train import data, model, pipeline, shardings
from hpcjax.train.config import PIPELINES, TrainConfig
from hpcjax.train.warm import compiled_program


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """On the host, with NumPy: no device work outside the train step."""
    if step < cfg.warmup_steps:
        return cfg.learning_rate * (step + 1) / cfg.warmup_steps
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps))
    cosine = 0.5 * (1 + np.cos(np.pi * progress))
    return float(cfg.learning_rate * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cosine))


def matrices_only(params: dict):
    """Weight decay's mask: matrices, not vectors; a pipeline's stacked layers have one more axis."""
    stacked = isinstance(params.get("layers"), dict)

    def is_matrix(path, p) -> bool:
        in_stack = stacked and getattr(path[0], "key", None) == "layers"
        return p.ndim - in_stack >= 2

    return jax.tree_util.tree_map_with_path(is_matrix, params)


def make_optimizer(cfg: TrainConfig) -> optax.GradientTransformation:
    return optax.chain(optax.clip_by_global_norm(cfg.clip_norm), optax.scale_by_adam(),
                       optax.add_decayed_weights(cfg.weight_decay, mask=matrices_only))


def job_layout() -> Layout:
    """The job's layout as the script exported it; outside a job (or where it does not match
    the processes JAX started), every process on one node."""
    layout = Layout.from_env()
    if layout is None or layout.num_processes != jax.process_count():
        return Layout(nodes=1, gpus_per_node=jax.process_count())
    return layout


def node_of(device) -> int:
    """The node a device's process runs on (processes are placed on nodes in blocks)."""
    return job_layout().node_of(device.process_index)


@dataclass(frozen=True)
class StepProgram:
    """What a run needs to take steps, built once by `build_program`: the mesh, the
    shardings, the optimizer, the jitted step (compiled for the state's shardings) and eval."""

    cfg: TrainConfig
    nodes: int
    mesh: object
    specs: dict
    optimizer: optax.GradientTransformation
    dtype: object
    replicated: object
    batch_sharding: object
    state_shardings: dict
    step: object  # (state, batch, lr) -> (state, metrics), not jitted (a benchmark fuses several under scan)
    train_step: object  # the step jitted for the state's shardings; donates the state
    eval_loss: object  # jitted: (params, batch) -> loss
    pipelined: bool
    made: str = ""  # how the initial state came, for the start line ("cold: parameters initialized ...")

    def batches(self, corpus: data.Batches, start_step: int):
        """Device batches from this process's rows only (make_array_from_process_local_data)."""
        accum = self.cfg.accum_steps
        micro = self.cfg.batch_size // accum
        shape = (accum, micro, self.cfg.model.seq_len)
        first, last = data.process_rows(self.batch_sharding, shape, batch_axis=1)
        step = start_step
        while True:
            parts = [corpus.rows(step, a * micro + first, a * micro + last) for a in range(accum)]
            local = {k: np.stack([p[k] for p in parts]) for k in ("inputs", "targets")}
            yield jax.tree.map(
                lambda x: jax.make_array_from_process_local_data(self.batch_sharding, x, shape), local)
            step += 1

    def validation_loss(self, tokens: np.ndarray, params) -> float:
        count = self.cfg.eval_batches * self.cfg.batch_size // self.cfg.accum_steps
        windows = data.fixed_windows(tokens, self.cfg.model.seq_len, count)
        sharding = shardings.named(self.mesh, P(shardings.BATCH, None))
        first, last = data.process_rows(sharding, windows["inputs"].shape, batch_axis=0)
        batch = jax.tree.map(lambda x: jax.make_array_from_process_local_data(
            sharding, x[first:last], x.shape), windows)
        loss, _ = compiled_program(self.cfg, "eval_loss", self.eval_loss, (params, batch))
        return float(jax.device_get(loss(params, batch)))


def loss_function(cfg: TrainConfig, mesh, specs, dtype):
    """(params, batch) -> mean next-token loss, for the strategy's layout of the model."""
    if cfg.strategy in PIPELINES:
        return pipeline.loss_fn(cfg.model, mesh, cfg.microbatches, dtype)

    def loss(params, batch):
        logits = model.model_apply(cfg.model, specs, mesh, params, batch["inputs"], dtype)
        return model.next_token_loss(logits, batch["targets"])

    return loss


def step_function(cfg: TrainConfig, loss, optimizer):
    """One optimizer step over `accum_steps` micro-batches (scanned), at the host's learning rate."""
    grad_fn = jax.value_and_grad(loss)

    def train_step(state, batch, lr):
        def accumulate(total, micro):
            value, grads = grad_fn(state["params"], micro)
            return jax.tree.map(jnp.add, total, grads), value

        zeros = jax.tree.map(jnp.zeros_like, state["params"])
        grads, losses = jax.lax.scan(accumulate, zeros, batch)
        grads = jax.tree.map(lambda g: g / cfg.accum_steps, grads)
        updates, opt_state = optimizer.update(grads, state["opt"], state["params"])
        params = jax.tree.map(lambda p, u: p - lr * u, state["params"], updates)
        metrics = {"loss": losses.mean(), "grad_norm": optax.global_norm(grads)}
        return {"params": params, "opt": opt_state, "step": state["step"] + 1}, metrics

    return train_step


def build_program(cfg: TrainConfig, *, abstract: bool = False) -> tuple[StepProgram, dict]:
    """The program and the initial state, made together: parameters are born in their
    shardings, and the step is compiled for exactly those (else the compiler may pick
    others and every call would first reshard the whole state). `abstract`: the state's
    shapes, dtypes and shardings only (ShapeDtypeStructs), for a restore to fill; nothing
    is computed or compiled."""
    layout = job_layout()
    mesh = shardings.make_mesh(cfg.strategy, jax.devices(), cfg.tensor_size, layout.nodes, cfg.stages)
    cfg.check_mesh(mesh.shape[shardings.DATA], mesh.shape[shardings.TENSOR], mesh.shape[shardings.REPLICA])
    specs, optimizer = shardings.SPECS[cfg.strategy], make_optimizer(cfg)
    dtype = jnp.bfloat16 if cfg.bf16 else jnp.float32
    replicated = shardings.named(mesh, P())
    if abstract:
        state, made = abstract_state(cfg, mesh, specs, optimizer, replicated), "warm: shapes only, the checkpoint fills them"
    else:
        state, made = initial_state(cfg, mesh, specs, optimizer, replicated)
    state_shardings = jax.tree.map(lambda a: a.sharding, state)
    loss = loss_function(cfg, mesh, specs, dtype)
    step = step_function(cfg, loss, optimizer)
    program = StepProgram(
        cfg=cfg, nodes=layout.nodes, mesh=mesh, specs=specs, optimizer=optimizer, dtype=dtype,
        replicated=replicated, batch_sharding=shardings.named(mesh, P(None, shardings.BATCH, None)),  # (accum, batch, seq)
        state_shardings=state_shardings,
        step=step, train_step=jax.jit(step, donate_argnums=0, out_shardings=(state_shardings, replicated)),
        eval_loss=jax.jit(loss), pipelined=cfg.strategy in PIPELINES, made=made)
    return program, state


def initial_state(cfg: TrainConfig, mesh, specs, optimizer, replicated) -> tuple[dict, str]:
    """Parameters from the seed, the optimizer's state for them, step 0: all in their shardings;
    and how they came (the initialization's program loaded or compiled)."""
    key = jax.random.key(cfg.seed)
    options = model.init_compiler_options(cfg.model, jax.devices()[0].platform)
    initialize, how = compiled_program(cfg, "init_params", model.params_initializer(cfg.model, specs, mesh), (key,),
                                       options)
    params = initialize(key)  # no collective inside
    line_up("parameters")  # processes compile the initialization at different speeds; collectives follow
    if cfg.strategy in PIPELINES:
        params = pipeline.stack_layers(params, mesh)
    opt_state = jax.jit(optimizer.init, out_shardings=optimizer_shardings(optimizer, params, replicated))(params)
    # made on the devices: a host value put on a replicated sharding is first compared across processes
    step = jax.jit(lambda: jnp.zeros((), jnp.int32), out_shardings=replicated)()
    program = "its program loaded" if how.startswith("warm") else "its program compiled"
    return {"params": params, "opt": opt_state, "step": step}, f"cold: parameters initialized from the seed, {program}"


def abstract_state(cfg: TrainConfig, mesh, specs, optimizer, replicated) -> dict:
    """`initial_state`'s shapes, dtypes and shardings, computed from the plan alone."""
    params = model.abstract_params(cfg.model, specs, mesh)
    if cfg.strategy in PIPELINES:
        params = pipeline.stack_abstract(params, mesh)
    opt_shapes = jax.eval_shape(optimizer.init, params)
    opt_state = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), opt_shapes,
                             optimizer_shardings(optimizer, params, replicated))
    return {"params": params, "opt": opt_state, "step": jax.ShapeDtypeStruct((), np.int32, sharding=replicated)}


def optimizer_shardings(optimizer, params, replicated):
    """The optimizer state's shardings: a parameter's moments like the parameter, counts replicated."""
    param_shardings = jax.tree.map(lambda p: p.sharding, params)
    return optax.tree_map_params(optimizer, lambda _, s: s, jax.eval_shape(optimizer.init, params),
                                 param_shardings, transform_non_params=lambda _: replicated)
