"""A stand-in for JAX, for the exit guard's unit tests (tests/rank/test_exitguard.py): just enough
of JAX's exit for the guard's logic (its order, whom it acts for, that it never sets a status),
printed as it happens. The real JAX runs are in tests/rank/test_exitguard_jax.py and the cluster
tests. STANDIN_DISTRIBUTED=1 makes it a distributed process; STANDIN_BARRIER_FAILS=1 fails the
guard's barrier; STANDIN_DRAIN_FAILS=1 fails the drain."""

import atexit
import os

from jax._src import distributed


def _clean_up():  # JAX's own exit handler (jax._src.api.clean_up): the distributed shutdown
    if distributed.global_state.client is not None:
        print("jax: distributed shutdown", flush=True)


atexit.register(_clean_up)
if os.environ.get("STANDIN_DISTRIBUTED") == "1":
    distributed.global_state.client = distributed.Client()
