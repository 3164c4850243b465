"""Compiled programs kept between a job's attempts: a restart loads the step's executable
instead of tracing, lowering and compiling it again.

JAX's persistent compilation cache (`compile_cache`) skips XLA's compile but still traces
and lowers every program to find its key; here the executable itself is serialized
(`jax.experimental.serialize_executable`) under a key of everything that changes it, and a
restart with the same key loads it without tracing.

    compiled, how = ExecutableStore(cache_dir).compiled("train_step", jax.jit(step), args, program={...})

The key (`key_parts`): JAX's and jaxlib's versions, the backend and its version, the
devices (kind, count, processes, this process's device ids), XLA_FLAGS, the JAX settings
that change a program, the mesh, every argument's shape, dtype and sharding, and what the
caller says the program is (for `hpcjax train`: the configuration and a digest of its
source). Files live in `<cache dir>/executables/<name>/<digest>/process<i>.bin`, one per
process (each holds its own devices' executable), beside the persistent cache: one
directory, one `--compile-cache` switch.

Never wrong, at worst cold: a key that differs compiles (and says which part differed from
the executable stored last); a file that does not load, or whose stored key is not this
one, compiles and replaces it. A program JAX took from its own persistent cache is not
stored: serialized again, such an executable lost its kernels (on CPU, jaxlib 0.10: it
loaded, then failed at its first run with "Function ... not found"). A file another user owns is not loaded: loading one runs
code from it (it is a pickle), so only the job owner's own are trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
from pathlib import Path

from hpcjax.values.errors import UsageError

FORMAT = 2  # of the file; part of the key
# JAX settings that change what a program compiles to (read when present in this version)
SETTINGS = ("jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_rank_promotion", "jax_threefry_partitionable",
            "jax_use_shardy_partitioner", "jax_default_prng_impl", "jax_enable_custom_prng")
PART_NAMES = {"jax": "JAX version", "jaxlib": "jaxlib version", "backend": "backend", "devices": "devices",
              "xla_flags": "XLA_FLAGS", "mesh": "mesh", "arguments": "argument shapes", "format": "file format",
              "program.jaxpr": "the program's traced code or the values it captures"}
UNSAID = {"arguments", "program.jaxpr"}  # too long, or a digest: named, their values not shown
_loaded: dict[tuple[str, str], object] = {}  # loading one executable twice in a process is refused by XLA


def key_parts(args: tuple, program: dict) -> dict:
    """Everything the compiled program depends on, as JSON-able values."""
    import jax
    import jax.lib

    devices = jax.local_devices()
    return {"format": FORMAT, "jax": jax.__version__, "jaxlib": jax.lib.__version__,
            "backend": f"{jax.default_backend()} {getattr(devices[0].client, 'platform_version', '')}",
            "devices": f"{jax.device_count()} x {devices[0].device_kind} in {jax.process_count()} process(es); "
                       f"this process {jax.process_index()}: ids {[d.id for d in devices]}",
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "settings": {name: str(jax.config.values[name]) for name in SETTINGS if name in jax.config.values},
            "mesh": describe_mesh(args), "arguments": describe_arguments(args), **program}


def describe_mesh(args) -> str:
    """The first mesh among the arguments' shardings: its axes and device ids."""
    import jax

    for leaf in jax.tree.leaves(args):
        mesh = getattr(getattr(leaf, "sharding", None), "mesh", None)
        if mesh is not None and hasattr(mesh, "device_ids"):
            axes = " x ".join(f"{name} {size}" for name, size in mesh.shape.items())
            return f"{axes}; devices {mesh.device_ids.ravel().tolist()}"
    return "none"


def describe_arguments(args) -> list[str]:
    """One line per leaf: its path, shape, dtype and sharding (a Python number: its type)."""
    import jax

    leaves, tree = jax.tree_util.tree_flatten_with_path(args)
    lines = [str(tree)]
    for path, leaf in leaves:
        sharding = getattr(leaf, "sharding", None)
        spec = getattr(sharding, "spec", sharding)
        shape = getattr(leaf, "shape", None)
        kind = f"{shape} {leaf.dtype}" if shape is not None else type(leaf).__name__
        lines.append(f"{jax.tree_util.keystr(path)}: {kind} {spec}")
    return lines


