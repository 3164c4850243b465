"""The preflight's verdict from measurements, nvidia-smi's health report, and how long a matmul is
timed, as pure functions.

The nvidia-smi outputs below are written in its `--query-gpu ... --format=csv,noheader,nounits`
format (no GPU here to record them from); the dev-cluster tests (test_preflight_cluster.py) run
the whole preflight for real on emulated devices, with a node slowed through a cgroup and a
stand-in nvidia-smi.
"""

from __future__ import annotations

import difflib
import time

import pytest

from hpcjax.values.errors import ConfigError, SpecError
from hpcjax.protocol.preflight_rules import Floors, verdict
from hpcjax.rank.prove import gpuhealth
from hpcjax.rank.prove.preflight import ITERS, WARMUP, seconds_per_call


def rank(r, node, gflops=100.0, devices=4, expected=4, kind="cpu", in_node=10.0, storage=None, gpus=None):
    return {"rank": r, "node": node, "devices": devices, "expected": expected, "kinds": [kind] * devices,
            "gflops": [gflops] * devices, "in_node_busbw": in_node, "storage": storage, "gpus": gpus}


def store(free_gb=100.0, error=""):
    return {"path": "/work", "free_gb": free_gb, "error": error}


def test_all_good_is_one_line_with_the_slowest_node_against_the_median():
    ranks = [rank(0, "n1", 100.0, storage=store()), rank(1, "n2", 96.0, storage=store())]
    result = verdict(ranks, [{"nodes": ["n1", "n2"], "busbw_gbps": 5.0}], Floors(), 14.2)
    assert result["passed"] and result["bad"] == []
    assert result["summary"] == "preflight: 2 node(s), 8 device(s), passed in 14 s; slowest node 0.98x median"


def test_a_slow_node_is_named_with_its_figure_and_the_floor_it_missed():
    ranks = [rank(r, f"n{r + 1}", 25.0 if r == 2 else 100.0) for r in range(4)]
    result = verdict(ranks, [], Floors(), 9.0)
    assert result["bad"] == ["n3"] and not result["passed"]
    [said] = result["problems"]["n3"]
    assert said == "matmul 25.0 GFLOP/s per device (slowest device), 0.25x the median of the allocation 100 (floor 0.5x)"
    assert result["summary"].startswith("preflight: FAILED on n3 (n3: matmul 25.0 GFLOP/s")


def test_absolute_floors_fail_a_uniformly_slow_allocation():
    ranks = [rank(0, "n1", 40.0, in_node=2.0), rank(1, "n2", 40.0, in_node=2.0)]
    result = verdict(ranks, [], Floors(gflops=50.0, busbw=5.0), 3.0)
    assert result["bad"] == ["n1", "n2"]
    assert "matmul 40.0 GFLOP/s per device (slowest device), under the floor 50 GFLOP/s" in result["problems"]["n1"]
    assert "all-reduce inside the node 2.000 GB/s busbw, under the floor 5 GB/s" in result["problems"]["n2"]


def test_a_node_with_fewer_devices_or_another_kind_is_named_with_the_count():
    ranks = [rank(0, "n1"), rank(1, "n2", devices=3), rank(2, "n3", kind="H100"), rank(3, "n4")]
    result = verdict(ranks, [], Floors(), 1.0)
    assert result["problems"]["n2"] == ["rank 1 has 3 device(s), the job asked for 4 per process"]
    assert result["problems"]["n3"] == ["rank 2 has device kind H100, the others cpu"]
    assert result["bad"] == ["n2", "n3"]


def test_a_slow_link_is_pinned_to_the_node_common_to_the_slow_pairs():
    nodes = ["n1", "n2", "n3", "n4"]
    ranks = [rank(i, n) for i, n in enumerate(nodes)]
    pairs = [{"nodes": [a, b], "busbw_gbps": 1.0 if "n4" in (a, b) else 10.0}
             for i, a in enumerate(nodes) for b in nodes[i + 1:]]
    result = verdict(ranks, pairs, Floors(), 5.0)
    assert result["bad"] == ["n4"]
    assert all(p.startswith("slow to every node: link ") for p in result["problems"]["n4"])
    assert len(result["problems"]["n4"]) == 3 and result["warnings"] == []
    # three nodes: two of the three pairs hold the bad node, and it is still pinned
    three = verdict(ranks[:3], [{"nodes": ["n1", "n2"], "busbw_gbps": 10.0},
                                {"nodes": ["n1", "n3"], "busbw_gbps": 1.0},
                                {"nodes": ["n2", "n3"], "busbw_gbps": 1.2}], Floors(), 5.0)
    assert three["bad"] == ["n3"]


