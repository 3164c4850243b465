"""A site's `avoid_failed_hours`: later jobs leave out the nodes a preflight failed recently, from
hpcjax's own records (written when a job's outcome was read), for the cluster they were on."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from hpcjax.catalog import records
from hpcjax.values.errors import SpecError
from hpcjax.hosts.cluster import Cluster
from hpcjax.job.profiles import job_spec
from hpcjax.launch import avoiding_failed_nodes
from hpcjax.slurm.script import render_sbatch


def failed(job: str, node: str, hours_ago: float, destination: str | None = None) -> None:
    at = datetime.fromtimestamp(time.time() - hours_ago * 3600, timezone.utc).isoformat(timespec="seconds")
    where = {"cluster": {"destination": destination}} if destination else {}
    records.save(records.key(job, destination), {"backend": "slurm", "output_dir": "/logs", **where,
                                                 "preflight_failures": [{"node": node, "attempt": 1, "at": at,
                                                                         "what": "preflight: FAILED on " + node}]})


def test_recent_failures_on_this_cluster_are_excluded_and_said(hpcjax_home, capsys):
    failed("101", "node2", 2)
    failed("102", "node7", 30)  # older than the window
    failed("103", "node3", 1, "me@login.example.org")  # another cluster's
    spec = avoiding_failed_nodes(job_spec(["python", "t.py"], avoid_failed_hours=24, exclude=["node9"]), Cluster())
    assert spec.exclude == ("node9", "node2")
    assert "leaving out node2: it failed a preflight of job 101 at " in capsys.readouterr().err
    assert "#SBATCH --exclude=node9,node2\n" in render_sbatch(spec)
    there = avoiding_failed_nodes(job_spec(["x"], avoid_failed_hours=24), Cluster("me@login.example.org"))
    assert there.exclude == ("node3",)
    assert avoiding_failed_nodes(job_spec(["x"]), Cluster()).exclude == ()  # off by default


@pytest.mark.parametrize("options, words", [({"exclude": ["node 2"]}, "is not a node's name"),
                                            ({"exclude": ["-x"]}, "is not a node's name"),
                                            ({"avoid_failed_hours": -1}, "avoid_failed_hours"),
                                            ({"spares": 1}, "without a preflight")])
def test_bad_values_are_refused_where_the_job_is_made(options, words):
    with pytest.raises(SpecError, match=words):
        job_spec(["x"], **options)
