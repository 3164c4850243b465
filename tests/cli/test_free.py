"""`hpcjax free`'s readers on text in SLURM's formats (sinfo -N -O with Gres and GresUsed, sbatch
--test-only's answers), with typed GPUs and node states the dev cluster does not have; the verb
itself runs on the dev cluster in tests/launch/test_pending_cluster.py."""

from __future__ import annotations

from datetime import datetime

from hpcjax.slurm import free

SINFO = """gpu201|gpu|mixed|gpu:a100:8(S:0-1)|gpu:a100:3(IDX:0-2)|
gpu202|gpu|idle|gpu:a100:8(S:0-1)|gpu:a100:0(IDX:N/A)|
gpu203|gpu|drained|gpu:a100:8(S:0-1)|gpu:a100:0(IDX:N/A)|
gpu301|gpu|allocated|gpu:v100:4(S:0)|gpu:v100:4(IDX:0-3)|
gpu302|gpu|mixed*|gpu:v100:4(S:0)|gpu:v100:1(IDX:0)|
cpu001|batch*|idle|(null)|(null)|
dbg01|debug|mixed|gpu:2|gpu:1|
"""


def test_free_gpus_are_counted_by_partition_and_type_on_nodes_that_take_jobs_now():
    rows = {(r.partition, r.kind): r for r in free.by_partition(free.read_nodes(SINFO), gpus_per_node=4)}
    a100, v100, untyped = rows[("gpu", "a100")], rows[("gpu", "v100")], rows[("debug", "")]
    assert (a100.nodes, a100.total, a100.free, a100.fitting) == (3, 24, 13, 2)  # drained: none of its 8
    assert (v100.nodes, v100.total, v100.free, v100.fitting) == (2, 8, 0, 0)  # allocated; mixed* not answering
    assert (untyped.total, untyped.free, untyped.fitting) == (2, 1, 0)
    assert ("batch", "") not in rows  # no GPUs


def test_slurms_estimate_is_read_as_now_a_time_or_never_with_its_reason():
    now = datetime(2026, 11, 27, 5, 0, 0)
    said = "sbatch: Job 1673 to start at 2026-11-27T05:45:58 using 2 processors on nodes node[1-2] in partition gpu\n"
    assert free.read_estimate(0, said, now) == "2026-11-27 05:45:58"
    assert free.read_estimate(0, said.replace("05:45:58", "04:59:59"), now) == "now"
    assert free.read_estimate(1, "allocation failure: Requested node configuration is not available\n", now) == \
        "never: Requested node configuration is not available"
    assert free.read_estimate(1, "", now) == "never: sbatch refused it"
    far = said.replace("2026-11-27T05:45:58", "2537-04-15T19:26:17")  # seen in CI, behind a job with no limit
    assert free.read_estimate(0, far, now) == ("not known (SLURM's estimate, 2537-04-15, means a job ahead of it "
                                               "has no time limit)")
