"""What a training run is: the model's shape and the run's settings, as frozen,
keyword-only dataclasses that validate themselves like the job spec does.

Importing this module does not import JAX, so the CLI and the Python API refuse
a bad configuration at once, before JAX starts or anything is submitted. The
checks that need the mesh (does the batch split over the data axis?) are in
`TrainConfig.check_mesh`, which the trainer calls once the devices are known.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from hpcjax.protocol.contract import COMPILE_CACHE_ENV, DEFAULT_RUN_DIR
from hpcjax.values.errors import ConfigError
from hpcjax.values.validate import require_choice, require_int, require_number
from hpcjax.protocol.rundir import RunDir

STRATEGIES = ("dp", "fsdp", "tp", "fsdp_tp", "hsdp",  # hsdp: FSDP within each node, data parallel across nodes
              "pp", "dp_pp")  # pp: every device a pipeline stage; dp_pp: stages x data-parallel replicas
PIPELINES = ("pp", "dp_pp")
PACE_STEPS = 3  # steps each capture of train.pace traces


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _positive(config, names: tuple[str, ...], minimum: int = 1) -> None:
    for name in names:
        require_int(name, getattr(config, name), minimum, f"set {_option(name)} (see `hpcjax train --help`)",
                    error=ConfigError)


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    vocab: int = 256  # byte-level: every byte is a token
    seq_len: int = 128  # tokens of context
    d_model: int = 128  # width of the residual stream
    heads: int = 8  # attention heads (tensor parallelism splits them)
    layers: int = 2  # transformer blocks
    d_ff: int = 512  # MLP hidden units

    def __post_init__(self) -> None:
        _positive(self, ("vocab", "seq_len", "d_model", "heads", "layers", "d_ff"))
        if self.d_model % self.heads:
            raise ConfigError(f"d_model={self.d_model} is not a multiple of heads={self.heads}",
                              "every head gets d_model / heads dimensions: change --d-model or --heads")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    def matmul_params(self) -> int:
        """Weights that take part in matrix multiplies (not embeddings' lookups, not norms)."""
        per_layer = 3 * self.d_model * self.d_model + self.d_model * self.d_model + 2 * self.d_model * self.d_ff
        return self.layers * per_layer + self.d_model * self.vocab

    def flops_per_token(self) -> int:
        """Training FLOPs per token: 6 per matmul weight, plus attention scores (PaLM, app. B)."""
        return 6 * self.matmul_params() + 12 * self.layers * self.seq_len * self.d_model


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    strategy: str = "fsdp"  # dp | fsdp | tp | fsdp_tp | hsdp
    tensor_size: int | None = None  # fsdp_tp: devices on the "tensor" axis (default 2)
    stages: int | None = None  # pp/dp_pp: pipeline stages (pp: every device; dp_pp: default 2)
    microbatches: int = 4  # pp/dp_pp: micro-batches flowing through the pipeline per step
    steps: int = 200  # optimizer steps in all (a resumed run continues to this)
    batch_size: int = 32  # sequences per optimizer step, over all processes
    accum_steps: int = 1  # micro-batches per step (gradient accumulation)
    learning_rate: float = 3e-3  # peak, after warmup
    warmup_steps: int = 20  # linear warmup, then cosine decay
    min_lr_ratio: float = 0.1  # the cosine ends at this fraction of the peak
    weight_decay: float = 0.1  # AdamW's decoupled decay, matrices only
    clip_norm: float = 1.0  # global gradient-norm clip
    bf16: bool = False  # compute in bfloat16, keep float32 master weights
    seed: int = 0  # parameters and data order
    run_dir: str = DEFAULT_RUN_DIR  # checkpoints and metrics.jsonl (shared storage on a cluster)
    checkpoint_every: int = 50  # steps between checkpoints; 0 = never
    eval_batches: int = 4  # validation batches of batch_size sequences at the end
    log_every: int = 10  # steps between progress lines
    pace_every: int = 100  # steps between captures that find a slow rank (train.pace); 0: never
    corpus_bytes: int = 4 << 20  # bytes of standard-library source to train on
    peak_tflops: float = 312.0  # per device, for MFU (A100 bfloat16 dense)
    stop_after: int | None = None  # stop after this many steps in this run, as if preempted
    compile_cache: str = "auto"  # JAX's persistent cache: auto ($HPCJAX_COMPILE_CACHE, else <run_dir>/compile-cache), off, or a directory
    profile_steps: str | None = None  # "A:B": a profiler trace of steps A..B (inclusive) into the run dir
    profile_all_ranks: bool = False  # trace on every process, not only process 0
    profile_server: int | None = None  # a port for JAX's profiler server (captures on demand)

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelConfig):
            raise ConfigError(f"model must be a ModelConfig, got {type(self.model).__name__}",
                              "build it with hpcjax.train.ModelConfig(...)")
        require_choice("strategy", self.strategy, STRATEGIES, error=ConfigError)
        _positive(self, ("steps", "batch_size", "accum_steps", "eval_batches", "log_every", "corpus_bytes"))
        _positive(self, ("warmup_steps", "checkpoint_every", "seed", "pace_every"), minimum=0)
        if 0 < self.pace_every < 2 * PACE_STEPS:
            raise ConfigError(f"pace_every={self.pace_every} is too short: each capture traces {PACE_STEPS} steps "
                              f"and the steps between captures are not traced",
                              f"set --pace-every 0 (never) or at least {2 * PACE_STEPS}, e.g. 100")
        for name in ("tensor_size", "stop_after"):
            if getattr(self, name) is not None:
                _positive(self, (name,))
        if self.tensor_size is not None and self.strategy != "fsdp_tp":
            raise ConfigError(f"tensor_size={self.tensor_size} was given with strategy {self.strategy!r}",
                              "--tensor-size is for fsdp_tp; tp puts every device on the tensor axis")
        for name, bounds in (("learning_rate", dict(above=0)), ("peak_tflops", dict(above=0)),
                             ("clip_norm", dict(above=0)), ("weight_decay", dict(at_least=0)),
                             ("min_lr_ratio", dict(at_least=0, at_most=1))):
            require_number(name, getattr(self, name), f"set {_option(name)}", error=ConfigError, **bounds)
        if not isinstance(self.run_dir, str) or not self.run_dir:
            raise ConfigError(f"run_dir must be a non-empty path, got {self.run_dir!r}",
                              "--run-dir on shared storage, e.g. /shared/runs/lm1")
        where = os.path.abspath(self.run_dir)
        if self.checkpoint_every and re.search(r"\[[^/]*\]", where):
            # Orbax (through etils' epath) globs inside the checkpoint's directory with the directory in the
            # pattern: under "a[b]c" it finds none of its own files, and a restore fails NOT_FOUND.
            raise ConfigError(f"run_dir {where!r} has a [...] in its path: Orbax saves checkpoints there but cannot "
                              "restore them (it reads the brackets as a glob pattern)",
                              "give --run-dir a path without [ and ], or --checkpoint-every 0 (no checkpoints)")
        if not isinstance(self.compile_cache, str) or not self.compile_cache:
            raise ConfigError(f"compile_cache must be auto, off or a directory, got {self.compile_cache!r}",
                              "--compile-cache auto (under the run directory), off, or a shared directory")
        self.profile_range()  # raises for a malformed or out-of-range --profile-steps
        if self.profile_server is not None:
            require_int("profile_server", self.profile_server, 1, "a free TCP port, e.g. --profile-server 9999",
                        error=ConfigError)
            if self.profile_server > 65535:
                raise ConfigError(f"profile_server={self.profile_server} is not a TCP port",
                                  "a port is 1..65535, e.g. --profile-server 9999")
        self._check_pipeline()
        if self.batch_size % self.accum_steps:
            raise ConfigError(f"batch_size={self.batch_size} is not a multiple of accum_steps={self.accum_steps}",
                              "each step splits its batch into equal micro-batches: change --batch-size or "
                              "--accum-steps")

    def _check_pipeline(self) -> None:
        if self.strategy not in PIPELINES:
            if self.stages is not None:
                raise ConfigError(f"stages={self.stages} was given with strategy {self.strategy!r}",
                                  "--stages is for the pipeline strategies: --strategy pp or dp_pp")
            return
        _positive(self, ("microbatches",))
        if self.stages is None:
            return
        _positive(self, ("stages",))
        layers = self.model.layers
        if self.stages > layers or layers % self.stages:
            valid = [s for s in range(1, layers + 1) if layers % s == 0]
            raise ConfigError(f"{layers} layers do not divide into {self.stages} pipeline stages",
                              f"every stage holds the same number of layers: --stages one of "
                              f"{', '.join(map(str, valid))}, or change --layers")

    def profile_range(self) -> tuple[int, int] | None:
        """--profile-steps A:B as (A, B), both within the run's steps."""
        if self.profile_steps is None:
            return None
        first, sep, last = str(self.profile_steps).partition(":")
        if not (first.isdigit() and last.isdigit() and sep) or int(first) > int(last):
            raise ConfigError(f"malformed profile_steps {self.profile_steps!r}",
                              "write --profile-steps A:B with A <= B, e.g. --profile-steps 3:5")
        if int(last) >= self.steps:
            raise ConfigError(f"profile_steps {self.profile_steps} reaches past the last step ({self.steps - 1})",
                              f"pick steps below --steps {self.steps}")
        return int(first), int(last)

    def compile_cache_dir(self, environ=os.environ) -> str | None:
        """auto: the cache the job names in $HPCJAX_COMPILE_CACHE (one many runs share), else
        the run directory's own."""
        if self.compile_cache == "off":
            return None
        if self.compile_cache == "auto":
            shared = environ.get(COMPILE_CACHE_ENV, "")
            return None if shared == "off" else shared or str(RunDir(self.run_dir).compile_cache)
        return self.compile_cache

    @property
    def micro_batch(self) -> int:
        return self.batch_size // self.accum_steps

    def check_mesh(self, data_size: int, tensor_size: int, replica_size: int = 1) -> None:
        """What only the mesh can tell: does every sharded dimension split evenly?"""
        m, mesh = self.model, f"{replica_size} (replica) x {data_size} (data) x {tensor_size} (tensor)"
        batch_ways = replica_size * data_size
        problems = [
            (self.micro_batch % batch_ways == 0,
             f"each micro-batch ({self.micro_batch} sequences) must split evenly over the {batch_ways} devices "
             f"of the batch axes", "make --batch-size / --accum-steps a multiple of the batch axes"),
            (m.heads % tensor_size == 0 and m.d_ff % tensor_size == 0 and m.d_model % tensor_size == 0,
             f"heads={m.heads}, d_ff={m.d_ff} and d_model={m.d_model} must split over {tensor_size} "
             "tensor-parallel devices", "pick --heads, --d-ff and --d-model divisible by the tensor axis"),
            (m.d_model % data_size == 0 or self.strategy == "dp",
             f"d_model={m.d_model} must split over the {data_size} devices FSDP shards over",
             "pick --d-model divisible by the data axis, or --strategy dp"),
        ]
        if self.strategy in PIPELINES:
            per_shard = self.micro_batch // max(1, batch_ways)
            problems.append((per_shard % self.microbatches == 0,
                             f"each data shard's {per_shard} sequences per step do not split into "
                             f"{self.microbatches} pipeline micro-batches",
                             "make --batch-size / (--accum-steps x the data axis) a multiple of --microbatches"))
        for ok, message, hint in problems:
            if not ok:
                raise ConfigError(message, f"{hint}; the mesh for {self.strategy} is {mesh}")
