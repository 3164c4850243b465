"""One resolve for every entry point (issue 64): the command line and the Python API each build a
Request, and hpcjax.launch.request resolves it the same way, reading the profiles file once."""

from __future__ import annotations

import dataclasses

import pytest

import hpcjax
from hpcjax.cli import build_parser, split_command
from hpcjax.cli.options import request_from_args
from hpcjax.hosts.cluster import THIS_MACHINE
from hpcjax.job import profiles
from hpcjax.launch import request as front
from hpcjax.values.errors import SpecError, UsageError

PROFILES = """
[profiles.site]
host = "me@login.example.org"
remote_dir = "$SCRATCH/hj"
partition = "gpu"
nodes = 2
modules = ["cuda"]
env = { A = "1" }
"""


def parsed(*argv: str):
    """`hpcjax submit ARGV` as the command line parses it: its options and its command."""
    options, command = split_command(["submit", *argv])
    return build_parser("submit").parse_args(options), command


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.delenv("HPCJAX_CLUSTER", raising=False)
    path = tmp_path / "profiles.toml"
    path.write_text(PROFILES)
    return str(path)


def test_the_command_line_and_the_api_ask_alike_and_are_resolved_alike(site):
    args, command = parsed("--profile", "site", "--profile-file", site, "--gpus-per-node", "4", "--module", "nccl",
                           "--env", "B=2", "--", "python", "t.py")
    asked = request_from_args(args, command)
    spec, cluster, values = front.job_and_cluster(asked)
    scaling = hpcjax.ScalingConfig(profile="site", profile_file=site, gpus_per_node=4, modules=["nccl"], env={"B": "2"})
    api_spec, api_cluster, _ = front.job_and_cluster(dataclasses.replace(scaling.request, command=("python", "t.py")))
    # the profile under what was given, once: scalars replaced, lists and tables added to
    for one in (spec, api_spec):
        assert (one.layout.name, one.partition, one.modules, dict(one.env)) == ("G8N2p8", "gpu", ("cuda", "nccl"),
                                                                                {"A": "1", "B": "2"})
        assert one.command == ("python", "t.py")
    assert cluster == api_cluster == scaling.cluster
    assert (cluster.destination, cluster.remote_dir, cluster.profile) == ("me@login.example.org", "$SCRATCH/hj", "site")
    assert values["host"] == "me@login.example.org"  # what the cluster and the shipping limit are read from
    # the verb's defaults apply only where neither the command line nor the profile says
    assert (spec.job_name, spec.time) == ("hpcjax", "01:00:00")


def test_the_profiles_file_is_read_once_per_resolve(site, monkeypatch):
    reads = []
    real = profiles.load

    def counted(path=None):
        reads.append(path)
        return real(path)

    monkeypatch.setattr(profiles, "load", counted)
    args, command = parsed("--profile", "site", "--profile-file", site, "--", "python", "t.py")
    front.job_and_cluster(request_from_args(args, command))
    assert len(reads) == 1, reads  # the job's profile; the cluster is its host, from the values read


def test_a_bad_value_is_named_as_each_entry_point_wrote_it(site):
    args, command = parsed("--gpus-per-node", "4", "--gpus-per-process", "3", "--", "python", "t.py")
    with pytest.raises(SpecError, match="--gpus-per-process 3"):
        front.job_and_cluster(request_from_args(args, command))
    with pytest.raises(SpecError, match=r"gpus_per_process=3"):
        hpcjax.ScalingConfig(gpus_per_node=4, gpus_per_process=3)
    args, command = parsed("--after", "12x", "--", "true")
    with pytest.raises(UsageError, match="--after '12x' is not a job id"):
        front.job_and_cluster(request_from_args(args, command))
    with pytest.raises(UsageError, match="after='12x' is not a job id"):
        front.job(front.Request(command=("true",), after="12x", python_api=True), {})


def test_a_sweep_and_its_dependencies_are_resolved_with_the_spec(site):
    args, command = parsed("--sweep", "lr=1,2", "--max-parallel", "1", "--after", "77:any", "--", "python", "t.py",
                           "--lr", "{lr}")
    spec = front.job_and_cluster(request_from_args(args, command))[0]
    assert (spec.array, spec.array_parallel, spec.after) == (2, 1, (("77", "any"),))
    assert spec.array_commands == (("python", "t.py", "--lr", "1"), ("python", "t.py", "--lr", "2"))
    args, command = parsed("--max-parallel", "2", "--", "true")
    with pytest.raises(UsageError, match="no --sweep is given"):
        front.job_and_cluster(request_from_args(args, command))


def test_where_a_job_goes_is_one_rule_for_both(site, monkeypatch):
    monkeypatch.setenv("HPCJAX_CLUSTER", "you@other.invalid")
    # a default names a cluster: the local backend runs here all the same
    assert front.where(front.Request(backend="local")) == THIS_MACHINE
    assert front.where(front.Request()).destination == "you@other.invalid"
    # named outright with the local backend: a contradiction, in each caller's words
    with pytest.raises(UsageError, match="--backend local runs on this machine"):
        front.where(front.Request(cluster="me@login", backend="local"))
    with pytest.raises(UsageError, match="backend='local' runs on this machine"):
        front.where(front.Request(cluster="me@login", backend="local", python_api=True))
    # --upload only where something is shipped
    args, command = parsed("--upload", "data", "--backend", "local", "--", "true")
    with pytest.raises(UsageError, match="--upload ships a local directory"):
        front.resolve(request_from_args(args, command))
