import os


def sync_global_devices(name):
    if os.environ.get("STANDIN_DRAIN_FAILS") == "1":
        raise RuntimeError("INTERNAL: a collective failed")
    print(f"guard: drained ({name})", flush=True)