def digest_of(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def differences(old: dict, new: dict) -> list[str]:
    """The parts of a key that changed, in words ("mesh: data 8 -> data 4 x tensor 2",
    "program.model.layers: 6 -> 4")."""
    a, b = flatten(old), flatten(new)
    said = []
    for name in sorted(set(a) | set(b), key=lambda n: (n not in PART_NAMES, n)):
        if a.get(name) != b.get(name):
            before, after = a.get(name, "(none)"), b.get(name, "(none)")
            short = isinstance(before, str) and isinstance(after, str) and len(before) + len(after) < 160 \
                and name not in UNSAID
            said.append(f"{PART_NAMES.get(name, name)}: {before or '(none)'} -> {after or '(none)'}" if short
                        else PART_NAMES.get(name, name))
    return said


def flatten(parts: dict, prefix: str = "") -> dict:
    flat = {}
    for name, value in parts.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{name}."))
        else:
            flat[prefix + name] = value if isinstance(value, (str, list)) else str(value)
    return flat


class ExecutableStore:
    def __init__(self, cache_dir: str | Path) -> None:
        self.directory = Path(cache_dir) / "executables"

    def compiled(self, name: str, jitted, args: tuple, program: dict, build=None):
        """(the compiled `jitted` for `args`, how it came: "warm: ..." or "cold: ..."). Never
        raises for a bad stored file or an unwritable store: it compiles (with `build()` when
        given) and says why."""
        import jax

        parts = key_parts(args, program)
        digest = digest_of(parts)
        folder = self.directory / name / digest
        file = folder / f"process{jax.process_index()}.bin"
        if (name, digest) in _loaded:
            return _loaded[(name, digest)], "warm: already loaded in this process"
        reason = self._why_not(file, name, parts)
        if reason is None:
            try:
                compiled = load(file, parts)
                _loaded[(name, digest)] = compiled
                return compiled, f"warm: executable loaded from {folder}"
            except Exception as err:  # noqa: BLE001 - any failure to load means compile
                reason = f"the stored executable did not load ({type(err).__name__}: {str(err)[:200]})"
        hits = _persistent_cache_hits()
        compiled = build() if build is not None else jitted.lower(*args).compile()
        _loaded[(name, digest)] = compiled
        if _persistent_cache_hits() > hits:
            return compiled, (f"cold: compiled ({reason}); came from JAX's persistent cache, not stored "
                              "(an executable JAX loaded does not serialize whole again: it would not run)")
        try:
            save(file, parts, compiled)
            write_atomically(self._latest(name), json.dumps(parts, default=str).encode())
            kept = f"; stored in {folder}"
        except Exception as err:  # noqa: BLE001 - a store that cannot be written only costs the next start
            kept = f"; not stored ({type(err).__name__}: {str(err)[:200]})"
        return compiled, f"cold: compiled ({reason}){kept}"

    def _latest(self, name: str) -> Path:
        """The key this process stored last under `name` (each process its own: their keys differ
        in the process's devices, and a miss is told against this process's last key)."""
        import jax

        return self.directory / name / f"latest-process{jax.process_index()}.json"

    def _why_not(self, file: Path, name: str, parts: dict) -> str | None:
        """None when `file` may be loaded; else why it is not."""
        try:
            owner = file.stat().st_uid
        except FileNotFoundError:
            try:
                last = json.loads(self._latest(name).read_text())
            except (OSError, ValueError):
                return "no stored executable yet"
            changed = differences(last, json.loads(json.dumps(parts, default=str)))
            return ("the stored executable is another program's: " + "; ".join(changed)) if changed else \
                "no stored executable for this process"
        if owner != os.getuid():
            return f"the stored executable belongs to uid {owner}; only your own are loaded (loading runs its code)"
        return None


def _persistent_cache_hits() -> int:
    """Programs JAX has taken from its persistent cache so far in this process (0 when it is off)."""
    from hpcjax.rank.cache import compile_cache

    stats = compile_cache.stats()
    return stats.hits if stats is not None else 0


started: list[dict] = []  # this process's programs as `compiled` gave them: {"program", "s", "how"}


def compiled(jitted, *args, name: str = "step"):
    """`jitted` compiled for `args`, for any JAX program (a Trainer's loop, a script): loaded
    from the compilation cache's executables when an earlier start of the same program left
    one, else compiled and kept there. The program's identity is its traced jaxpr (and any
    constants it closes over): a change to the code or to a value it captures compiles again.
    Tracing still runs (far cheaper than lowering and compiling); with no compilation cache on
    (HPCJAX_COMPILE_CACHE, or a Trainer run's own), this is `jitted.lower(*args).compile()`.

        step = hpcjax.rank.compiled(jax.jit(train_step, donate_argnums=0), state, batch)
    """
    import time

    from hpcjax.rank.cache import compile_cache

    check_program(jitted, name)
    begun = time.monotonic()
    stats = compile_cache.stats()
    traced = jitted.trace(*args)
    if stats is None:
        result, how = traced.lower().compile(), "cold: compiled (no compilation cache on)"
    else:
        digest = hashlib.sha256(str(traced.jaxpr).encode())
        for constant in getattr(traced.jaxpr, "consts", ()):
            digest.update(repr(getattr(constant, "shape", "")).encode() + memoryview(_bytes_of(constant)))
        result, how = ExecutableStore(stats.directory).compiled(
            name, jitted, args, {"program": {"name": name, "jaxpr": digest.hexdigest()[:24]}},
            build=lambda: traced.lower().compile())
    started.append({"program": name, "s": time.monotonic() - begun, "how": how})
    return result


PROGRAM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_program(jitted, name: str) -> None:
    """What `compiled` is given: a jitted function (it is traced and lowered), and a plain name
    (it names a directory under the cache: a path would be written outside it)."""
    if not callable(getattr(jitted, "trace", None)):
        raise UsageError(f"hpcjax.compiled takes a jitted function, got {type(jitted).__name__}: {jitted!r}",
                         "wrap it first: hpcjax.compiled(jax.jit(train_step), state, batch)")
    if not isinstance(name, str) or not PROGRAM_NAME.fullmatch(name) or ".." in name:
        raise UsageError(f"hpcjax.compiled(..., name={name!r}): a program's name is a plain name, not a path",
                         "letters, digits, '.', '_' and '-' (at most 64), e.g. name='train_step'")


def _bytes_of(constant) -> bytes:
    import numpy as np

    return np.asarray(constant).tobytes()


def save(file: Path, parts: dict, compiled) -> None:
    from jax.experimental import serialize_executable

    payload, in_tree, out_tree = serialize_executable.serialize(compiled)
    # the devices it runs on, in order: one process's own device for a local program, all for a global one
    devices = [d.id for d in compiled._executable._unloaded_executable.device_list]
    file.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(file, pickle.dumps({"parts": json.dumps(parts, sort_keys=True, default=str), "devices": devices,
                                         "payload": payload, "in_tree": in_tree, "out_tree": out_tree}))


def load(file: Path, parts: dict):
    import jax
    from jax.experimental import serialize_executable

    with open(file, "rb") as f:
        stored = pickle.load(f)
    if stored.get("parts") != json.dumps(parts, sort_keys=True, default=str):
        raise ValueError("its stored key is not this program's")
    by_id = {d.id: d for d in jax.devices()}
    return serialize_executable.deserialize_and_load(stored["payload"], stored["in_tree"], stored["out_tree"],
                                                     execution_devices=[by_id[i] for i in stored["devices"]])


def write_atomically(path: Path, data: bytes) -> None:
    """Whole or not at all: ranks of several jobs may write the same file at once."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)