def test_one_slow_pair_among_good_ones_or_of_two_nodes_is_said_not_failed():
    ranks = [rank(i, f"n{i + 1}") for i in range(4)]
    pairs = [{"nodes": ["n1", "n2"], "busbw_gbps": 1.0}, {"nodes": ["n3", "n4"], "busbw_gbps": 10.0},
             {"nodes": ["n1", "n3"], "busbw_gbps": 10.0}, {"nodes": ["n2", "n4"], "busbw_gbps": 10.0}]
    result = verdict(ranks, pairs, Floors(), 5.0)
    assert result["passed"] and result["warnings"] == [
        "link n1 <-> n2 1.000 GB/s busbw (median of best links per node 10.000, floor 0.5x): cannot tell which end is slow"]
    two = verdict(ranks[:2], [{"nodes": ["n1", "n2"], "busbw_gbps": 0.1}], Floors(busbw=1.0), 5.0)
    assert two["passed"] and "cannot tell which end is slow" in two["warnings"][0]


def test_storage_that_cannot_be_written_or_is_full_fails_its_node():
    ranks = [rank(0, "n1", storage=store(error="not writable from this node (Read-only file system)")),
             rank(1, "n2", storage=store(free_gb=0.2)), rank(2, "n3", storage=store())]
    result = verdict(ranks, [], Floors(), 2.0)
    assert result["problems"] == {"n1": ["the job directory /work: not writable from this node (Read-only file "
                                         "system)"], "n2": ["0.2 GB free in /work (floor 1 GB)"]}


RECORDED = """\
0, NVIDIA H100 80GB HBM3, 0, No, No, No, Not Active, Not Active, 16, 16
1, NVIDIA H100 80GB HBM3, 3, No, Yes, No, Not Active, Not Active, 16, 16
2, NVIDIA H100 80GB HBM3, 0, [N/A], No, Yes, Active, Active, 8, 16
3, NVIDIA H100 80GB HBM3, [N/A], [Not Supported], [N/A], [N/A], [N/A], [N/A], 16, 16
"""


def test_nvidia_smi_health_is_read_from_its_csv():
    gpus = gpuhealth.parse(RECORDED)
    assert [g["index"] for g in gpus] == ["0", "1", "2", "3"]
    assert gpuhealth.problems(gpus) == [
        "GPU 1: 3 uncorrectable ECC error(s)", "GPU 1: row remapping pending (the GPU needs a reset)",
        "GPU 2: row remapping failed", "GPU 2: hardware slowdown active", "GPU 2: thermal slowdown active",
        "GPU 2: PCIe link x8 of x16"]
    assert gpuhealth.problems(gpuhealth.parse(RECORDED.splitlines()[0])) == []
    assert gpuhealth.parse("garbage\n\n1, 2\n") == []  # lines of another shape are not GPUs
    basic = gpuhealth.parse("0, A100, 1, 16, 16\n", gpuhealth.BASIC_FIELDS)
    assert gpuhealth.problems(basic) == ["GPU 0: 1 uncorrectable ECC error(s)"]
    result = verdict([rank(0, "n1", gpus={"problems": gpuhealth.problems(gpus)}), rank(1, "n2")], [], Floors(), 1.0)
    assert result["bad"] == ["n1"] and "GPU 1: 3 uncorrectable ECC error(s)" in result["problems"]["n1"]


@pytest.mark.parametrize("name, value", [("HPCJAX_PREFLIGHT_RATIO", "2"), ("HPCJAX_PREFLIGHT_RATIO", "x"),
                                         ("HPCJAX_PREFLIGHT_GFLOPS", "-1"), ("HPCJAX_PREFLIGHT_FREE_GB", "nan")])
def test_a_bad_floor_is_refused_where_the_job_is_made(name, value):
    with pytest.raises(ConfigError, match=name):
        Floors.from_env({name: value})
    from hpcjax.job.profiles import job_spec

    with pytest.raises(SpecError, match=name):
        job_spec(["python", "t.py"], env={name: value}, preflight=True)
    assert Floors.from_env({"HPCJAX_PREFLIGHT_RATIO": "0.7"}).ratio == 0.7


def test_preflight_off_changes_nothing_and_on_only_adds_the_step():
    from hpcjax.job.profiles import job_spec
    from hpcjax.slurm.script import render_sbatch

    off = render_sbatch(job_spec(["python", "t.py"], nodes=2, gpus_per_node=4, requeue=1, retry_failed=True))
    assert "preflight" not in off.lower()
    on = render_sbatch(job_spec(["python", "t.py"], nodes=2, gpus_per_node=4, requeue=1, retry_failed=True,
                                preflight=True))
    changed = [line for line in difflib.ndiff(off.splitlines(), on.splitlines()) if line.startswith("- ")]
    # the attempt's record gains the preflight's line and the requeue's reasons name a node a preflight
    # failed; nothing else of the script without it changes
    assert sum(line.startswith("- printf '{\"attempt\": %d") for line in changed) == 1, changed
    reasons = [line for line in changed if "printf '{" not in line]
    assert len(changed) == 3 and all("failed two attempts" in line for line in reasons), changed
    assert sum("a node a preflight failed" in line for line in on.splitlines()) == 2
    assert " -m hpcjax preflight || hpcjax_rc=$?" in on


