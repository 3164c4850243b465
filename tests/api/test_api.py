"""The Python API's checks, made before anything is written or submitted, and its
pure parts (the run's history across resumed attempts, Ray's num_workers)."""

import json

import pytest

import hpcjax
from hpcjax.api import session
from hpcjax.hosts.cluster import Cluster
from hpcjax.hosts.here import node_local_reason
from hpcjax.values.errors import SpecError, UsageError


def loop_with_config(config):
    return config


def test_a_non_callable_is_refused_by_trainer_and_remote():
    with pytest.raises(UsageError, match="train_loop_per_worker must be a function, got str"):
        hpcjax.Trainer("train.py")
    with pytest.raises(UsageError, match="hpcjax.remote decorates a function, got int") as raised:
        hpcjax.remote(nodes=1)(42)
    assert "@hpcjax.remote" in raised.value.hint


def test_a_layout_that_does_not_divide_gets_the_job_specs_own_error():
    with pytest.raises(SpecError) as raised:
        hpcjax.ScalingConfig(nodes=2, gpus_per_node=4, gpus_per_process=3)
    assert raised.value.message == "gpus_per_process=3 does not divide gpus_per_node=4"
    assert "valid values: 1, 2, 4" in raised.value.hint
    with pytest.raises(SpecError, match="malformed walltime"):
        hpcjax.remote(time="two hours")(loop_with_config)
    with pytest.raises(SpecError, match="unknown container runtime"):
        hpcjax.ScalingConfig(runtime="docker", image="x.sif")
    assert hpcjax.ScalingConfig(gpu_type="a100", partition="a100").spec.gpu_type == "a100"  # as --gpu-type
    with pytest.raises(SpecError, match="is not a GPU type name"):
        hpcjax.ScalingConfig(gpu_type="a100:4")


def test_ray_fields_map_onto_one_layout_or_are_refused():
    layout = hpcjax.ScalingConfig(num_workers=8, nodes=2).spec.layout
    assert (layout.nodes, layout.gpus_per_node, layout.gpus_per_process) == (2, 4, 1)
    layout = hpcjax.ScalingConfig(num_workers=2, nodes=2, resources_per_worker={"GPU": 4}).spec.layout
    assert (layout.nodes, layout.gpus_per_node, layout.gpus_per_process) == (2, 4, 4)
    with pytest.raises(UsageError, match="num_workers=3 does not divide over nodes=2"):
        hpcjax.ScalingConfig(num_workers=3, nodes=2)
    with pytest.raises(UsageError, match="means 4 GPUs per node, but gpus_per_node=2"):
        hpcjax.ScalingConfig(num_workers=8, nodes=2, gpus_per_node=2)
    for tpu in ({"use_tpu": True}, {"topology": "4x4"}, {"accelerator_type": "TPU-V6E"}):
        with pytest.raises(UsageError, match="SLURM GPU clusters only"):
            hpcjax.ScalingConfig(num_workers=4, **tpu)
    with pytest.raises(UsageError, match="unknown job option 'gpus'"):
        hpcjax.ScalingConfig(gpus=4)


def test_run_config_values_are_checked():
    with pytest.raises(UsageError, match="max_failures must be an integer >= 0, got -1"):
        hpcjax.RunConfig(max_failures=-1)
    with pytest.raises(UsageError, match="unknown backend 'k8s'"):
        hpcjax.RunConfig(backend="k8s")
    with pytest.raises(UsageError, match="not a plain file name"):
        hpcjax.RunConfig(name="a/b")
    with pytest.raises(UsageError, match="takes no argument"):
        hpcjax.Trainer(lambda: None, train_loop_config={"lr": 1})
    with pytest.raises(UsageError, match="scaling_config must be an hpcjax.ScalingConfig, got dict"):
        hpcjax.Trainer(loop_with_config, scaling_config={"nodes": 2})


def test_missing_data_and_node_local_storage_fail_before_anything_is_written(tmp_path, monkeypatch):
    with pytest.raises(UsageError, match="does not exist") as raised:
        hpcjax.Data(tmp_path / "no such dir")
    assert "existing file or directory" in raised.value.hint
    storage = tmp_path / "calls"
    two_nodes = hpcjax.remote(nodes=2, gpus_per_node=1, backend="slurm", storage_path=str(storage))(loop_with_config)
    with pytest.raises(UsageError, match="is not shared storage for a 2-node job: it is under /tmp") as raised:
        two_nodes.submit(1)
    assert "every node mounts" in raised.value.hint
    trainer = hpcjax.Trainer(loop_with_config, train_loop_config={},
                             scaling_config=hpcjax.ScalingConfig(nodes=2),
                             run_config=hpcjax.RunConfig(storage_path=str(storage), name="r", backend="slurm"))
    with pytest.raises(UsageError, match="not shared storage"):
        trainer.fit()
    assert not storage.exists()  # nothing written, nothing submitted
    monkeypatch.setenv("TMPDIR", "/scratch/local")
    assert "under /scratch/local" in node_local_reason("/scratch/local/x")
    assert node_local_reason("/root/x") == ""
    one_node = hpcjax.remote(nodes=1, backend="slurm", storage_path=str(storage))(loop_with_config)
    with pytest.raises(UsageError, match="map\\(\\) was given no arguments"):
        one_node.map([])
    with pytest.raises(UsageError, match="max_parallel must be an integer >= 1, got 0"):
        one_node.map([1], max_parallel=0)


