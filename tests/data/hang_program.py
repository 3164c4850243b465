"""A plain script for the hang watch's tests (tests/rank/test_hangwatch.py, on the local backend,
and tests/launch/test_hang_cluster.py): every rank takes steps of about 0.2 s, each ending in a
collective over all processes, and calls hpcjax.rank.progress(step). argv[1] is the mode:
"behind": rank 3 sleeps before it starts step 12 (the others wait in step 12's collective);
"same": it says it started step 12, then sleeps; "irregular": nobody hangs, but every 20th step
has a 2.5 s evaluation and step 30 a 6 s save inside hold(); "behind-once": "behind" in a
job's first attempt only; "exit": every rank finishes its steps, then hangs at exit in an
exit handler (as JAX's distributed shutdown was seen to); "behind-abort": "behind", and rank 2
aborts (134) the moment every rank has answered the hang watch (its file), just before the hung
rank ends: as two waiting ranks did in CI 39 when the hung rank's end tore down Gloo's collective
under them ("op.preamble.length <= op.nbytes": std::terminate), and srun named the abort first,
so the job's status was 134; "behind-seen-elsewhere": "behind", but the hang is seen first on
the other node (the ranks of node2 watch with a floor 3 s longer: stop 60's CI, where a waiting rank's
watch saw it first and the attempt's record named its node, not the held rank's), and rank 2
aborts the moment the rank that saw the hang has judged it (its verdict), just before that rank
ends (whose end tore down the collective in CI 39); "native": rank 3 sleeps before it starts
step 12 in C code that holds Python's lock (a PyDLL call), so its own watch cannot answer."""
import glob, os, sys, threading, time
import numpy as np
from jax.experimental import multihost_utils
from hpcjax.protocol import contract
from hpcjax.protocol import timeouts
from hpcjax.rank import hold, initialize, progress
if sys.argv[1] == "behind-seen-elsewhere" and int(os.environ["SLURM_PROCID"]) >= 2:
    os.environ[timeouts.FLOOR_ENV] = str(int(os.environ[timeouts.FLOOR_ENV]) + 3)
denv = initialize()
mode, rank = sys.argv[1], denv.process_id
def load_next_batch():
    time.sleep(3600)
def load_in_native_code_holding_the_lock():
    import ctypes
    ctypes.PyDLL(None).sleep(3600)
def all_reduce(step):
    return multihost_utils.process_allgather(np.int32(step)).sum()
def abort_once_every_rank_answered_the_hang_watch():
    answers = os.path.join(os.environ[contract.LOG_DIR_ENV], contract.RANK_HANG.replace("%j", "*").replace("%t", "*"))
    while len(glob.glob(answers)) < denv.num_processes:
        time.sleep(0.01)
    os.abort()
def abort_once_the_hang_is_judged():
    verdict = os.path.join(os.environ[contract.LOG_DIR_ENV], contract.HANG_NODES.replace("%j", "*"))
    while not glob.glob(verdict):
        time.sleep(0.01)
    os.abort()
if mode == "behind-abort" and rank == 2:
    threading.Thread(target=abort_once_every_rank_answered_the_hang_watch, daemon=True).start()
if mode == "behind-seen-elsewhere" and rank == 2:
    threading.Thread(target=abort_once_the_hang_is_judged, daemon=True).start()
once = mode == "behind-once" and os.environ.get("SLURM_RESTART_COUNT", "0") == "0"  # the first attempt only
def shutdown_that_never_returns():
    time.sleep(3600)
if mode == "exit":
    import atexit
    atexit.register(shutdown_that_never_returns)
for step in range(40 if mode in ("irregular", "behind-once", "exit") else 1000):
    if (mode in ("behind", "behind-abort", "behind-seen-elsewhere") or once) and rank == 3 and step == 12:
        load_next_batch()
    if mode == "native" and rank == 3 and step == 12:
        load_in_native_code_holding_the_lock()
    progress(step)
    if mode == "same" and rank == 3 and step == 12:
        load_next_batch()
    time.sleep(0.2)
    all_reduce(step)
    if mode == "irregular" and step % 20 == 19:
        time.sleep(2.5)  # an evaluation, seen as one long interval
    if mode == "irregular" and step == 30:
        with hold():
            time.sleep(6)  # a checkpoint save: longer than the timeout, but on purpose
print("finished", rank, flush=True)
