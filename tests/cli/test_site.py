"""`hpcjax site`'s readers and the profile it writes, on text in SLURM's formats (scontrol show
config, sinfo -o, sacctmgr -P, the node probe's KEY=VALUE lines) written here from their man pages:
a GPU type per node configuration, several partitions, accounts with QOS limits (the dev cluster has
one of each: its a100 partition, account physics, QOS gpu2). The verb itself reads the dev cluster
in tests/launch/test_site_cluster.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcjax.cli.site import profile_lines, profile_text, summary
from hpcjax.values.errors import ConfigError
from hpcjax.job import profiles
from hpcjax.slurm import commands, site

CONFIG = """Configuration data as of 2026-11-27T10:00:00
AccountingStorageType   = accounting_storage/slurmdbd
ClusterName             = ibex
GresTypes               = gpu
MpiDefault              = pmix
SelectType              = select/cons_tres
SLURM_VERSION           = 23.11.4
"""
SINFO = """batch*|up|14-00:00:00|120|40|380000|(null)
gpu|up|2-00:00:00|8|64|500000|gpu:a100:8(S:0-1)
gpu|up|2-00:00:00|4|64|500000|gpu:v100:4(S:0)
debug|up|1:00:00|2|40|380000|gpu:a100:2,gpu:v100:1
"""
ASSOC = "alpha||normal,gpu-long|normal||gres/gpu=16|\nbeta|gpu|normal|normal|||2-00:00:00\n"
QOS = "normal|gres/gpu=8|||\ngpu-long||gres/gpu=4|7-00:00:00|\n"
NODE = "node=gpu201-02\napptainer=apptainer version 1.2.5\ngpu=NVIDIA A100-SXM4-80GB, 535.104.05\n" \
       "gpu=NVIDIA A100-SXM4-80GB, 535.104.05\ncuda=12.2\nmodule=yes\nmodules=cuda/12.2\nmodules=jax/0.4.30\n"


def ibex(node: str = NODE, pyxis: bool = False) -> site.Site:
    return site.Site(config=site.read_config(CONFIG), partitions=site.read_partitions(SINFO),
                     associations=site.read_rows(ASSOC, commands.ASSOC_FIELDS),
                     qos={r["Name"]: r for r in site.read_rows(QOS, commands.QOS_FIELDS)},
                     node=site.read_node(node), pyxis=pyxis)


def test_the_readers_read_partitions_by_gpu_type_and_the_users_limits():
    found = ibex()
    assert found.version == (23, 11) and found.config["MpiDefault"] == "pmix"
    gpu = next(p for p in found.partitions if p.name == "gpu")
    assert (gpu.default, gpu.nodes, gpu.time_limit, gpu.gpus) == (False, 12, "2-00:00:00",
                                                                 (("a100", 8, 8), ("v100", 4, 4)))
    debug = next(p for p in found.partitions if p.name == "debug")
    assert debug.gpus == (("a100", 2, 2), ("v100", 1, 2))
    assert found.default_partition().name == "batch" and found.default_partition().gpus == ()
    assert [a["Account"] for a in found.associations] == ["alpha", "beta"]
    assert site.gpu_limit(found.qos["normal"]["MaxTRESPU"]) == 8 and site.gpu_limit("cpu=4") is None
    assert found.node["gpu"] == ["NVIDIA A100-SXM4-80GB, 535.104.05"] * 2 and found.node["cuda"] == ["12.2"]


def test_a_value_is_written_only_where_the_site_leaves_one_choice(tmp_path):
    text = profile_text("ibex", profile_lines(ibex(), None, "me@login.ibex"))
    # no partition with GPUs is SLURM's default, and there are two: listed, not chosen
    assert "# partition = ?: sinfo: partitions with GPUs, none SLURM's default: gpu, debug" in text
    assert "\nhost = \"me@login.ibex\"" in text
    assert "# account = ?: sacctmgr: yours are alpha, beta" in text
    assert "# qos normal: sacctmgr: limits MaxTRESPU gres/gpu=8" in text
    assert '\nruntime = "apptainer"  # the node: apptainer is its only container runtime' in text
    assert "# modules = [...]: the node's modules that JAX may need (pick): cuda/12.2, jax/0.4.30" in text
    chosen = profile_text("ibex", profile_lines(ibex(), "gpu", None))
    assert '\npartition = "gpu"  # --partition (12 nodes' in chosen
    assert "# gpus_per_node = ?: sinfo: gpu's nodes differ: 8 x a100:8, 4 x v100:4" in chosen
    assert "# gpu_type = ?: sinfo: gpu has GPUs of 2 kinds, a100, v100: a job may name one (--gpu-type)" in chosen
    path = tmp_path / "profiles.toml"
    profiles.add_section(path, "ibex", chosen)
    values, _ = profiles.resolve("ibex", path)
    assert (values["partition"], values["runtime"], "host" in values) == ("gpu", "apptainer", False)


def test_several_runtimes_are_listed_not_chosen_and_a_node_not_read_is_said():
    two = NODE + "charliecloud=0.38\nenroot=3.4.1\n"
    text = profile_text("x", profile_lines(ibex(two, pyxis=True), "gpu", None))
    assert "# runtime = ?: the node has apptainer, charliecloud, pyxis: pick one" in text
    unread = ibex("")
    unread.unread["node"] = "not probed (--no-node)"
    assert "runtime" not in profile_text("x", profile_lines(unread, "gpu", None))
    assert "not read: node: not probed (--no-node)" in summary(unread)


def test_a_profile_that_would_not_load_is_never_written(tmp_path):
    path = tmp_path / "profiles.toml"
    path.write_text('[profiles.old]\npartition = "a"\n')
    with pytest.raises(ConfigError):
        profiles.add_section(path, "bad", '\n[profiles.bad]\npartition = 3\n')
    assert path.read_text() == '[profiles.old]\npartition = "a"\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profiles.toml"]  # no trial file left


@pytest.mark.parametrize("where", ["/proc/no-such/profiles.toml", "/proc/version"])
def test_a_profiles_file_that_cannot_be_written_is_a_clear_error(where):
    """Found in this session's trial: a traceback from deep inside."""
    with pytest.raises(ConfigError, match="cannot write the profiles file"):
        profiles.add_section(Path(where), "x", '\n[profiles.x]\npartition = "a"\n')
