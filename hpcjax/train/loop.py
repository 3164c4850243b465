"""The training loop, in the stages the JAX cookbook names: start the process, build the
program, resume, then for every step: take it, let each stage see it (train.stage), and
end it (agree to stop, record the pace, checkpoint); then evaluate.

Nothing inside the loop waits for the devices: metrics are read one step late
(RecordWriter), the learning rate comes from NumPy on the host, and data is
placed asynchronously. The only pauses on purpose are checkpoint steps (Orbax
copies the state off the devices before it returns) and the final evaluation;
the per-step stop agreement (train.stop) waits for the other hosts, not the devices.
"""

from __future__ import annotations

import dataclasses
import json

import jax

from hpcjax.rank.cache import compile_cache
from hpcjax.rank.start.barriers import coordination_client, line_up
from hpcjax.protocol.rundir import RunDir
from hpcjax.train import data
from hpcjax.train.checkpoint import Checkpoints
from hpcjax.train.config import TrainConfig
from hpcjax.train.metrics import RecordWriter
from hpcjax.train.observe import StartClock, StepProfiler
from hpcjax.train.pace import PaceMeter
from hpcjax.train.pipeline import bubble_fraction
from hpcjax.train.shardings import describe_mesh
from hpcjax.train.step import StepProgram, build_program, learning_rate, node_of
from hpcjax.train.stop import StepProgress, StopRequest
from hpcjax.train.warm import compiled_program
from hpcjax.protocol.placement import node_name
from hpcjax.values.voice import say


def say_on_process_0(text: str) -> None:
    if jax.process_index() == 0:
        say(text)


def train(cfg: TrainConfig) -> dict:
    """Run (or resume) training in this process; every process of the job calls it.
    Returns a summary: losses, validation loss, where it started and stopped."""
    start_process(cfg)
    clock = StartClock()
    run = RunDir(cfg.run_dir)
    checkpoints = Checkpoints(run.checkpoints, cfg.checkpoint_every)
    latest = checkpoints.latest_step()
    program, state = build_program(cfg, abstract=latest is not None)  # a checkpoint fills the shapes
    clock.phase("model", program.made)
    train_tokens, val_tokens, how = data.corpus_kept_in(run.data, cfg.corpus_bytes)
    clock.phase("data", how)
    state, start, resumed = resume(checkpoints, state, latest)
    clock.phase("restore", f"step {latest} from {checkpoints.directory}" if resumed else "no checkpoint")
    announce(cfg, program, start, len(train_tokens))
    write_config(cfg, program, run)
    writer = open_record(cfg, run, start, resumed)
    pace = PaceMeter(coordination_client(), node_name(), cfg.pace_every, start, cfg.profile_range()) \
        if jax.process_count() > 1 else None  # which rank the others wait for
    watch = StepProgress()
    # Outermost first: the step is progress before anything else, the pace capture ends after the writer.
    stages = [s for s in (watch, pace, writer, StepProfiler(cfg.profile_range(), run.path, cfg.profile_all_ranks))
              if s is not None]
    end_step = StepEnd(cfg, start, StopRequest(), pace, writer, checkpoints, watch)
    batches = program.batches(data.Batches(train_tokens, cfg.model.seq_len, cfg.batch_size, cfg.seed), start)
    clock.phase("setup")
    done, step_fn = start, None
    try:
        for step in range(start, cfg.steps):
            lr, batch = learning_rate(cfg, step), next(batches)
            if step_fn is None:  # compiled (or loaded) ahead of time, so the first step's phases are timed apart
                step_fn, how = compiled_program(cfg, "train_step", program.train_step, (state, batch, lr))
                clock.phase("compile", how)
                line_up("first step")  # one process loaded its step, another compiled it: the wait is the first step's
            for stage in stages:
                stage.before_step(step)
            state, metrics = step_fn(state, batch, lr)
            if step == start:
                clock.ran(metrics)
                say_on_process_0(clock.describe())
                writer.write_event({"step": start, "time_to_first_step": clock.as_dict()})
            for stage in reversed(stages):
                stage.after_step(step, lr, metrics)
            done = step + 1
            if end_step(done, state):
                break
        writer.flush()
        watch.close()  # the final evaluation is not a step
        val_loss = None if end_step.stopped_early else program.validation_loss(val_tokens, state["params"])
        writer.write_event({"step": done, "val_loss": val_loss, "stopped_early": end_step.stopped_early})
    finally:
        for stage in reversed(stages):  # the final evaluation and the last save's wait are not steps
            stage.close()
        checkpoints.close()
    return {**summarize(cfg, writer.history, start, val_loss, end_step.stopped_early, run.path),
            "time_to_first_step": clock.as_dict() if done > start else None}


def start_process(cfg: TrainConfig) -> None:
    """JAX initialized for the job's layout, the compilation cache and the profiler server on."""
    from hpcjax.rank.start.runtime import initialize

    initialize()  # a no-op when the caller has already initialized
    if cfg.compile_cache_dir():
        compile_cache.enable(cfg.compile_cache_dir())  # before anything compiles
    else:
        compile_cache.disable()  # off wins a cache the job's environment names
    if cfg.profile_server:
        jax.profiler.start_server(cfg.profile_server)
        say_on_process_0(f"profiler server on port {cfg.profile_server} of every process (capture from TensorBoard)")


