"""The checks that prove a layout works, run on every rank inside a job step.

devices:   local and global device counts match the layout (seed 002's query scripts).
allreduce: a sum over every global device equals the global device count everywhere.
bandwidth: an all-reduce sweep over message sizes with nccl-tests' definitions
           (algbw = bytes / time, busbw = algbw * 2(n-1)/n, n = devices), and on
           several nodes the same sweep between each pair of nodes (rank.prove.pairs).

Each check returns a plain dict (one JSON line per rank with --json); "ok" says
whether this rank passed.
"""

from __future__ import annotations

import socket

import numpy as np

from hpcjax.protocol import placement
from hpcjax.values.sizes import format_bytes
from hpcjax.rank.start.mapping import DistributedEnv
from hpcjax.rank.prove.pairs import check_pairs, timed

DEFAULT_SIZES = tuple(4096 * 4 ** i for i in range(8))  # 4 KiB .. 64 MiB per device


def _base(check: str, denv: DistributedEnv) -> dict:
    import jax

    return {"check": check, "rank": jax.process_index(), "processes": jax.process_count(),
            "node": placement.node_name(), "host": socket.gethostname()}


def check_devices(denv: DistributedEnv) -> dict:
    import jax

    report = _base("devices", denv)
    expected_global = denv.num_processes * denv.devices_per_process
    report.update(
        platform=jax.devices()[0].platform,
        local_device_count=jax.local_device_count(), device_count=jax.device_count(),
        local_devices=[str(d) for d in jax.local_devices()],
        global_device_ids=[d.id for d in jax.devices()],
        expected_local=denv.devices_per_process, expected_global=expected_global,
    )
    report["ok"] = (report["local_device_count"] == denv.devices_per_process
                    and report["device_count"] == expected_global
                    and report["processes"] == denv.num_processes)
    return report


def _psum_over_all_devices():
    """A jitted psum across a 1-D mesh of every global device, and that mesh."""
    import jax
    from jax.sharding import Mesh, PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("d",))
    summed = jax.jit(jax.shard_map(lambda x: jax.lax.psum(x, "d"), mesh=mesh, in_specs=P("d"),
                                   out_specs=P("d")))
    return summed, mesh


def _global_array(mesh, per_device_shape: tuple[int, ...], fill: float):
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    local = np.full((jax.local_device_count() * per_device_shape[0], *per_device_shape[1:]), fill, np.float32)
    return jax.make_array_from_process_local_data(NamedSharding(mesh, P("d")), local)


def check_allreduce(denv: DistributedEnv) -> dict:
    import jax
    from jax.experimental import multihost_utils

    report = _base("allreduce", denv)
    summed, mesh = _psum_over_all_devices()
    result = summed(_global_array(mesh, (1,), 1.0))
    seen = [float(shard.data[0]) for shard in result.addressable_shards]
    expected = denv.num_processes * denv.devices_per_process
    mine = np.array([jax.process_index(), jax.local_device_count(), jax.device_count(),
                     min(seen), max(seen)], np.float64)
    table = np.asarray(multihost_utils.process_allgather(mine)).reshape(-1, 5)
    report.update(expected=expected, seen=seen, device_count=jax.device_count(),
                  ranks=[{"rank": int(r), "local_devices": int(l), "global_devices": int(g),
                          "min": float(lo), "max": float(hi)} for r, l, g, lo, hi in table])
    report["ok"] = all(v == expected for v in seen) and jax.device_count() == expected
    report["all_ranks_ok"] = all(r["global_devices"] == expected and r["min"] == r["max"] == expected
                                 for r in report["ranks"])
    return report


def bus_bandwidth(algbw: float, devices: int) -> float:
    """nccl-tests' all-reduce bus bandwidth: what each link carries, comparable across n."""
    return algbw * 2 * (devices - 1) / devices if devices > 1 else algbw


