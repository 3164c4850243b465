"""A job of several processes whose first collective comes late on process 1.

    first_collective.py line-up SECONDS   process 1 starts its first collective SECONDS late;
                                          both call line_up first (twice: each call is a barrier)
    first_collective.py raise             process 1 raises instead; process 0 waits in the collective

Each process prints one JSON line: when it arrived at the line-up and passed it (wall clock,
one machine), and what the collective gathered."""

import json
import sys
import time

import numpy as np

from hpcjax.rank import initialize

initialize()

import jax  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402

from hpcjax.rank.start.barriers import line_up  # noqa: E402

mode, me = sys.argv[1], jax.process_index()
if me == 1 and mode == "raise":
    raise ValueError("process 1 gives up before its first collective")
if me == 1:
    time.sleep(float(sys.argv[2]))
arrived = time.time()
if mode == "line-up":
    line_up("first collective")
    line_up("first collective")
passed = time.time()
gathered = multihost_utils.process_allgather(np.array([me])).ravel().tolist()
print(json.dumps({"process": me, "arrived": arrived, "passed": passed, "gathered": gathered}), flush=True)
