"""The training loop: resume, step, record, checkpoint, evaluate.

Nothing inside the loop waits for the devices: metrics are read one step late
(RecordWriter), the learning rate comes from NumPy on the host, and data is
placed asynchronously. The only pauses on purpose are checkpoint steps (Orbax
copies the state off the devices before it returns) and the final evaluation;
the per-step stop agreement (train.stop) waits for the other hosts, not the devices.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import jax

from hpcjax.train import data
from hpcjax.train.checkpoint import Checkpoints
from hpcjax.rank import compile_cache
from hpcjax.train.metrics import RecordWriter
from hpcjax.train.observe import FirstStep, StepProfiler
from hpcjax.train.pace import PaceMeter
from hpcjax.train.pipeline import bubble_fraction
from hpcjax.train.config import TrainConfig
from hpcjax.train.shardings import describe_mesh
from hpcjax.train.step import Trainer, learning_rate, node_of
from hpcjax.train.stop import StepWatchdog, StopRequest, coordination_client, step_timeout_s
from hpcjax.rank.checks import node_name


def say(text: str) -> None:
    if jax.process_index() == 0:
        print(text, file=sys.stderr, flush=True)


def train(cfg: TrainConfig) -> dict:
    """Run (or resume) training in this process; every process of the job calls it.
    Returns a summary: losses, validation loss, where it started and stopped."""
    from hpcjax.rank.runtime import initialize

    initialize()  # a no-op when the caller has already initialized
    if cfg.compile_cache_dir():
        compile_cache.enable(cfg.compile_cache_dir())  # before anything compiles
    if cfg.profile_server:
        jax.profiler.start_server(cfg.profile_server)
        say(f"profiler server on port {cfg.profile_server} of every process (capture from TensorBoard)")
    first_step = FirstStep()
    trainer = Trainer(cfg)
    run_dir = Path(cfg.run_dir)
    profiler = StepProfiler(cfg.profile_range(), run_dir, cfg.profile_all_ranks)
    train_tokens, val_tokens = data.load_corpus(cfg.corpus_bytes)
    corpus = data.Batches(train_tokens, cfg.model.seq_len, cfg.batch_size, cfg.seed)
    checkpoints = Checkpoints(run_dir / "checkpoints", cfg.checkpoint_every)
    state, start = trainer.init_state(), 0
    latest = checkpoints.latest_step()
    if latest is not None:
        state, start = checkpoints.restore(latest, state)
        say(f"resumed from the checkpoint of step {latest} in {run_dir / 'checkpoints'}")
    say(f"training {cfg.strategy} on mesh {describe_mesh(trainer.mesh, node_of)} ({jax.device_count()} devices, "
        f"{jax.process_count()} processes): steps {start}..{cfg.steps}, corpus {len(train_tokens)} bytes")
    if trainer.pipelined:
        stages = trainer.mesh.shape["stage"]
        say(f"pipeline: {cfg.model.layers // stages} layer(s) on each of {stages} stages, {cfg.microbatches} "
            f"micro-batches per step (GPipe): bubble {bubble_fraction(stages, cfg.microbatches):.1%} of the schedule")
    if jax.process_index() == 0:  # what `hpcjax report` shows of the run's configuration and layout
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.json").write_text(json.dumps(
            {**dataclasses.asdict(cfg), "mesh": describe_mesh(trainer.mesh, node_of), "devices": jax.device_count(),
             "processes": jax.process_count(), "nodes": trainer.nodes}, default=str, indent=1))
    tokens_per_step = cfg.batch_size * cfg.model.seq_len
    writer = RecordWriter(run_dir / "metrics.jsonl" if jax.process_index() == 0 else None,
                          tokens_per_step=tokens_per_step,
                          flops_per_step=cfg.model.flops_per_token() * tokens_per_step,
                          peak_flops=cfg.peak_tflops * 1e12 * jax.device_count(),
                          total_steps=cfg.steps, log_every=cfg.log_every, start_step=start)
    # Marks where each run began, so a report shows a resume that redid no step too.
    writer.write_event({"step": start, "run_started": True, "resumed": latest is not None})
    stop, stopped_early = StopRequest(), False
    pace = PaceMeter(coordination_client(), node_name(), cfg.pace_every, start, cfg.profile_range()) \
        if jax.process_count() > 1 else None  # which rank the others wait for
    watchdog = StepWatchdog(step_timeout_s(), jax.process_index())
    batches = trainer.batches(corpus, start)
    done = start
    try:
        for step in range(start, cfg.steps):
            lr = learning_rate(cfg, step)
            batch = next(batches)
            if step == start:
                first_step.compile(trainer, state, batch, lr)
            if pace is not None:
                pace.before(step)
            with profiler.before(step):
                state, metrics = trainer.train_step(state, batch, lr)
            if step == start:
                first_step.ran(metrics)
                say(first_step.describe())
            profiler.after(step, metrics)
            writer(step, lr, metrics)  # waits for the previous step's metrics: it has finished
            if pace is not None:  # after the writer: its clock sees a capture's wait as this step's
                pace.after(step, metrics)
            watchdog.beat(step)
            done = step + 1
            last_of_run = cfg.stop_after is not None and done - start >= cfg.stop_after
            warned = stop.agreed(done, pace)  # every step: a warning is honoured at once, not at a checkpoint
            if pace is not None:
                writer.pace(pace.take())
            at_checkpoint = checkpoints.every > 0 and done % checkpoints.every == 0
            if at_checkpoint or last_of_run or warned or done == cfg.steps:
                stopped_early = (last_of_run or warned) and done < cfg.steps
                writer.flush()  # this step's record, timed before the save pauses the loop
                saved = checkpoints.every > 0 and checkpoints.save(
                    done, state, data_position=done, force=stopped_early or done == cfg.steps)
                writer.restart_clock()
                watchdog.beat()
                if stopped_early:
                    stop.leave_marker(done)
                    say(f"stopping after step {done} " + ("(checkpoint saved); run again to resume" if saved
                                                          else "without a checkpoint (--checkpoint-every 0)"))
                    break
        writer.flush()
        val_loss = None if stopped_early else trainer.validation_loss(val_tokens, state["params"])
        writer.write_event({"step": done, "val_loss": val_loss, "stopped_early": stopped_early})
    finally:
        profiler.close()
        if pace is not None:
            pace.close()
        watchdog.close()  # the final evaluation and the last save's wait are not steps
        checkpoints.close()
        writer.close()
    return {**summarize(cfg, writer.history, start, val_loss, stopped_early, run_dir),
            "time_to_first_step": first_step.as_dict() if done > start else None}


def summarize(cfg, history, start, val_loss, stopped_early, run_dir) -> dict:
    steady = history[1:] or history  # the first step includes compilation
    summary = {
        "strategy": cfg.strategy, "start_step": start, "end_step": start + len(history),
        "losses": [h["loss"] for h in history],
        "first_loss": history[0]["loss"] if history else None,
        "last_loss": history[-1]["loss"] if history else None,
        "val_loss": val_loss, "stopped_early": stopped_early,
        "tokens_per_s": sum(h["tokens_per_s"] for h in steady) / len(steady) if steady else None,
        "mfu": sum(h["mfu"] for h in steady) / len(steady) if steady else None,
        "run_dir": str(run_dir),
    }
    if jax.process_index() == 0 and val_loss is not None:
        say(f"done: first loss {summary['first_loss']:.4f}, last {summary['last_loss']:.4f}, "
            f"validation {val_loss:.4f}; {summary['tokens_per_s'] / 1000:.1f}k tokens/s")
    return summary