def check_bandwidth(denv: DistributedEnv, sizes=DEFAULT_SIZES, iters: int = 5, warmup: int = 2) -> dict:
    import jax

    report = _base("bandwidth", denv)
    summed, mesh = _psum_over_all_devices()
    n = jax.device_count()
    rows = []
    for size in sizes:
        x = _global_array(mesh, (1, max(1, size // 4)), 1.0)  # float32: size bytes per device
        seconds, out = timed(summed, x, iters, warmup)
        algbw = size / seconds
        # Fast and wrong is not bandwidth: every element of the sum must be n.
        correct = all(bool(np.all(np.asarray(shard.data) == n)) for shard in out.addressable_shards)
        rows.append({"bytes": size, "time_us": seconds * 1e6, "algbw_gbps": algbw / 1e9,
                     "busbw_gbps": bus_bandwidth(algbw, n) / 1e9, "correct": correct})
    pairs = check_pairs(report["node"], sizes, iters, warmup)
    report.update(devices=n, iters=iters, rows=rows, pairs=pairs,
                  avg_busbw_gbps=sum(r["busbw_gbps"] for r in rows) / len(rows))
    report["ok"] = bandwidth_ok(rows) and all(bandwidth_ok(p["rows"]) for p in pairs)
    return report


def bandwidth_ok(rows: list[dict]) -> bool:
    """Every size gave the right sum in a measurable, finite time."""
    return bool(rows) and all(r["correct"] and 0 < r["time_us"] < float("inf") for r in rows)


def format_report(report: dict) -> str:
    """What a person reads in the rank's log."""
    head = f"[rank {report['rank']}/{report['processes']} {report['node']}] {report['check']}"
    verdict = "ok" if report["ok"] else "FAILED"
    if report["check"] == "devices":
        return (f"{head}: {verdict}: local devices [{report['local_device_count']}] "
                f"(expected {report['expected_local']}) {report['local_devices']}; global devices "
                f"[{report['device_count']}] (expected {report['expected_global']})")
    if report["check"] == "allreduce":
        lines = [f"{head}: {verdict}: sum over {report['device_count']} devices = {report['seen']} "
                 f"(expected {report['expected']})"]
        if not report["all_ranks_ok"] and report["rank"] == 0:
            lines.append("  rank  local  global  min  max   (what each rank saw)")
            lines += [f"  {r['rank']:>4}  {r['local_devices']:>5}  {r['global_devices']:>6}  "
                      f"{r['min']:>3g}  {r['max']:>3g}" for r in report["ranks"]]
        return "\n".join(lines)
    lines = [f"{head} over {report['devices']} devices, {report['iters']} iterations:",
             f"  {'size':>10} {'time (us)':>12} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}"]
    lines += [f"  {format_bytes(r['bytes']):>10} {r['time_us']:>12.1f} {r['algbw_gbps']:>13.3f} "
              f"{r['busbw_gbps']:>13.3f}" for r in report["rows"]]
    lines.append(f"  average bus bandwidth: {report['avg_busbw_gbps']:.3f} GB/s")
    return "\n".join(lines + format_pairs(report.get("pairs", [])))


def format_pairs(pairs: list[dict]) -> list[str]:
    """Bus bandwidth (GB/s) per node pair and message size; the slowest pair at the largest size."""
    if not pairs:
        return []
    sizes = [r["bytes"] for r in pairs[0]["rows"]]
    width = max(len(" <-> ".join(p["nodes"])) for p in pairs)
    lines = ["  between nodes, both ways at once (busbw GB/s):",
             "  " + "pair".ljust(width) + "".join(f"{format_bytes(s):>10}" for s in sizes)]
    lines += ["  " + " <-> ".join(p["nodes"]).ljust(width)
              + "".join(f"{r['busbw_gbps']:>10.3f}" if r["correct"] else f"{'WRONG':>10}" for r in p["rows"])
              for p in pairs]
    if len(pairs) > 1:
        at_largest = sorted(pairs, key=lambda p: p["rows"][-1]["busbw_gbps"])
        median = at_largest[len(at_largest) // 2]["rows"][-1]["busbw_gbps"]
        slowest = at_largest[0]
        lines.append(f"  slowest pair at {format_bytes(sizes[-1])}: {' <-> '.join(slowest['nodes'])}, "
                     f"{slowest['rows'][-1]['busbw_gbps']:.3f} GB/s (median of pairs {median:.3f})")
    return lines
