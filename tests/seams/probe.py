"""What every cell of the seam matrix runs: a plain script (`python3 probe.py MODE RELEASE`) and
the user module of the Python API's cells (`loop` for a Trainer, `work` for @remote), copied into
each cell's project, as a user's own file. MODE:
  ok      every rank says who it is, and ends (MODE:ANYTHING is MODE: a sweep's values differ)
  wait    every rank waits in wait_for_release() until the file RELEASE exists (at most 240 s),
          then ends; in a requeued attempt (SLURM_RESTART_COUNT > 0) it ends at once
  hang    JAX collectives, progress per step; rank 1 stops before step 6 in
          wait_for_data_that_never_comes() while the others wait in the collective
$VARIABLES in RELEASE are the job's (the cluster's $HOME from a laptop)."""

import os
import sys
import time


def who() -> str:
    rank = os.environ.get("SLURM_PROCID", "?")
    return f"probe rank {rank} of {os.environ.get('SLURM_NTASKS', '?')} on {os.environ.get('SLURMD_NODENAME') or os.environ.get('HPCJAX_NODE_NAME', '?')}"


def wait_for_release(release: str) -> None:
    path = os.path.expandvars(release)
    deadline = time.monotonic() + 240
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.2)


def wait_for_data_that_never_comes() -> None:
    time.sleep(3600)


def hang(report=None) -> None:
    import numpy as np
    from jax.experimental import multihost_utils

    import hpcjax
    from hpcjax.rank import progress

    denv = hpcjax.rank.initialize()
    for step in range(1000):
        if denv.process_id == 1 and step == 6:
            wait_for_data_that_never_comes()
        if report is None:
            progress(step)
        time.sleep(0.3)
        total = int(multihost_utils.process_allgather(np.int32(step)).sum())
        if report is not None:
            report({"step": step, "total": total})


def behave(mode: str, release: str, report=None) -> str:
    mode = mode.split(":")[0]  # "ok:0": a sweep's values must differ
    print(who(), mode, flush=True)
    if mode == "wait" and os.environ.get("SLURM_RESTART_COUNT", "0") == "0":
        print(who(), "waits", flush=True)
        wait_for_release(release)
    elif mode == "hang":
        hang(report)
    print(who(), "done", flush=True)
    return who()


def loop(config):
    """A Trainer's loop (every rank): behaves as MODE, reports once when done."""
    import hpcjax

    said = behave(config["mode"], config["release"], report=hpcjax.report)
    hpcjax.report({"step": 0, "done": 1.0})
    return said


def work(mode, release):
    """A remote function (every rank); rank 0's value comes back."""
    import jax

    return behave(mode, release), jax.process_count()


def train_with_rank_1_stuck(argv) -> int:
    """`hpcjax train` whose rank 1 waits forever for the data of step 6 (its loader stuck): the
    training code is hpcjax's own; only the learning-rate lookup at each step's top is wrapped."""
    import jax

    from hpcjax.cli import main
    from hpcjax.train import loop

    original = loop.learning_rate

    def learning_rate(cfg, step):
        if jax.process_index() == 1 and step == 6:
            wait_for_data_that_never_comes()
        return original(cfg, step)

    loop.learning_rate = learning_rate
    return main(["train", *argv])


if __name__ == "__main__":
    if sys.argv[1] == "train-hang":
        sys.exit(train_with_rank_1_stuck(sys.argv[2:]))
    behave(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
