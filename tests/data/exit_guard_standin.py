"""A process with a stand-in for JAX's distributed state, for the exit guard's unit tests (no
JAX): an exit handler calls `global_state.shutdown()` as JAX's does, and that shutdown takes
STANDIN_SHUTDOWN_S seconds. The mode (argv[1]) says how the program ends: exit0, exit3, raise,
usr2 (SLURM's warning arrives during the exit), barrier-fails (a process never reached its end),
thread-works (the main thread returns while a thread of the program works on for 1.5 s)."""

import atexit
import os
import signal
import sys
import time
import types

mode = sys.argv[1]


class Client:
    def wait_at_barrier(self, name, timeout_ms):
        if mode == "barrier-fails":
            raise RuntimeError(f"DEADLINE_EXCEEDED: barrier {name} timed out after {timeout_ms} ms")


class State:
    client = Client()
    process_id = 1

    def shutdown(self):
        print("shutdown began", flush=True)
        time.sleep(float(os.environ.get("STANDIN_SHUTDOWN_S", "0")))
        print("shutdown ended", flush=True)


standin = types.ModuleType("jax._src.distributed")
standin.global_state = State()
sys.modules["jax._src.distributed"] = standin
atexit.register(lambda: standin.global_state.shutdown())  # as JAX's own exit handler does
if mode == "usr2":
    def warned():
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(0.3)
        print("still here after the warning", flush=True)

    atexit.register(warned)
if mode == "thread-works":
    import threading

    def work():
        time.sleep(1.5)
        print("the thread's work is done", flush=True)

    threading.Thread(target=work).start()
print("the program's last line", flush=True)
if mode == "exit3":
    sys.exit(3)
if mode == "raise":
    raise ValueError("the program failed")
