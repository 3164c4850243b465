"""Bandwidth between each pair of nodes, for `hpcjax check bandwidth` on several nodes.

An all-reduce over every device runs at the pace of the job's slowest link, and its
bus bandwidth does not say which link that is. So the check also exchanges buffers
between one device of each node and one of another, both ways at once
(nccl-tests' sendrecv: bus bandwidth = algorithm bandwidth = bytes / time). The pairs
are scheduled as a round-robin tournament: every round is a set of disjoint pairs that
exchange at the same time (one collective-permute), and in N-1 rounds (N even) every
pair of N nodes has met once. Each process times its own end of the exchange; rank 0
gets every time through one all-gather at the end.
"""

from __future__ import annotations

import functools
import time

import numpy as np

NODE_KEY = "hpcjax/check/node"


def timed(collective, x, iters: int, warmup: int):
    """(seconds per call of the jitted collective on x, after warm-up calls; its last output)."""
    for _ in range(warmup):
        collective(x).block_until_ready()
    begun = time.perf_counter()
    for _ in range(iters):
        out = collective(x)
    out.block_until_ready()
    return (time.perf_counter() - begun) / iters, out


def rounds(nodes: int) -> list[list[tuple[int, int]]]:
    """Round-robin pairings of nodes 0..nodes-1: every pair exactly once, no node twice a round."""
    order = list(range(nodes)) + ([None] if nodes % 2 else [])  # None: the node that sits a round out
    count = len(order)
    schedule = []
    for _ in range(count - 1):
        pairs = [(order[i], order[count - 1 - i]) for i in range(count // 2)]
        schedule.append([tuple(sorted(p)) for p in pairs if None not in p])
        order = [order[0], order[-1], *order[1:-1]]  # keep the first, rotate the rest
    return schedule


@functools.lru_cache(maxsize=1)
def process_nodes(node: str) -> list[str]:
    """Every process's node name, in process order (through JAX's coordination service; asked
    once per process: the service keeps a key once)."""
    import jax

    from hpcjax.rank.start.barriers import coordination_client

    client = coordination_client()
    if client is None or jax.process_count() == 1:
        return [node]
    client.key_value_set(f"{NODE_KEY}/{jax.process_index()}", node)
    return [client.blocking_key_value_get(f"{NODE_KEY}/{r}", 60_000) for r in range(jax.process_count())]


def check_pairs(node: str, sizes, iters: int, warmup: int) -> list[dict]:
    """Per node pair, a row per message size; [] on one node."""
    import jax
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    names = process_nodes(node)
    nodes = list(dict.fromkeys(names))  # in order of first process
    if len(nodes) < 2:
        return []
    devices = jax.devices()
    mesh = Mesh(np.array(devices), ("d",))
    # One device per node: the first device of the node's first process.
    position = {n: next(i for i, d in enumerate(devices) if names[d.process_index] == n) for n in nodes}
    mine = [i for i, d in enumerate(devices) if d.process_index == jax.process_index()]
    schedule = rounds(len(nodes))
    times = np.zeros((len(schedule), len(sizes)))
    correct = np.ones((len(schedule), len(sizes)))
    for r, pairs in enumerate(schedule):
        links = [(position[nodes[a]], position[nodes[b]]) for a, b in pairs]
        perm = [(x, y) for a, b in links for x, y in ((a, b), (b, a))]
        partner = {y: x for x, y in perm}
        exchange = jax.jit(jax.shard_map(lambda x, perm=perm: jax.lax.ppermute(x, "d", perm), mesh=mesh,
                                         in_specs=P("d"), out_specs=P("d")))
        for s, size in enumerate(sizes):
            local = np.concatenate([np.full((1, max(1, size // 4)), i, np.float32) for i in mine])
            x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("d")), local)
            times[r, s], out = timed(exchange, x, iters, warmup)
            # Each receiving device must hold its partner's index: fast and wrong is not bandwidth.
            received = {shard.device.id: np.asarray(shard.data) for shard in out.addressable_shards}
            correct[r, s] = all(np.all(received[devices[i].id] == partner[i]) for i in mine if i in partner)
    table = np.asarray(multihost_utils.process_allgather(np.stack([times, correct]))).reshape(
        jax.process_count(), 2, len(schedule), len(sizes))
    first_process = {n: names.index(n) for n in nodes}
    results = []
    for r, pairs in enumerate(schedule):
        for a, b in pairs:
            ends = [first_process[nodes[a]], first_process[nodes[b]]]
            rows = []
            for s, size in enumerate(sizes):
                seconds = float(max(table[p, 0, r, s] for p in ends))
                rows.append({"bytes": size, "time_us": seconds * 1e6, "busbw_gbps": size / seconds / 1e9,
                             "correct": bool(all(table[p, 1, r, s] for p in ends))})
            results.append({"nodes": [nodes[a], nodes[b]], "rows": rows})
    return sorted(results, key=lambda p: (nodes.index(p["nodes"][0]), nodes.index(p["nodes"][1])))
