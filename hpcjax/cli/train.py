"""`hpcjax train`: the cookbook transformer on the standard library's source,
run inside a job step (`hpcjax submit ... -- hpcjax train ...`) or locally.
The configuration validates itself before JAX is imported."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import fields

from hpcjax.protocol.contract import DEFAULT_RUN_DIR
from hpcjax.train.config import STRATEGIES
from hpcjax.cli.verbs import HELP


def add_train_verb(sub) -> None:
    train = sub.add_parser("train", help=HELP["train"],
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    g = train.add_argument_group("parallelism")
    g.add_argument("--strategy", default="fsdp", choices=STRATEGIES,
                   help="dp (data parallel), fsdp (parameters sharded over every device), tp (tensor parallel), "
                        "fsdp_tp (FSDP x --tensor-size), hsdp (FSDP within each node, data parallel across nodes), "
                        "pp (a pipeline stage per device) or dp_pp (--stages stages x data parallel)")
    g.add_argument("--tensor-size", type=int, help="fsdp_tp: devices on the tensor axis (not given: 2)")
    g.add_argument("--stages", type=int, help="pp/dp_pp: pipeline stages (not given: pp every device, dp_pp 2)")
    g.add_argument("--microbatches", type=int, default=4, help="pp/dp_pp: micro-batches per step")
    g = train.add_argument_group("optimization")
    g.add_argument("--steps", type=int, default=200, help="optimizer steps in all (a resumed run counts on)")
    g.add_argument("--batch-size", type=int, default=32, help="sequences per step, all processes together")
    g.add_argument("--accum-steps", type=int, default=1, help="micro-batches per step")
    g.add_argument("--learning-rate", type=float, default=3e-3, help="peak learning rate (AdamW, cosine decay)")
    g.add_argument("--warmup-steps", type=int, default=20, help="linear warm-up to the peak")
    g.add_argument("--weight-decay", type=float, default=0.1, help="AdamW's decoupled weight decay")
    g.add_argument("--clip-norm", type=float, default=1.0, help="gradients clipped to this global norm")
    g.add_argument("--bf16", action="store_true", help="bfloat16 compute, float32 master weights")
    g.add_argument("--seed", type=int, default=0, help="parameters and data order")
    g = train.add_argument_group("model")
    g.add_argument("--seq-len", type=int, default=128, help="tokens (bytes) per sequence")
    g.add_argument("--d-model", type=int, default=128, help="width of the residual stream")
    g.add_argument("--heads", type=int, default=8, help="attention heads (divide --d-model)")
    g.add_argument("--layers", type=int, default=2, help="transformer blocks")
    g.add_argument("--d-ff", type=int, default=512, help="width of the MLP")
    g = train.add_argument_group("run")
    g.add_argument("--run-dir", default=DEFAULT_RUN_DIR, help="checkpoints and metrics.jsonl (shared storage)")
    g.add_argument("--checkpoint-every", type=int, default=50, help="steps between checkpoints (0: never)")
    g.add_argument("--eval-batches", type=int, default=4, help="held-out batches for the validation loss at the end")
    g.add_argument("--log-every", type=int, default=10, help="steps between progress lines")
    g.add_argument("--pace-every", type=int, default=100,
                   help="steps between the short traces that name a slow rank (0: never; multi-process runs)")
    g.add_argument("--corpus-bytes", type=int, default=4 << 20,
                   help="bytes of the standard library's source to train on")
    g.add_argument("--peak-tflops", type=float, default=312.0, help="per device, for MFU (312: an A100 in bf16)")
    g.add_argument("--stop-after", type=int, help="stop after this many steps, as if preempted")
    g.add_argument("--compile-cache", default="auto",
                   help="JAX's persistent compilation cache: auto ($HPCJAX_COMPILE_CACHE when the job "
                        "sets it, else <run-dir>/compile-cache), off, or a directory on shared storage")
    g = train.add_argument_group("profiling")
    g.add_argument("--profile-steps", metavar="A:B", help="a profiler trace of steps A..B into <run-dir>/profile")
    g.add_argument("--profile-all-ranks", action="store_true", help="trace on every process, not only process 0")
    g.add_argument("--profile-server", type=int, metavar="PORT",
                   help="start JAX's profiler server on PORT for captures on demand")
    g.add_argument("--json", action="store_true", help="print the summary as JSON on stdout (process 0)")
    train.set_defaults(run=cmd_train, takes_command=False)


def config_from_args(args: argparse.Namespace):
    """A TrainConfig from the options: the configuration's own checks speak for bad values."""
    from hpcjax.train.config import ModelConfig, TrainConfig

    model = ModelConfig(**{f.name: getattr(args, f.name) for f in fields(ModelConfig) if hasattr(args, f.name)})
    names = {f.name for f in fields(TrainConfig)} - {"model"}
    return TrainConfig(model=model, **{n: getattr(args, n) for n in names if hasattr(args, n)})


def writable_run_dir(run_dir: str) -> None:
    """The run directory is a directory this rank can write, said before JAX starts (a file, or a
    folder under /proc, was found at the compilation cache's first write, and blamed on it)."""
    import tempfile

    from hpcjax.values.errors import ConfigError
    from hpcjax.values.validate import make_directory

    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise ConfigError(f"--run-dir {run_dir!r} is a file, not a directory",
                          "give a directory for the run's checkpoints and metrics (made if it is not there), e.g. "
                          "--run-dir runs/first")
    make_directory(run_dir, "--run-dir", ConfigError)
    try:
        with tempfile.NamedTemporaryFile(dir=run_dir, prefix=".hpcjax-writable-"):
            pass
    except OSError as err:
        raise ConfigError(f"--run-dir {run_dir!r} cannot be written: {err.strerror or err}",
                          "give a directory on storage you can write (shared by the nodes), e.g. --run-dir "
                          "$SCRATCH/runs/first") from None


def cmd_train(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.cli.options import flagged
    from hpcjax.values.errors import ConfigError
    from hpcjax.train.config import ModelConfig, TrainConfig

    try:
        cfg = config_from_args(args)  # refuses bad values before JAX starts
    except ConfigError as err:  # named as the flags typed: --d-model 96, not d_model=96
        names = [f.name for config in (TrainConfig, ModelConfig) for f in fields(config)]
        raise ConfigError(flagged(err.message, names), flagged(err.hint, names)) from None
    writable_run_dir(cfg.run_dir)
    import jax

    from hpcjax.train.loop import train

    summary = train(cfg)
    if args.json and jax.process_index() == 0:
        print(json.dumps(summary))
    return 0
