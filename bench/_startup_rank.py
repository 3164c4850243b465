"""One rank of bench/startup.py: seconds from process start to the first all-reduce done.

    python bench/_startup_rank.py hpcjax|bare
The launcher exports HPCJAX_BENCH_T0 (epoch seconds) just before exec'ing python.
"""

import json
import os
import sys
import time

mode = sys.argv[1]
if mode == "hpcjax":
    from hpcjax.rank.runtime import initialize

    initialize()
else:  # what users write by hand: JAX's own SLURM detection
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    jax.distributed.initialize()

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

mesh = Mesh(np.array(jax.devices()), ("d",))
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("d")),
                                           np.ones((jax.local_device_count(),), np.float32))
summed = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "d"), mesh=mesh, in_specs=P("d"), out_specs=P("d")))
value = float(summed(x).addressable_shards[0].data[0])
elapsed = time.time() - float(os.environ["HPCJAX_BENCH_T0"])
print(json.dumps({"mode": mode, "rank": jax.process_index(), "seconds": elapsed, "sum": value}), flush=True)