def test_emulated_links_are_held_to_the_absolute_floor_only():
    """On CPU devices every "link" is one machine's loopback that all the nodes share: a figure of
    0.4x the median there says nothing of a node (seen on the dev cluster), the matmul still does."""
    ranks = [rank(0, "n1", in_node=0.05), rank(1, "n2", in_node=0.3)]
    pairs = [{"nodes": ["n1", "n2"], "busbw_gbps": 0.01}]
    assert verdict(ranks, pairs, Floors(), 1.0, links_by_median=False)["passed"]
    assert verdict(ranks, pairs, Floors(), 1.0)["bad"] == ["n1"]
    assert verdict(ranks, pairs, Floors(busbw=0.2), 1.0, links_by_median=False)["bad"] == ["n1"]
    slow = [rank(0, "n1", gflops=10.0), rank(1, "n2", gflops=100.0)]
    assert verdict(slow, [], Floors(), 1.0, links_by_median=False)["bad"] == ["n1"]


def test_with_spares_the_best_good_nodes_are_chosen_and_the_bad_left_out():
    ranks = [rank(0, "n1", 20.0), rank(1, "n2", 100.0), rank(2, "n3", 90.0)]
    result = verdict(ranks, [], Floors(), 6.0, use=2)
    assert result["passed"] and result["chosen"] == ["n2", "n3"] and result["bad"] == ["n1"]
    assert result["summary"].startswith("preflight: 3 node(s), 12 device(s), passed in 6 s; slowest node 1.00x median;"
                                        " running on n2,n3, left out n1 (n1: matmul 20.0 GFLOP/s")
    healthy = verdict([rank(0, "n1", 95.0), rank(1, "n2", 100.0)], [], Floors(), 1.0, use=1)
    assert healthy["chosen"] == ["n2"] and healthy["bad"] == [] and healthy["summary"].endswith("left out n1")
    short = verdict([rank(0, "n1", 20.0), rank(1, "n2", 100.0), rank(2, "n3", 100.0), rank(3, "n4", 10.0)], [],
                    Floors(), 1.0, use=3)  # one spare, two bad nodes
    assert not short["passed"] and short["summary"].startswith("preflight: FAILED on n1, n4")


def test_each_failed_nodes_reason_is_read_back_from_the_summary_whole():
    """`hpcjax nodes` lists each node with its own reason, not the whole line (issue 44)."""
    from hpcjax.protocol.preflight_rules import reason_of

    ranks = [rank(0, "n1", 20.0), rank(1, "n2", 100.0), rank(2, "n3", 90.0), rank(3, "n4", 5.0)]
    failed = verdict(ranks, [], Floors(), 6.0)
    assert failed["bad"] == ["n1", "n4"]
    assert reason_of(failed["summary"], "n1") == ("matmul 20.0 GFLOP/s per device (slowest device), 0.36x the "
                                                  "median of the allocation 55 (floor 0.5x)")
    assert reason_of(failed["summary"], "n4").startswith("matmul 5.0 GFLOP/s") and \
        reason_of(failed["summary"], "n4").endswith("(floor 0.5x)")
    assert reason_of(failed["summary"], "n2") == "" and reason_of(failed["summary"], "n") == ""
    spare = verdict([rank(0, "n1", 20.0), rank(1, "n2", 100.0), rank(2, "n3", 90.0)], [], Floors(), 6.0, use=2)
    assert reason_of(spare["summary"], "n1").startswith("matmul 20.0") and reason_of(spare["summary"], "n1").endswith("x)")


def test_a_device_fast_until_its_quota_is_spent_is_timed_at_the_speed_it_keeps():
    """A node held to a CPU quota runs its first calls at full speed, then waits for the next
    period: the timing lasts its floor, so it counts the waits (ITERS calls at full speed would
    have found the node fast: CI's 1.09x of a node at a quarter of a CPU)."""
    calls = []

    class Done:
        def block_until_ready(self):
            return self

    def throttled(x):
        calls.append(x)
        if len(calls) > WARMUP + 2 * ITERS:  # the period's quota spent: each call waits
            time.sleep(0.02)
        return Done()

    began = time.perf_counter()
    seconds = seconds_per_call(throttled, "x", at_least_s=0.25)
    assert time.perf_counter() - began >= 0.25
    assert seconds > 0.25 / len(calls) * 0.9, (seconds, len(calls))  # the mean over the whole floor
    assert seconds > 0.005  # slow: most of the floor was spent waiting
    calls.clear()
    assert seconds_per_call(lambda x: calls.append(x) or Done(), "x", at_least_s=0.0) < 0.001
    assert len(calls) == WARMUP + ITERS  # a fast device still gets ITERS timed calls
