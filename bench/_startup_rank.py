"""One rank of bench/startup.py: seconds from process start to the first collective done, by phase.

    python bench/_startup_rank.py floor|bare|hpcjax
The launcher exports HPCJAX_BENCH_T0 (epoch seconds) just before exec'ing python.

  floor   import JAX and run one local op: what no distributed start-up can do without
  bare    jax.distributed.initialize() as users write it (JAX's own SLURM detection), then an all-reduce
  hpcjax  hpcjax.initialize(), then the same all-reduce; its own phases timed from outside (wrapped
          here, not in hpcjax): the imports beyond JAX, the environment's mapping, the roll call,
          JAX's initialize, the exit guard's arming
"""

import json
import os
import sys
import time

marks = {"python": time.time()}  # the interpreter is up, its site imports done
inside: dict[str, float] = {}  # hpcjax's own phases, measured by wrapping them
mode = sys.argv[1]
if mode in ("bare", "floor"):
    os.environ["JAX_PLATFORMS"] = "cpu"
import jax  # noqa: E402

marks["import jax"] = time.time()


def timed(name, function):
    def wrapper(*args, **kwargs):
        start = time.time()
        try:
            return function(*args, **kwargs)
        finally:
            inside[name] = inside.get(name, 0.0) + time.time() - start
    return wrapper


def timed_context(name, factory):
    """A context manager's time from its entry to its exit (the roll call runs JAX's initialize inside)."""
    import contextlib

    @contextlib.contextmanager
    def wrapper(*args, **kwargs):
        start = time.time()
        try:
            with factory(*args, **kwargs) as value:
                yield value
        finally:
            inside[name] = inside.get(name, 0.0) + time.time() - start
    return wrapper


if mode == "floor":
    import jax.numpy as jnp

    value = float(jnp.ones(1).sum())
    marks["one local op"] = time.time()
else:
    if mode == "hpcjax":
        start = time.time()
        from hpcjax.rank.start import runtime
        from hpcjax.rank.watch import exitguard

        inside["imports beyond jax"] = time.time() - start
        runtime.resolve = timed("mapping", runtime.resolve)
        runtime.roll_call = timed_context("roll call", runtime.roll_call)
        jax.distributed.initialize = timed("jax initialize", jax.distributed.initialize)
        exitguard.arm = timed("exit guard", exitguard.arm)
        runtime.initialize()
    else:  # what users write by hand: JAX's own SLURM detection
        jax.distributed.initialize()
    marks["initialize"] = time.time()

    import numpy as np  # noqa: E402
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

    mesh = Mesh(np.array(jax.devices()), ("d",))
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("d")),
                                               np.ones((jax.local_device_count(),), np.float32))
    summed = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "d"), mesh=mesh, in_specs=P("d"), out_specs=P("d")))
    value = float(summed(x).addressable_shards[0].data[0]) / jax.device_count()  # 1.0, as the floor's
    marks["first all-reduce"] = time.time()
start = float(os.environ["HPCJAX_BENCH_T0"])
phases, previous = {}, start
for name, at in marks.items():
    phases[name] = at - previous
    previous = at
rank = int(os.environ.get("SLURM_PROCID", "0"))
if "jax initialize" in inside:  # the roll call's time includes JAX's initialize, which runs inside it
    inside["roll call"] -= inside["jax initialize"]
print(json.dumps({"mode": mode, "rank": rank, "seconds": previous - start, "phases": phases, "inside": inside,
                  "value": value}), flush=True)
