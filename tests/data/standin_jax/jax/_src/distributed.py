import os


class Client:
    def wait_at_barrier(self, name, timeout_ms):
        print(f"guard: barrier {name} ({timeout_ms} ms) in {os.getpid()}", flush=True)
        if os.environ.get("STANDIN_BARRIER_FAILS") == "1":
            raise RuntimeError(f"DEADLINE_EXCEEDED: barrier {name} timed out after {timeout_ms} ms")


class State:
    client = None
    process_id = 1


global_state = State()
