"""A small sharded program through rank.cache.executables, for tests/rank/test_executables.py.

    python executable_program.py CACHE_DIR ROWS MESH [FAKE_JAX_VERSION]

MESH: "4" (one axis of 4 devices) or "2x2". With HPCJAX_COMPILE_CACHE set, JAX's persistent
cache is on too. Prints one JSON line: how the executable came
and the result's bytes (hex), so two processes' results compare bitwise."""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

cache, rows, mesh_shape = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if len(sys.argv) > 4:
    jax.__version__ = sys.argv[4]  # as if another JAX had stored the executable

from hpcjax.rank.cache import compile_cache  # noqa: E402
from hpcjax.rank.cache.executables import ExecutableStore  # noqa: E402

compile_cache.enable_from_environment()  # HPCJAX_COMPILE_CACHE: JAX's persistent cache as well

shape = tuple(int(n) for n in mesh_shape.split("x"))
mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(shape), ("data", "model")[:len(shape)])
x = jax.device_put(np.arange(rows * 8, dtype=np.float32).reshape(rows, 8) / 7, NamedSharding(mesh, P("data")))


def step(x, scale):
    return jnp.tanh(x @ x.T * scale).sum(axis=0)


compiled, how = ExecutableStore(cache).compiled("step", jax.jit(step), (x, 0.5), program={"name": "step"})
result = np.asarray(compiled(x, 0.5))
print(json.dumps({"how": how, "result": result.tobytes().hex()}))
