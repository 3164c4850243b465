"""A program for the exit guard's unit tests: imports the stand-in JAX (tests/data/standin_jax),
prints its last line, and ends as END says (tests/data/program_ends.py). FORK=1: a child forked
after the import ends the same way first (its exit is its own). USR2_AT_EXIT=1: SLURM's warning
arrives during the exit. THREAD_WORKS=1: a thread works on 0.5 s after the main thread returns."""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from program_ends import end  # noqa: E402

import jax  # noqa: E402,F401 - the stand-in

if os.environ.get("USR2_AT_EXIT"):
    import atexit

    def warned():
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(0.3)
        print("still here after the warning", flush=True)

    atexit.register(warned)
if os.environ.get("THREAD_WORKS"):
    import threading

    def work():
        time.sleep(0.5)
        print("the thread's work is done", flush=True)

    threading.Thread(target=work).start()
if os.environ.get("FORK") and os.fork() == 0:
    print(f"child {os.getpid()}", flush=True)
    end(os.environ.get("END", "return"))
    sys.exit(0)
print(f"the program's last line in {os.getpid()}", flush=True)
if os.environ.get("FORK"):
    os.wait()
end(os.environ.get("END", "return"))
