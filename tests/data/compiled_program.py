"""A program through hpcjax.compiled, for tests/rank/test_executables.py.

    python compiled_program.py CACHE_DIR SCALE OFFSETS

SCALE is a Python float the step closes over, OFFSETS a comma-separated list closed over as
a NumPy array: changing either changes the program. Prints one JSON line: how it came, the result."""

import json
import sys

import jax
import numpy as np

from hpcjax.rank.cache import compile_cache
from hpcjax.rank import compiled

compile_cache.enable(sys.argv[1])
scale, offsets = float(sys.argv[2]), np.array([float(x) for x in sys.argv[3].split(",")], np.float32)


def step(x):
    return (x * scale + offsets).sum()


value = compiled(jax.jit(step), np.ones(4, np.float32), name="step")(np.ones(4, np.float32))
from hpcjax.rank.cache.executables import started  # noqa: E402

print(json.dumps({"how": started[-1]["how"], "value": float(value)}))