def test_report_and_context_outside_a_job_say_where_they_belong():
    with pytest.raises(UsageError, match="outside a job hpcjax started"):
        hpcjax.report({"loss": 1.0})
    with pytest.raises(UsageError, match="outside a job hpcjax started"):
        hpcjax.get_context()


def test_history_keeps_the_reports_up_to_the_checkpoint_a_resumed_attempt_starts_from(tmp_path):
    lines = [{"attempt": 1, "start": 0}] + [{"attempt": 1, "metrics": {"e": e}} for e in range(7)]
    lines += [{"attempt": 2, "start": 5}] + [{"attempt": 2, "metrics": {"e": e}} for e in range(5, 9)]
    (tmp_path / session.REPORTS).write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"attempt": 2, "met')
    assert [m["e"] for m in session.history(tmp_path)] == list(range(9))
    assert session.next_attempt(tmp_path) == 3
    assert session.latest_checkpoint(tmp_path) is None


def test_reported_values_become_plain_numbers():
    import numpy as np

    assert session.plain_value({"loss": np.float32(0.5), "v": np.arange(3), "n": [np.int64(2)]}) == \
        {"loss": 0.5, "v": [0, 1, 2], "n": [2]}


def test_a_container_job_binds_the_storage_and_every_data_path_in_place(tmp_path):
    from hpcjax.containers.binds import in_place as with_binds
    from hpcjax.job.spec import Container

    image = tmp_path / "jax.sif"
    image.touch()
    container = Container(runtime="apptainer", image=str(image), binds=("/scratch:/scratch",))
    bound = with_binds(container, ["/shared/run", "/shared/my data", "/shared/run", "/scratch"])
    assert bound.binds == ("/scratch:/scratch", "/shared/run:/shared/run", "/shared/my data:/shared/my data")
    assert with_binds(Container(), ["/shared/run"]) == Container()


# --- from a laptop: what is decided before any connection --------------------------------
def laptop_profiles(tmp_path):
    path = tmp_path / "profiles.toml"
    path.write_text('[profiles.far]\nhost = "me@login.invalid"\nremote_dir = "$SCRATCH/hj"\n'
                    '[profiles.near]\npartition = "debug"\n')
    return path


def test_the_cluster_comes_from_cluster_then_the_profile_then_the_environment(tmp_path, monkeypatch):
    profiles = laptop_profiles(tmp_path)
    monkeypatch.delenv("HPCJAX_CLUSTER", raising=False)
    assert hpcjax.ScalingConfig().cluster == Cluster()  # this machine: a value, never None
    named = hpcjax.ScalingConfig(cluster="far", profile_file=str(profiles)).cluster
    assert (named.destination, named.remote_dir) == ("me@login.invalid", "$SCRATCH/hj")
    assert hpcjax.ScalingConfig(profile="far", profile_file=str(profiles)).cluster.destination == "me@login.invalid"
    assert hpcjax.ScalingConfig(cluster="you@other.invalid").cluster.destination == "you@other.invalid"
    monkeypatch.setenv("HPCJAX_PROFILES", str(profiles))
    monkeypatch.setenv("HPCJAX_CLUSTER", "far")
    from_env = hpcjax.ScalingConfig(nodes=2)
    assert from_env.cluster.destination == "me@login.invalid"
    # The local backend runs here: a default cluster gives way, a named one is a contradiction.
    assert from_env.going("local") == Cluster()
    assert from_env.going(None) == from_env.cluster
    with pytest.raises(UsageError, match="backend='local' runs on this machine, not on the cluster me@login"):
        hpcjax.remote(cluster="far", backend="local")(len)
    with pytest.raises(UsageError, match="the profile 'near' names no host"):
        hpcjax.ScalingConfig(cluster="near")
    with pytest.raises(UsageError, match="cluster must be a profile name or an SSH destination, got int"):
        hpcjax.ScalingConfig(cluster=3)


def test_storage_on_a_cluster_is_its_path_and_a_laptop_path_form_is_refused(tmp_path, monkeypatch):
    from hpcjax.api.configs import storage_dir
    from hpcjax.hosts import cluster as clusters

    far = clusters.Cluster("me@login.invalid", remote_dir="$SCRATCH/hj")
    monkeypatch.setitem(clusters._homes, (far.destination, far.ssh_options, far.remote_dir), "/scratch/me/hj")
    assert str(storage_dir(None, "hpcjax-calls", far)) == "/scratch/me/hj/hpcjax-calls"
    assert str(storage_dir("runs/a", "x", far)) == "/scratch/me/hj/runs/a"
    assert str(storage_dir("/project/runs", "x", far)) == "/project/runs"
    for bad in ("~/runs", "$WORK/runs"):
        with pytest.raises(UsageError, match="~ and \\$VARIABLES are the cluster's"):
            storage_dir(bad, "x", far)
    monkeypatch.chdir(tmp_path)
    assert storage_dir(None, "hpcjax-calls") == tmp_path.resolve() / "hpcjax-calls"
    assert str(hpcjax.RunConfig(name="r1").run_dir("f", far)) == "/scratch/me/hj/hpcjax-results/r1"


