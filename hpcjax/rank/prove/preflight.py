"""The preflight, on every rank of a job step of its own before the program's (`--preflight`):
measure this allocation's nodes, let rank 0 judge them (hpcjax.protocol.preflight_rules), and end
every rank with the verdict's exit code, so that the batch script starts the program only on
nodes that passed.

Each rank measures its devices (count, kind) and a matmul's throughput on each of them (GPUs all
at once; CPU devices, which share their node's cores, one rank at a time); the
first rank of each node also the job's directory (writable, free space) and, where nvidia-smi is,
the GPUs' health. Together they time an all-reduce inside each node and the exchange between
pairs of nodes in round-robin rounds (hpcjax.rank.prove.pairs: every pair once, disjoint pairs at
once, so N nodes take N-1 rounds). What each rank measured reaches rank 0 through JAX's
coordination service (no device collective: a node that fails may not be able to take part),
and the verdict comes back the same way.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from hpcjax.protocol import contract, placement
from hpcjax.rank.prove import gpuhealth
from hpcjax.rank.prove.pairs import check_pairs, process_nodes, timed
from hpcjax.protocol.preflight_rules import Floors, verdict
from hpcjax.values.voice import say

KEY = "hpcjax/preflight"
# Per device: a message for the all-reduces, the side of the matmul. A GPU's figures need
# sizes that fill it; a CPU device's (the dev cluster's emulated GPUs) must stay quick.
MESSAGE_BYTES = {"gpu": 256 << 20, "cpu": 1 << 20}
MATMUL_N = {"gpu": 8192, "cpu": 768}
ITERS, WARMUP, REPEATS = 5, 2, 3
# Each matmul timing lasts at least this long. A node held to a share of its CPUs by a cgroup
# quota (the kernel grants it per period: 100 ms by default, up to 1 s) runs at full speed until
# the period's quota is spent: a timing shorter than the period can fit inside it and find the
# node fast. CI met it (a node at a quarter of a CPU measured 1.09x the median), and a period of
# 250 ms made it happen every time (tests/launch/test_preflight_cluster.py).
MATMUL_TIMED_S = 0.3
PROBE_BYTES = 1 << 20


def run(denv, floors: Floors, directory: str | None = None, spares: int = 0) -> int:
    """This rank's part; 0 when every node passed (with `spares`: when enough did, the program runs
    on the best of them), contract.PREFLIGHT_EXIT when not."""
    import jax

    from hpcjax.rank.start.barriers import coordination_client, line_up
    from hpcjax.rank.start.runtime import init_timeout_s

    started = time.monotonic()
    platform = jax.devices()[0].platform
    platform = "gpu" if platform in ("gpu", "cuda", "rocm") else "cpu"
    node = placement.node_name()
    names = process_nodes(node)
    mine = {"rank": jax.process_index(), "node": node, "devices": jax.local_device_count(),
            "expected": denv.devices_per_process, "kinds": [d.device_kind for d in jax.local_devices()]}
    if names.index(node) == jax.process_index():  # the node's first rank: what is the node's
        mine["storage"] = storage(Path(directory or os.getcwd()))
        gpus, error = gpuhealth.read()
        mine["gpus"] = {"problems": gpuhealth.problems(gpus) + ([error] if error else []), "count": len(gpus)}
    if platform == "gpu":  # each GPU its own: all at once, as training will use them
        line_up("preflight compute")
        mine["gflops"] = matmul_gflops(MATMUL_N[platform], REPEATS)
    else:  # CPU devices share their node's cores (and emulated nodes one machine's): one rank at a
        # time, and the repeats in rounds through the ranks, spread over the step: a burst of other
        # jobs' load on a shared machine then meets one of a node's timings, not all of them (the
        # best of the rounds is what the node can do; a node slowed for good is slow in each). On
        # the dev cluster under whole-machine bursts (0.5 s of 8 busy processes every 2.4 s), the
        # slowest node of ten 2 x 2 preflights was 0.67x the median back to back, 0.87x in rounds.
        for repeat in range(REPEATS):
            for turn in range(jax.process_count()):
                line_up(f"preflight compute {repeat} {turn}")
                if turn == jax.process_index():
                    figures = matmul_gflops(MATMUL_N[platform], 1)
                    mine["gflops"] = [max(pair) for pair in zip(mine.get("gflops", figures), figures)]
    size = MESSAGE_BYTES[platform]
    mine["in_node_busbw"] = in_node_busbw(names, size)
    pairs = [{"nodes": p["nodes"], "busbw_gbps": p["rows"][0]["busbw_gbps"], "correct": p["rows"][0]["correct"]}
             for p in check_pairs(node, [size], ITERS, WARMUP)]
    client = coordination_client()
    timeout_ms = init_timeout_s() * 1000
    if client is None or jax.process_count() == 1:
        ranks = [mine]
    else:
        client.key_value_set(f"{KEY}/rank/{jax.process_index()}", json.dumps(mine))
        ranks = [json.loads(client.blocking_key_value_get(f"{KEY}/rank/{r}", timeout_ms)) if r else mine
                 for r in range(jax.process_count())] if jax.process_index() == 0 else []
    if jax.process_index() == 0:
        for pair in pairs:
            if not pair["correct"]:
                pair["busbw_gbps"] = 0.0  # fast and wrong is not bandwidth
        seconds = (time.monotonic() - started) + (startup_s() or 0.0)
        result = verdict(ranks, pairs, floors, seconds, links_by_median=platform == "gpu",
                         use=len(set(names)) - spares)
        write(result)
        if client is not None and jax.process_count() > 1:
            client.key_value_set(f"{KEY}/verdict", json.dumps({"passed": result["passed"]}))
        print(result["summary"], flush=True)
        for warning in result["warnings"]:
            print(f"preflight: warning: {warning}", flush=True)
        passed = result["passed"]
    else:
        passed = json.loads(client.blocking_key_value_get(f"{KEY}/verdict", timeout_ms))["passed"]
    say(f"preflight: rank {mine['rank']} on {node}: {mine['devices']} device(s), matmul "
        f"{min(mine['gflops'], default=0):.1f} GFLOP/s (slowest device)"
        + (f", all-reduce inside the node {mine['in_node_busbw']:.3f} GB/s" if mine["in_node_busbw"] else ""))
    return 0 if passed else contract.PREFLIGHT_EXIT


def startup_s() -> float | None:
    """Seconds this process took before the preflight began (imports, JAX's initialization)."""
    from hpcjax.rank.start.runtime import initialized_at, process_age_s

    age = process_age_s()
    return None if age is None or initialized_at is None else max(0.0, age - (time.monotonic() - initialized_at))


def matmul_gflops(n: int, repeats: int) -> list[float]:
    """Each local device's matmul throughput (GFLOP/s): the best of `repeats` timings, each at
    least MATMUL_TIMED_S long."""
    import jax
    import jax.numpy as jnp

    out = []
    for device in jax.local_devices():
        x = jax.device_put(jnp.full((n, n), 1.0 / n, jnp.float32), device)
        best = min(seconds_per_call(squaring(), x, MATMUL_TIMED_S) for _ in range(repeats))
        out.append(2 * n ** 3 / best / 1e9)
    return out


def seconds_per_call(function, x, at_least_s: float) -> float:
    """Seconds per call of `function` on x, after WARMUP calls, over as many calls (ITERS at
    least) as last `at_least_s`: the count is not guessed from a first call, which may itself
    have run inside a fresh quota or behind a throttled one."""
    for _ in range(WARMUP):
        function(x).block_until_ready()
    calls, begun = 0, time.perf_counter()
    while True:
        function(x).block_until_ready()
        calls += 1
        elapsed = time.perf_counter() - begun
        if calls >= ITERS and elapsed >= at_least_s:
            return elapsed / calls


@functools.cache
def squaring():
    """The matmul timed, one jitted function for every round (compiled once per device)."""
    import jax

    return jax.jit(lambda x: x @ x)


def in_node_busbw(names: list[str], size: int) -> float | None:
    """This process's all-reduce bus bandwidth (GB/s) over its node's devices, or None when a node
    has one device (nothing to measure) or the nodes' device counts differ (the verdict says so)."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    devices = jax.devices()
    nodes = list(dict.fromkeys(names))
    grid = [[d for d in devices if names[d.process_index] == n] for n in nodes]
    per_node = len(grid[0])
    if per_node < 2 or any(len(row) != per_node for row in grid):
        return None
    mesh = Mesh(np.array(grid), ("node", "local"))
    spec = P(("node", "local"))
    summed = jax.jit(jax.shard_map(lambda x: jax.lax.psum(x, "local"), mesh=mesh, in_specs=spec, out_specs=spec))
    local = np.ones((jax.local_device_count(), max(1, size // 4)), np.float32)
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, spec), local)
    seconds, out = min((timed(summed, x, ITERS, WARMUP) for _ in range(REPEATS)), key=lambda t: t[0])
    if not all(np.all(np.asarray(shard.data) == per_node) for shard in out.addressable_shards):
        return 0.0  # fast and wrong is not bandwidth
    return size / seconds * 2 * (per_node - 1) / per_node / 1e9


def storage(directory: Path) -> dict:
    """The job's directory from this node: a file written, synced, read back and removed; free GB."""
    found = {"path": str(directory), "free_gb": 0.0, "error": ""}
    try:
        found["free_gb"] = shutil.disk_usage(directory).free / 1e9
        payload = os.urandom(PROBE_BYTES)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".hpcjax-preflight-") as probe:
            probe.write(payload)
            probe.flush()
            os.fsync(probe.fileno())
            probe.seek(0)
            if probe.read() != payload:
                found["error"] = "a file written there read back different"
    except OSError as error:
        found["error"] = f"not writable from this node ({error.strerror or error})"
    return found


def write(result: dict) -> None:
    """Rank 0's verdict beside the job's logs: the report (JSON), and the lines the batch script
    reads (the summary, shell-safe; the failed nodes; the nodes the program runs on)."""
    directory = os.environ.get(contract.LOG_DIR_ENV)
    job = contract.job_key()
    if not directory or not job:
        return  # not in a job step (run by hand): the summary on stdout is all
    report, lines = contract.preflight_paths(directory, job)
    report.write_text(json.dumps(result, indent=1) + "\n")
    safe = "".join(c for c in result["summary"] if c.isprintable() and c not in "\"\\'`$")[:600]
    lines.write_text(f"{safe}\n{','.join(result['bad'])}\n{','.join(result['chosen'])}\n")
