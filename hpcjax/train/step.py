"""Training the way the JAX training cookbook teaches: a mesh, parameters born in
their shardings, one jitted step that donates the state, and a loop that never
makes the host wait for the devices.

    from hpcjax.train import TrainConfig, train
    summary = train(TrainConfig(strategy="fsdp", steps=200))

This module holds the pieces of one step (optimizer, schedule, the jitted step,
batches); `loop` runs them.

Optimizer: optax's clip_by_global_norm + scale_by_adam + add_decayed_weights
(AdamW with decoupled decay, masked off vectors), scaled by a learning rate the
host computes with NumPy and passes in. optax rather than a tree-mapped Adam of
our own: the same arithmetic, tested, and its state maps onto the parameter
shardings with optax.tree_map_params.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P

from hpcjax.contract import NODES_ENV
from hpcjax.train import data, model, pipeline, shardings
from hpcjax.train.config import PIPELINES, TrainConfig


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


def nodes_of_job() -> int:
    """The job's nodes (the layout the script exported); 1 outside a job. Processes are
    placed on nodes in blocks, in order, as srun and the local backend do."""
    nodes = int(os.environ.get(NODES_ENV, "1") or 1)
    return nodes if nodes > 0 and jax.process_count() % nodes == 0 else 1


def node_of(device) -> int:
    return device.process_index // max(1, jax.process_count() // nodes_of_job())


class Trainer:
    """The pieces a run needs, built once: mesh, specs, optimizer, jitted step and eval."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.nodes = nodes_of_job()
        self.mesh = shardings.make_mesh(cfg.strategy, jax.devices(), cfg.tensor_size, self.nodes, cfg.stages)
        cfg.check_mesh(self.mesh.shape[shardings.DATA], self.mesh.shape[shardings.TENSOR],
                       self.mesh.shape[shardings.REPLICA])
        self.specs = shardings.SPECS[cfg.strategy]
        self.optimizer = make_optimizer(cfg)
        self.dtype = jnp.bfloat16 if cfg.bf16 else jnp.float32
        self.replicated = shardings.named(self.mesh, P())
        self.batch_sharding = shardings.named(self.mesh, P(None, shardings.BATCH, None))  # (accum, batch, seq)
        self.train_step = None  # compiled for the state's shardings by init_state
        self.pipelined = cfg.strategy in PIPELINES
        if self.pipelined:
            self._loss = pipeline.loss_fn(cfg.model, self.mesh, cfg.microbatches, self.dtype)
        self.eval_loss = jax.jit(self._loss)

    def init_state(self) -> dict:
        params = model.init_params(self.cfg.model, self.specs, self.mesh, jax.random.key(self.cfg.seed))
        if self.pipelined:
            params = pipeline.stack_layers(params, self.mesh)
        param_shardings = jax.tree.map(lambda p: p.sharding, params)
        opt_shardings = optax.tree_map_params(self.optimizer, lambda _, s: s,
                                              jax.eval_shape(self.optimizer.init, params), param_shardings,
                                              transform_non_params=lambda _: self.replicated)
        opt_state = jax.jit(self.optimizer.init, out_shardings=opt_shardings)(params)
        step = jax.device_put(np.zeros((), np.int32), self.replicated)
        state = {"params": params, "opt": opt_state, "step": step}
        # The step returns the state in the shardings it came in: otherwise the compiler
        # may pick others and every call would first reshard the whole state.
        self.state_shardings = jax.tree.map(lambda a: a.sharding, state)
        self.train_step = jax.jit(self._train_step, donate_argnums=0,
                                  out_shardings=(self.state_shardings, self.replicated))
        return state

    def _loss(self, params, batch):
        logits = model.model_apply(self.cfg.model, self.specs, self.mesh, params, batch["inputs"], self.dtype)
        return model.next_token_loss(logits, batch["targets"])

    def _train_step(self, state, batch, lr):
        grad_fn = jax.value_and_grad(self._loss)

        def accumulate(total, micro):
            loss, grads = grad_fn(state["params"], micro)
            return jax.tree.map(jnp.add, total, grads), loss

        zeros = jax.tree.map(jnp.zeros_like, state["params"])
        grads, losses = jax.lax.scan(accumulate, zeros, batch)
        grads = jax.tree.map(lambda g: g / self.cfg.accum_steps, grads)
        updates, opt_state = self.optimizer.update(grads, state["opt"], state["params"])
        params = jax.tree.map(lambda p, u: p - lr * u, state["params"], updates)
        metrics = {"loss": losses.mean(), "grad_norm": optax.global_norm(grads)}
        return {"params": params, "opt": opt_state, "step": state["step"] + 1}, metrics

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
        return float(jax.device_get(self.eval_loss(params, batch)))
