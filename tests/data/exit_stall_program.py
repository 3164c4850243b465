"""The usual shape of a multi-host JAX script, unmodified (issue 48): a plain
`jax.distributed.initialize()`, host-local arrays made global, a `jnp.dot` of sharded arrays, the
result's shape printed, the end. A shape needs no values: JAX dispatches asynchronously, so the
collective that computes the dot is still in flight when the program returns. With bare `sbatch`
+ `srun` and no hpcjax, such jobs sat ~150 s at exit in 4 of 6 runs at 2 nodes x 4 ranks per node
on the dev cluster (hpcjax.rank.watch.exitguard says why).

Knobs (env): END, how the program ends (tests/data/program_ends.py; default: it returns);
RANK0_WORK_S keeps process 0 working that long after its dot (writing its results) before its
last line; HANG_AT_EXIT=1 adds an exit handler of the program's own that never returns."""

import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, PartitionSpec as P

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from program_ends import end  # noqa: E402

jax.distributed.initialize()
if os.environ.get("HANG_AT_EXIT"):
    import atexit

    atexit.register(time.sleep, 3600)
mesh = Mesh(np.array(jax.devices()), ("x",))
rows = np.full((jax.local_device_count() * 64, 256), jax.process_index() + 1, np.float32)
a = multihost_utils.host_local_array_to_global_array(rows, mesh, P("x"))
b = multihost_utils.host_local_array_to_global_array(rows, mesh, P("x"))
out = jnp.dot(a.T, b)  # contracts the sharded axis: an all-reduce across every process
work = float(os.environ.get("RANK0_WORK_S", "0"))
if work and jax.process_index() == 0:
    time.sleep(work)  # process 0's own end (its results written) while the others have ended
guard = sys.modules.get("hpcjax.rank.watch.exitguard")  # armed by the hook at `import jax`, if it is on the path
print(f"last line at {time.time():.3f}: process {jax.process_index()} of {jax.process_count()}, shape {out.shape}, "
      f"guard armed: {bool(guard and guard.armed())}", flush=True)
end(os.environ.get("END", "return"))
