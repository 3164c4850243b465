"""What a restart reuses of `hpcjax train`'s start: the compiled executables of its
programs (rank.cache.executables), keyed by the configuration's fields that change the program and by
this package's own source, so an edit to the model code never loads a stale program.
The corpus is kept by train.data, the checkpoint restored into shapes by train.step."""

from __future__ import annotations

import dataclasses
import hashlib
from functools import lru_cache
from pathlib import Path

import hpcjax
from hpcjax.rank.cache import compile_cache
from hpcjax.rank.cache.executables import ExecutableStore
from hpcjax.train.config import TrainConfig

# TrainConfig fields the compiled step does not depend on (the learning rate is an argument);
# every other field, and any field added later, is in the key: a new one can only make it colder.
NOT_IN_PROGRAM = frozenset({
    "steps", "learning_rate", "warmup_steps", "min_lr_ratio", "seed", "run_dir", "checkpoint_every",
    "eval_batches", "log_every", "pace_every", "corpus_bytes", "peak_tflops", "stop_after", "compile_cache",
    "profile_steps", "profile_all_ranks", "profile_server"})


def program_key(cfg: TrainConfig) -> dict:
    fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in NOT_IN_PROGRAM}
    fields["model"] = dataclasses.asdict(cfg.model)
    return {"program": {k: str(v) if not isinstance(v, dict) else v for k, v in fields.items()},
            "hpcjax": f"{hpcjax.__version__} (source {source_digest()})"}


@lru_cache(maxsize=1)
def source_digest() -> str:
    """The training code's own source (this package and the rank side it uses), hashed."""
    digest = hashlib.sha256()
    for folder in (Path(__file__).parent, Path(compile_cache.__file__).parent):
        for path in sorted(folder.glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def compiled_program(cfg: TrainConfig, name: str, jitted, args: tuple, compiler_options: dict | None = None):
    """(`jitted` compiled for `args`, with XLA's `compiler_options` when given, how it came): the
    train step, the parameters' initialization, the validation loss. Loaded from the cache
    directory's executables when an earlier start left one for the same key; else compiled (through
    JAX's persistent cache, when one is on) and stored for the next start. Each process keeps its
    own: on the CPU JAX's persistent cache serves process 0 alone (its key holds the process's view
    of the devices, and only process 0 writes it), so every other process compiled every program at
    every start."""
    def build():
        return jitted.lower(*args).compile(compiler_options=compiler_options)

    directory = cfg.compile_cache_dir()
    stats = compile_cache.stats()
    before = (stats.hits, stats.misses) if stats else (0, 0)
    if directory is None:
        return build(), "cold: compiled (no compilation cache: --compile-cache off)"
    # The options need no place in the key: they follow from the model's fields and the backend,
    # both in it, by a rule in the training source, whose digest is in it too.
    compiled, how = ExecutableStore(directory).compiled(name, jitted, args, program_key(cfg), build=build)
    if how.startswith("cold") and stats is not None:
        how += f"; XLA: {stats.describe(before)}"
    return compiled, how
