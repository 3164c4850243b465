"""A byte-level corpus that exists wherever hpcjax runs: the Python standard
library's own source files. No downloads.

The files are read in sorted order and split deterministically by name (about
one file in twenty is validation). A training batch for step s is a set of
windows whose offsets come from a generator seeded with (seed, s), so any process
can produce any step's rows without reading the others' and without state
beyond the step number: resuming at step s is exact.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from hpcjax.values.errors import UsageError

VALIDATION_EVERY = 20  # one file in twenty goes to validation (by a hash of its name)


@lru_cache(maxsize=4)
def load_corpus(max_bytes: int, root: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) byte arrays from the standard library's .py files."""
    base = Path(root or sysconfig.get_paths()["stdlib"])
    train, val, total = [], [], 0
    for path in stdlib_sources(base):
        data = path.read_bytes()
        name = str(path.relative_to(base)).encode()
        split = val if int(hashlib.sha256(name).hexdigest(), 16) % VALIDATION_EVERY == 0 else train
        split.append(data)
        total += len(data)
        if total >= max_bytes:
            break
    if (not train or not val) and total >= max_bytes:  # cut before a file fell to each split
        raise UsageError(f"--corpus-bytes {max_bytes} is too small to hold both a training and a validation split "
                         f"(one source file in {VALIDATION_EVERY} is held out)",
                         "raise --corpus-bytes, e.g. --corpus-bytes 1048576 (the default is 4 MiB)")
    if not train or not val:
        raise UsageError(f"too little Python source under {base} for a corpus ({total} bytes)",
                         "the corpus is the Python standard library's source: use a Python installation that ships it "
                         "(some minimal images strip it), or lower --corpus-bytes below what it has")
    as_array = lambda parts: np.frombuffer(b"\n".join(parts), dtype=np.uint8)  # noqa: E731
    return as_array(train), as_array(val)


def stdlib_sources(base: Path) -> list[Path]:
    """The .py files under `base`, in sorted order, without descending into site-packages: the
    installed packages live there (JAX's own, and on a cluster's Python often torch's, tens of
    thousands of files), and walking them only to skip them took a second of every cold start."""
    found = []
    for folder, subfolders, files in os.walk(base):
        subfolders[:] = [name for name in subfolders if name != "site-packages"]
        found += [Path(folder, name) for name in files if name.endswith(".py")]
    return sorted(path for path in found if path.is_file())


def corpus_kept_in(directory: Path, max_bytes: int) -> tuple[np.ndarray, np.ndarray, str]:
    """`load_corpus`, built once per run directory: kept in `directory` (the run's data/) and
    read back by every later start while the Python it came from is the same. Returns (train,
    validation, how it came: "warm: ..." or "cold: ...")."""
    file = Path(directory) / f"corpus-{max_bytes}.npz"
    key = json.dumps({"python": sys.version, "stdlib": sysconfig.get_paths()["stdlib"], "bytes": max_bytes})
    try:
        with np.load(file) as kept:
            if str(kept["key"]) == key:
                return kept["train"], kept["validation"], f"warm: the corpus kept in {file}"
    except (OSError, ValueError, KeyError, EOFError):  # none yet, or not one we can read: build it
        pass
    train, validation = load_corpus(max_bytes)
    try:  # whole or not at all: every rank may write it at once
        buffer = io.BytesIO()
        np.savez(buffer, train=train, validation=validation, key=np.array(key))
        file.parent.mkdir(parents=True, exist_ok=True)
        temporary = file.with_name(f".{file.name}.{os.getpid()}.tmp")
        temporary.write_bytes(buffer.getvalue())
        os.replace(temporary, file)
        kept = f"kept in {file}"
    except OSError as err:
        kept = f"not kept ({err.strerror})"
    return train, validation, f"cold: read from the standard library's source, {kept}"


@dataclass(frozen=True)
class Batches:
    """Windows of seq_len + 1 bytes: inputs are the first seq_len, targets the last seq_len."""

    tokens: np.ndarray
    seq_len: int
    global_batch: int
    seed: int

    def offsets(self, step: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, step])
        return rng.integers(0, len(self.tokens) - self.seq_len - 1, size=self.global_batch)

    def rows(self, step: int, start: int, stop: int) -> dict[str, np.ndarray]:
        """Rows start..stop of the global batch of `step`: reads only those windows."""
        windows = np.stack([self.tokens[o:o + self.seq_len + 1] for o in self.offsets(step)[start:stop]])
        windows = windows.astype(np.int32)
        return {"inputs": windows[:, :-1], "targets": windows[:, 1:]}


def fixed_windows(tokens: np.ndarray, seq_len: int, count: int) -> dict[str, np.ndarray]:
    """`count` evenly spaced windows: the same validation set on every run."""
    offsets = np.linspace(0, len(tokens) - seq_len - 2, count).astype(np.int64)
    windows = np.stack([tokens[o:o + seq_len + 1] for o in offsets]).astype(np.int32)
    return {"inputs": windows[:, :-1], "targets": windows[:, 1:]}


def process_rows(sharding, global_shape: tuple[int, ...], batch_axis: int) -> tuple[int, int]:
    """The contiguous block of batch rows this process's devices hold under `sharding`."""
    ranges = {(index[batch_axis].start or 0, index[batch_axis].stop or global_shape[batch_axis])
              for index in sharding.addressable_devices_indices_map(global_shape).values()}
    start, stop = min(r[0] for r in ranges), max(r[1] for r in ranges)
    if not _contiguous(ranges):  # devices may share rows (tensor axis), but leave no gap
        raise UsageError("this process's share of the batch is not contiguous in the mesh",
                         "keep each process's devices together in the mesh (the default order)")
    return start, stop


def _contiguous(ranges: set[tuple[int, int]]) -> bool:
    ordered = sorted(ranges)
    return all(a[1] >= b[0] for a, b in zip(ordered, ordered[1:]))
