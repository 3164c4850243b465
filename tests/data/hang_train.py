"""`hpcjax train` with rank 3 held before it starts step 12 (as if its data loader were stuck),
for tests/launch/test_hang_cluster.py: the training code is hpcjax's own, unchanged; only the
learning-rate lookup at the top of each step is wrapped, from outside, to sleep on rank 3."""

import sys
import time

import jax

from hpcjax.cli import main
from hpcjax.train import loop

original = loop.learning_rate


def learning_rate(cfg, step):
    if jax.process_index() == 3 and step == 12:
        wait_for_data_that_never_comes()
    return original(cfg, step)


def wait_for_data_that_never_comes():
    time.sleep(3600)


loop.learning_rate = learning_rate
sys.exit(main(["train", *sys.argv[1:]]))
