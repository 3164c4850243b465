"""The preflight's verdict: which nodes of the allocation are unfit, by which figure, against
which floor. A pure function of what every rank measured (hpcjax.rank.prove.preflight), run by
rank 0; standard library only, so it is tested without JAX or a cluster.

Every figure is compared with the allocation's median (a node at less than `ratio` of it is
slow: one slow node sets the pace of every collective) and with an absolute floor a site may
set in the job's environment (a profile's `env`):

  HPCJAX_PREFLIGHT_RATIO      a node's figure / the median below which it fails (default 0.5)
  HPCJAX_PREFLIGHT_GFLOPS     matmul GFLOP/s per device below which a device fails (default 0: off)
  HPCJAX_PREFLIGHT_BUSBW      all-reduce bus bandwidth in GB/s, inside a node and between two,
                              below which it fails (default 0: off)
  HPCJAX_PREFLIGHT_FREE_GB    free space of the job's directory below which a node fails (default 1)

A slow link between two nodes is pinned to the node common to the slow pairs: with three or
more nodes, every node meets every other in the pair rounds, so a bad node is in all of its
pairs and a good one in at most one slow pair (with the bad node). A slow pair whose two ends
are each in no other slow pair (or a job of two nodes) names no node: it is said, not failed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from hpcjax.values.errors import ConfigError

FLOOR_ENV = {"ratio": "HPCJAX_PREFLIGHT_RATIO", "gflops": "HPCJAX_PREFLIGHT_GFLOPS",
             "busbw": "HPCJAX_PREFLIGHT_BUSBW", "free_gb": "HPCJAX_PREFLIGHT_FREE_GB"}
DEFAULTS = {"ratio": 0.5, "gflops": 0.0, "busbw": 0.0, "free_gb": 1.0}


@dataclass(frozen=True)
class Floors:
    ratio: float = DEFAULTS["ratio"]
    gflops: float = DEFAULTS["gflops"]
    busbw: float = DEFAULTS["busbw"]
    free_gb: float = DEFAULTS["free_gb"]

    @classmethod
    def from_env(cls, environ) -> Floors:
        values = {}
        for key, name in FLOOR_ENV.items():
            text = environ.get(name, "")
            if not text:
                continue
            try:
                values[key] = float(text)
            except ValueError:
                values[key] = -1.0
            if not 0 <= values[key] < math.inf or (key == "ratio" and values[key] > 1):
                raise ConfigError(f"{name}={text!r} is not a finite number of at least 0"
                                  + (" and at most 1" if key == "ratio" else ""),
                                  f"e.g. --env {name}={DEFAULTS[key]:g}")
        return cls(**values)


def reason_of(summary: str, node: str) -> str:
    """What the summary line (verdict's "summary") says against one node: "matmul 0.31x median, ...";
    '' when it names none (a node left out as a spare the job did not need)."""
    # verdict's "(n1: phrase, phrase; n4: phrase)", then "; N node(s)" or the line's end
    found = re.search(rf"(?:\(|; ){re.escape(node)}: (.+?)(?=; [^ ;():]+: |\); \d+ node\(s\)|\)$)", summary)
    return found.group(1) if found else ""


def median_of(values: list[float]) -> float:
    import statistics  # not on the login side's path (`hpcjax status` imports this module)

    return statistics.median(values) if values else 0.0


def verdict(ranks: list[dict], pairs: list[dict], floors: Floors, seconds: float, links_by_median: bool = True,
            use: int | None = None) -> dict:
    """{"passed", "bad" (nodes), "chosen" (the nodes the program runs on), "problems" (node -> phrases),
    "warnings", "nodes" (node -> figures), "summary" (the one line)}. `ranks`: each rank's measurements;
    `pairs`: busbw per node pair; `use`: how many nodes the program needs (fewer than the allocation's
    with spares: the best that passed; None: all of them, each of which must pass).
    `links_by_median` False: the links are held to the absolute floor only (emulated devices: every
    "link" is one machine's loopback, shared by all the nodes, and its figures say nothing of a node)."""
    nodes = list(dict.fromkeys(r["node"] for r in ranks))
    problems: dict[str, list[str]] = {n: [] for n in nodes}
    warnings: list[str] = []
    figures: dict[str, dict] = {n: {} for n in nodes}
    for r in ranks:  # devices: count and kind against the request
        if r["devices"] != r["expected"]:
            problems[r["node"]].append(f"rank {r['rank']} has {r['devices']} device(s), the job asked for "
                                       f"{r['expected']} per process")
    kinds = [k for r in ranks for k in r["kinds"]]
    import statistics

    usual = statistics.mode(kinds) if kinds else ""
    for r in ranks:
        odd = sorted(set(r["kinds"]) - {usual})
        if odd:
            problems[r["node"]].append(f"rank {r['rank']} has device kind {', '.join(odd)}, the others {usual}")
    gflops: dict[str, float] = {}
    in_node: dict[str, float] = {}
    for r in ranks:  # each node's slowest device, and slowest all-reduce inside it
        for value in r["gflops"]:
            gflops[r["node"]] = min(value, gflops.get(r["node"], value))
        if r.get("in_node_busbw"):
            in_node[r["node"]] = min(r["in_node_busbw"], in_node.get(r["node"], r["in_node_busbw"]))
    _compare(problems, figures, "gflops", gflops, floors.ratio, floors.gflops,
             "matmul {value:.1f} GFLOP/s per device (slowest device)", "GFLOP/s")
    _compare(problems, figures, "in_node_busbw", in_node, floors.ratio if links_by_median else 0.0, floors.busbw,
             "all-reduce inside the node {value:.3f} GB/s busbw", "GB/s")
    for r in ranks:  # storage and GPU health: measured once per node, by its first rank there
        if r.get("storage"):
            store = r["storage"]
            figures[r["node"]]["free_gb"] = store.get("free_gb")
            if store.get("error"):
                problems[r["node"]].append(f"the job directory {store['path']}: {store['error']}")
            elif store["free_gb"] < floors.free_gb:
                problems[r["node"]].append(f"{store['free_gb']:.1f} GB free in {store['path']} "
                                           f"(floor {floors.free_gb:g} GB)")
        for phrase in (r.get("gpus") or {}).get("problems", []):
            problems[r["node"]].append(phrase)
    _pin_slow_pairs(pairs, nodes, floors if links_by_median else Floors(ratio=0.0, busbw=floors.busbw),
                    problems, warnings)
    bad = [n for n in nodes if problems[n]]
    use = len(nodes) if use is None else use
    good = [n for n in nodes if n not in bad]
    # With spares, the best `use` of the good nodes (by throughput), in the allocation's order.
    best = set(sorted(good, key=lambda n: -figures[n].get("gflops_ratio", 1.0))[:use])
    chosen = [n for n in good if n in best]
    passed = len(chosen) == use
    named = "; ".join(f"{n}: {', '.join(problems[n])}" for n in bad)
    devices = sum(r["devices"] for r in ranks)
    slowest = min((figures[n]["gflops_ratio"] for n in chosen if "gflops_ratio" in figures[n]), default=None)
    head = f"{len(nodes)} node(s), {devices} device(s)"
    if not passed:
        summary = f"preflight: FAILED on {', '.join(bad)} ({named}); {head}, {seconds:.0f} s"
    else:
        summary = f"preflight: {head}, passed in {seconds:.0f} s" + (
            f"; slowest node {slowest:.2f}x median" if slowest is not None else "")
        if len(chosen) < len(nodes):
            left = [n for n in nodes if n not in best]
            summary += f"; running on {','.join(chosen)}, left out {', '.join(left)}" + (f" ({named})" if bad else "")
    return {"passed": passed, "bad": bad, "chosen": chosen, "problems": {n: p for n, p in problems.items() if p},
            "warnings": warnings, "nodes": figures, "pairs": pairs, "seconds": seconds, "summary": summary}


def _compare(problems, figures, key: str, per_node: dict[str, float], ratio: float, floor: float,
             said: str, unit: str) -> None:
    """Each node's figure against the median of the nodes and the absolute floor."""
    middle = median_of(list(per_node.values()))
    for node, value in per_node.items():
        share = value / middle if middle > 0 else 1.0
        figures[node][key], figures[node][f"{key}_ratio"] = value, share
        if share < ratio:
            problems[node].append(said.format(value=value) + f", {share:.2f}x the median of the allocation "
                                  f"{middle:.3g} (floor {ratio:g}x)")
        elif value < floor:
            problems[node].append(said.format(value=value) + f", under the floor {floor:g} {unit}")


def _pin_slow_pairs(pairs: list[dict], nodes: list[str], floors: Floors, problems, warnings) -> None:
    # The reference: the median over nodes of each node's fastest pair. (The median of the pairs
    # themselves fails with three nodes: two of the three pairs have the bad node in them.)
    best: dict[str, float] = {}
    for p in pairs:
        for n in p["nodes"]:
            best[n] = max(p["busbw_gbps"], best.get(n, p["busbw_gbps"]))
    middle = median_of(list(best.values()))
    slow = [p for p in pairs if (middle > 0 and p["busbw_gbps"] < floors.ratio * middle)
            or p["busbw_gbps"] < floors.busbw]
    if not slow:
        return
    count = dict.fromkeys(nodes, 0)
    for p in slow:
        for n in p["nodes"]:
            count[n] = count.get(n, 0) + 1
    for p in slow:
        a, b = p["nodes"]
        described = (f"link {a} <-> {b} {p['busbw_gbps']:.3f} GB/s busbw (median of best links per node "
                     f"{middle:.3f}, "
                     f"floor {floors.ratio:g}x" + (f" and {floors.busbw:g} GB/s" if floors.busbw else "") + ")")
        ends = [n for n in (a, b) if count[n] > 1 and count[n] >= max(count[a], count[b])]
        if len(nodes) >= 3 and len(ends) == 1:
            if described not in problems[ends[0]]:
                problems[ends[0]].append(f"slow to every node: {described}")
        else:
            warnings.append(f"{described}: cannot tell which end is slow")