def resume(checkpoints: Checkpoints, state, latest: int | None) -> tuple[dict, int, bool]:
    """The state to start from, its step, and whether it came from a checkpoint (`latest`)."""
    if latest is None:
        return state, 0, False
    state, start = checkpoints.restore(latest, state)
    say_on_process_0(f"resumed from the checkpoint of step {latest} in {checkpoints.directory}")
    return state, start, True


def announce(cfg: TrainConfig, program: StepProgram, start: int, corpus_bytes: int) -> None:
    say_on_process_0(f"training {cfg.strategy} on mesh {describe_mesh(program.mesh, node_of)} ({jax.device_count()} devices, "
        f"{jax.process_count()} processes): steps {start}..{cfg.steps}, corpus {corpus_bytes} bytes")
    if program.pipelined:
        stages = program.mesh.shape["stage"]
        say_on_process_0(f"pipeline: {cfg.model.layers // stages} layer(s) on each of {stages} stages, {cfg.microbatches} "
            f"micro-batches per step (GPipe): bubble {bubble_fraction(stages, cfg.microbatches):.1%} of the schedule")


def write_config(cfg: TrainConfig, program: StepProgram, run: RunDir) -> None:
    """What `hpcjax report` shows of the run's configuration and layout (process 0)."""
    if jax.process_index() == 0:
        run.path.mkdir(parents=True, exist_ok=True)
        run.config.write_text(json.dumps(
            {**dataclasses.asdict(cfg), "mesh": describe_mesh(program.mesh, node_of), "devices": jax.device_count(),
             "processes": jax.process_count(), "nodes": program.nodes}, default=str, indent=1))


def open_record(cfg: TrainConfig, run: RunDir, start: int, resumed: bool) -> RecordWriter:
    """The metrics record (process 0 writes it), begun with a line saying where this run started."""
    tokens_per_step = cfg.batch_size * cfg.model.seq_len
    writer = RecordWriter(run.metrics if jax.process_index() == 0 else None, tokens_per_step=tokens_per_step,
                          flops_per_step=cfg.model.flops_per_token() * tokens_per_step,
                          peak_flops=cfg.peak_tflops * 1e12 * jax.device_count(),
                          total_steps=cfg.steps, log_every=cfg.log_every, start_step=start)
    # Marks where each run began, so a report shows a resume that redid no step too.
    writer.write_event({"step": start, "run_started": True, "resumed": resumed})
    return writer


class StepEnd:
    """The end of every step: agree with the other processes whether to stop (SLURM's warning
    reached one), take the pace capture's record, and checkpoint when it is time (or when
    the run stops early, whatever --checkpoint-every is)."""

    def __init__(self, cfg: TrainConfig, start: int, stop: StopRequest, pace: PaceMeter | None,
                 writer: RecordWriter, checkpoints: Checkpoints, watch: StepProgress) -> None:
        self.cfg, self.start, self.stop, self.pace = cfg, start, stop, pace
        self.writer, self.checkpoints, self.watch = writer, checkpoints, watch
        self.stopped_early = False

    def __call__(self, done: int, state) -> bool:
        """True: the loop stops after step `done`."""
        last_of_run = self.cfg.stop_after is not None and done - self.start >= self.cfg.stop_after
        warned = self.stop.agreed(done, self.pace)  # every step: a warning is honoured at once
        if self.pace is not None:
            self.writer.pace(self.pace.take())
        at_checkpoint = self.checkpoints.every > 0 and done % self.checkpoints.every == 0
        if not (at_checkpoint or last_of_run or warned or done == self.cfg.steps):
            return False
        self.stopped_early = (last_of_run or warned) and done < self.cfg.steps
        self.writer.flush()  # this step's record, timed before the save pauses the loop
        with self.watch.hold():  # a save is a pause on purpose
            saved = self.checkpoints.every > 0 and self.checkpoints.save(
                done, state, data_position=done, force=self.stopped_early or done == self.cfg.steps)
        self.writer.restart_clock()
        if self.stopped_early:
            self.stop.leave_marker(done)
            say_on_process_0(f"stopping after step {done} " + ("(checkpoint saved); run again to resume" if saved
                                                  else "without a checkpoint (--checkpoint-every 0)"))
        return self.stopped_early


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
    validation = f"validation {val_loss:.4f}" if val_loss is not None else "no validation (stopped early)"
    if not history:  # a relaunch of a finished run: resumed at its last step
        say_on_process_0(f"nothing to train: the run is at step {start} of {cfg.steps} already ({run_dir}); {validation}; "
            "raise --steps to train on, or give a new --run-dir to start over")
    elif val_loss is not None:
        say_on_process_0(f"done: first loss {summary['first_loss']:.4f}, last {summary['last_loss']:.4f}, "
            f"{validation}; {summary['tokens_per_s'] / 1000:.1f}k tokens/s")
    return summary
