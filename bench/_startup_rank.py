"""One rank of bench/startup.py: seconds from process start to the first all-reduce done, by phase.

    python bench/_startup_rank.py hpcjax|bare
The launcher exports HPCJAX_BENCH_T0 (epoch seconds) just before exec'ing python.
"""

import json
import os
import sys
import time

marks = {"python": time.time()}  # the interpreter is up, its site imports done
mode = sys.argv[1]
if mode == "bare":
    os.environ["JAX_PLATFORMS"] = "cpu"
import jax  # noqa: E402

marks["import jax"] = time.time()
if mode == "hpcjax":
    from hpcjax.rank.start.runtime import initialize

    initialize()
else:  # what users write by hand: JAX's own SLURM detection
    jax.distributed.initialize()
marks["initialize"] = time.time()

import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

mesh = Mesh(np.array(jax.devices()), ("d",))
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("d")),
                                           np.ones((jax.local_device_count(),), np.float32))
summed = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "d"), mesh=mesh, in_specs=P("d"), out_specs=P("d")))
value = float(summed(x).addressable_shards[0].data[0])
marks["first all-reduce"] = time.time()
start = float(os.environ["HPCJAX_BENCH_T0"])
phases, previous = {}, start
for name, at in marks.items():
    phases[name] = at - previous
    previous = at
print(json.dumps({"mode": mode, "rank": jax.process_index(), "seconds": previous - start, "phases": phases,
                  "sum": value}), flush=True)
