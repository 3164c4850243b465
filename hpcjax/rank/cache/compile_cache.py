"""JAX's persistent compilation cache, managed: one directory on shared storage that
every rank of every job (and every requeue) reads, so a program is compiled once.

    HPCJAX_COMPILE_CACHE=/shared/jax-cache python train.py   # any program using hpcjax's initialize
    hpcjax train --compile-cache auto|off|DIR                # default: <run dir>/compile-cache

What users trip over, handled here:
- the directory exists, group-writable and setgid (shared by a project's members), before
  any rank writes; every rank creates it the same way, so the order does not matter;
- JAX caches only compilations over a second by default: everything is cached here;
- entries of another JAX version, device kind or program are never used: JAX's cache key
  holds all three (the JAX version, the backend and its devices, the compile options);
- several ranks and jobs writing at once: JAX writes an entry under its key only if it is
  not there yet, and an entry it cannot read is compiled again, never used wrongly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hpcjax.protocol import contract
from hpcjax.values.errors import HpcjaxError

COMPILE_CACHE_ENV = contract.COMPILE_CACHE_ENV
HITS, MISSES = "/jax/compilation_cache/cache_hits", "/jax/compilation_cache/cache_misses"
DIR_MODE = 0o2775  # group members share it; new entries inherit the group


@dataclass
class CacheStats:
    """Programs taken from the cache and compiled, counted since `enable`."""

    directory: Path
    hits: int = 0
    misses: int = 0

    def listen(self, event: str, **_) -> None:
        if event == HITS:
            self.hits += 1
        elif event == MISSES:
            self.misses += 1

    def describe(self, since: tuple[int, int] = (0, 0)) -> str:
        hits, misses = self.hits - since[0], self.misses - since[1]
        if not hits and not misses:
            return "nothing compiled (already in memory)"
        if not misses:
            return f"from the compilation cache ({hits} program(s), {self.directory})"
        return (f"compiled {misses} program(s)" + (f", {hits} from the cache" if hits else "")
                + f"; written to the compilation cache {self.directory}")


_stats: CacheStats | None = None


def prepare_directory(directory: str | Path) -> Path:
    path = Path(directory).expanduser().resolve()
    try:
        if not path.is_dir():
            path.mkdir(parents=True, exist_ok=True)
            try:
                path.chmod(DIR_MODE)
            except PermissionError:  # another user's rank created it first: theirs stands
                pass
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(f"not writable by uid {os.getuid()}")
    except OSError as err:
        raise HpcjaxError(f"cannot use {path} as the compilation cache: {err}",
                          f"give a writable directory on shared storage ({COMPILE_CACHE_ENV}=DIR or "
                          "--compile-cache DIR), or turn it off with --compile-cache off") from err
    return path


def enable(directory: str | Path) -> CacheStats:
    """Point JAX's persistent cache at `directory` and count hits and misses. Call it before
    the first compilation: JAX settles its cache at that moment."""
    global _stats
    import jax
    from jax import monitoring

    path = prepare_directory(directory)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    if _stats is None:
        _stats = CacheStats(path)
        monitoring.register_event_listener(_stats.listen)
    _stats.directory = path
    return _stats


def disable() -> None:
    """No persistent cache for this process (`--compile-cache off` wins the job's variable).
    Before the first compilation, like `enable`."""
    global _stats
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    _stats = None


def enable_from_environment(environ=os.environ) -> CacheStats | None:
    value = environ.get(COMPILE_CACHE_ENV, "")
    return enable(value) if value and value != "off" else None


def stats() -> CacheStats | None:
    return _stats
