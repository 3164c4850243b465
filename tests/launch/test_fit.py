"""hpcjax.slurm.fit on sites read from text in sinfo's and sacctmgr's formats: shapes the dev cluster
has (its a100 partition, QOS gpu2: tests/launch/test_site_cluster.py runs them for real) and ones it
has not (two GPU types on one partition, a per-job limit, limits in forms the reader does not know)."""

from __future__ import annotations

import pytest

from hpcjax.values.errors import UsageError
from hpcjax.job.spec import JobSpec, Layout
from hpcjax.slurm import fit
from hpcjax.slurm.site import read_partitions, read_rows
from hpcjax.slurm.commands import QOS_FIELDS

SINFO = """gpu*|up|infinite|2|8|16000|gpu:4
a100|up|1:00:00|1|4|8000|gpu:a100:2
mixed|up|2-00:00:00|8|64|512000|gpu:a100:8(S:0-1)
mixed|up|2-00:00:00|4|32|256000|gpu:v100:4
cpu|up|7-00:00:00|10|64|256000|(null)
"""
QOS = """normal|||||
gpu2|gres/gpu=2||02:00:00|
perjob||gres/gpu=4,cpu=64||
odd||gres/gpu=lots|whenever|
"""


def spec(**options) -> JobSpec:
    layout = Layout(nodes=options.pop("nodes", 1), gpus_per_node=options.pop("gpus_per_node", 1))
    return JobSpec(command=("true",), layout=layout, **options)


def check(**options) -> None:
    fit.check(spec(**options), read_partitions(SINFO), {r["Name"]: r for r in read_rows(QOS, QOS_FIELDS)}, "ibex")


@pytest.mark.parametrize("options, words", [
    (dict(gpu_type="h100"), "--gpu-type h100: partition gpu of ibex has no GPU of that type; it has 2 node(s) of gpu:4"),
    (dict(partition="mixed", gpu_type="h100"), "it has 8 node(s) of gpu:a100:8, 4 node(s) of gpu:v100:4"),
    (dict(partition="mixed", gpu_type="v100", gpus_per_node=8), "has 0 such node(s) (at most 4 v100 GPUs on a node)"),
    (dict(partition="mixed", gpu_type="a100", gpus_per_node=8, nodes=9), "the job needs 9 node(s) with 8 a100 GPUs"),
    (dict(partition="a100", time="02:00:00"), "--time 02:00:00 is over partition a100's limit of 01:00:00"),
    (dict(partition="a10"), "--partition 'a10': ibex has no partition a10; it has gpu (default), a100, mixed, cpu"),
    (dict(partition="gpu,a10"), "--partition 'gpu,a10': ibex has no partition a10"),
    (dict(qos="gpu2", nodes=2, gpus_per_node=2), "the job asks for 4 GPUs; QOS gpu2 allows 2 per user"),
    (dict(qos="perjob", nodes=2, gpus_per_node=4), "QOS perjob allows 4 per job (MaxTRES gres/gpu=4,cpu=64)"),
    (dict(qos="gpu2", time="03:00:00"), "--time 03:00:00 is over QOS gpu2's MaxWall of 02:00:00"),
])
def test_a_job_the_site_could_never_run_is_refused_naming_what_it_has(options, words):
    with pytest.raises(UsageError) as refused:
        check(**options)
    assert words in refused.value.message and refused.value.hint


@pytest.mark.parametrize("options", [
    dict(), dict(nodes=2, gpus_per_node=4), dict(partition="mixed", gpus_per_node=8, nodes=8),
    dict(partition="mixed", gpu_type="v100", gpus_per_node=4, nodes=4), dict(partition="mixed", nodes=12, gpus_per_node=4),
    dict(partition="a100", gpu_type="a100", gpus_per_node=2, time="01:00:00"), dict(partition="a100", time="0"),
    dict(qos="gpu2", gpus_per_node=2, time="02:00:00"), dict(qos="odd", nodes=2, gpus_per_node=4, time="9-00:00:00"),
    dict(qos="unknown", nodes=2, gpus_per_node=4), dict(partition="cpu", nodes=2, gpus_per_node=4),
    dict(partition="gpu,a100", nodes=3),  # a list: SLURM chooses; what each could run is left to it
])
def test_what_the_site_can_run_or_a_limit_that_cannot_be_read_is_left_to_slurm(options):
    check(**options)  # cpu: no GRES listed, so nothing is claimed; odd: a limit in no form known


def test_with_nothing_read_nothing_is_refused():
    fit.check(spec(gpu_type="h100", partition="any", qos="gpu2", nodes=64, gpus_per_node=8), [], {}, "ibex")
