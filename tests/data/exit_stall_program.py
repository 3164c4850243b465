"""The shape of the public multi-node demo that stalled at exit (issue 36): a plain
`jax.distributed.initialize()`, a sharded computation, a line printed, the end. Knobs (env):
STALL_S delays JAX's own distributed shutdown by that many seconds (a stand-in for the stall,
which did not happen by itself on the dev cluster), EXIT_CODE ends the program with
sys.exit(EXIT_CODE), RANK0_WORK_S keeps process 0 working that long after the others ended
(writing its results) before its last line, HANG_AT_EXIT=1 adds an exit handler of the program's
own that never returns (it runs before JAX's shutdown)."""

import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import distributed
from jax.sharding import NamedSharding, PartitionSpec as P

stall = float(os.environ.get("STALL_S", "0"))
if stall:
    jax_shutdown = distributed.State.shutdown

    def stalled_shutdown(self):
        time.sleep(stall)
        jax_shutdown(self)

    distributed.State.shutdown = stalled_shutdown

jax.distributed.initialize()
if os.environ.get("HANG_AT_EXIT"):
    import atexit

    atexit.register(time.sleep, 3600)
mesh = jax.make_mesh((jax.device_count(),), ("x",))
x = jax.make_array_from_callback((jax.device_count() * 8,), NamedSharding(mesh, P("x")),
                                 lambda index: np.ones((8,), np.float32))
total = float(jax.jit(jnp.sum)(x))
work = float(os.environ.get("RANK0_WORK_S", "0"))
if work and jax.process_index() == 0:
    time.sleep(work)  # process 0's own end (its results written) while the others have ended
print(f"last line at {time.time():.3f}: process {jax.process_index()} of {jax.process_count()}, sum {total}",
      flush=True)
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