def test_data_on_the_cluster_is_named_with_a_prefix_and_must_be_absolute(tmp_path):
    there = hpcjax.Data("cluster:/shared/mnist")
    assert (there.path, there.on_cluster, repr(there)) == ("/shared/mnist", True, "Data('cluster:/shared/mnist')")
    here = hpcjax.Data(tmp_path)
    assert (here.path, here.on_cluster) == (str(tmp_path.resolve()), False)
    with pytest.raises(UsageError, match="on the cluster is not absolute"):
        hpcjax.Data("cluster:shared/mnist")
    with pytest.raises(UsageError, match="Data\\('cluster:/path/there'\\)"):
        hpcjax.Data(tmp_path / "not-here")


def test_the_callers_import_path_inside_the_tree_travels_relative_to_the_working_directory(tmp_path, monkeypatch):
    from hpcjax.api.submit import tree_sys_path

    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "notebooks").mkdir()
    monkeypatch.chdir(root / "notebooks")
    monkeypatch.setattr("sys.path", ["", str(root / "src"), str(root), "/usr/lib/python3/dist-packages",
                                     str(root / "src")])
    assert tree_sys_path(root) == [".", "../src", ".."]


def test_the_rank_the_outcome_blames_is_reported_not_another_ranks_consequence(tmp_path):
    """Issue 34: a Trainer job whose rank 3 hung; the hang watch ended it and the report blames rank
    3, but rank 6's collective raised when its peers were stopped, and fit() reported rank 6."""
    import pickle

    from hpcjax.api import folder
    from hpcjax.api.calls import RemoteError, read_result
    from hpcjax.hosts.files import LocalFiles
    from hpcjax.follow.outcome import Outcome, RankFailure

    folder.element_dir(tmp_path, 0).mkdir(parents=True)
    consequence = ("error", "Traceback ...\nValueError: Gloo AllGather failed: Connection closed by peer\n", None,
                   {"rank": 6, "host": "node2"})
    folder.result_path(tmp_path, 0, 6).write_bytes(pickle.dumps(consequence))
    hung = Outcome(job_id="42", state="FAILED", exit_code=124, stopped_by="hpcjax's hang watch",
                   failed=(RankFailure(3, "node1", "hung: stuck elsewhere than the others", "/l/42-rank3.log", ""),),
                   stopped=(0, 1, 2, 4, 5, 6, 7))
    with pytest.raises(RemoteError) as raised:
        read_result(tmp_path, 0, hung, LocalFiles())
    assert raised.value.rank == 3 and raised.value.host == "node1"
    assert "rank 3 on node1 failed: hung" in raised.value.message and "Gloo" not in raised.value.message
    # With no rank blamed by the outcome, a rank's own exception is the news.
    nobody = Outcome(job_id="42", state="FAILED", exit_code=1)
    with pytest.raises(RemoteError) as raised:
        read_result(tmp_path, 0, nobody, LocalFiles())
    assert raised.value.rank == 6 and "Gloo AllGather failed" in raised.value.message


def test_code_pickled_by_value_is_refused_only_where_the_clusters_python_differs():
    """A function of __main__ (or a lambda) travels as bytecode, which only the same Python minor
    version loads; one of an importable module travels by name. Across Pythons for real:
    tests/releases/test_cluster_python.py."""
    import json
    import sys

    from hpcjax.api import calls
    from hpcjax.api.submit import CallStage

    def local(x):
        return x

    assert calls.code_by_value(calls.pickled(local, [((1,), {})])[0])
    assert not calls.code_by_value(calls.pickled(json.dumps, [(("CodeType", "_builtin_type"), {})])[0])
    here, other = "%d.%d" % sys.version_info[:2], "3.%d" % (sys.version_info[1] + 2)
    stage = CallStage(local, [((1,), {})], None, "/tmp", "0")
    stage.check_python((0, here + "\n"), "c")  # the same Python: nothing to say
    stage.check_python((127, "python3: not found"), "c")  # no answer: left to the job
    with pytest.raises(UsageError, match=rf"local travels as code .* Python {here} here does not load in Python "
                                         rf"{other} on c") as refused:
        stage.check_python((0, other + "\n"), "c")
    assert refused.value.hint.startswith(f"align the two: run this from a Python {other} here")
    CallStage(json.dumps, [((1,), {})], None, "/tmp", "0").check_python((0, other), "c")  # by name: it crosses
