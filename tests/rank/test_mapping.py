"""The mapping SLURM environment -> DistributedEnv, as a table of environments."""

import pytest

from hpcjax.values.errors import LayoutError
from hpcjax.rank.start.mapping import PORT_BASE, resolve


def step(procid, localid, ntasks, nodelist="node[1-2]", job="1234", step_id="0", cvd=None, **extra):
    env = {"SLURM_JOB_ID": job, "SLURM_STEP_ID": step_id, "SLURM_PROCID": str(procid),
           "SLURM_LOCALID": str(localid), "SLURM_STEP_NUM_TASKS": str(ntasks),
           "SLURM_STEP_NODELIST": nodelist, "SLURM_NTASKS": str(ntasks)}
    if cvd is not None:
        env["CUDA_VISIBLE_DEVICES"] = cvd
    env.update(extra)
    return env


def layout(nodes, gpus, k):
    return {"HPCJAX_NODES": str(nodes), "HPCJAX_GPUS_PER_NODE": str(gpus), "HPCJAX_GPUS_PER_PROCESS": str(k)}


PORT_1234_0 = PORT_BASE + 16 * 1234
UUIDS = "GPU-0d5c1b2e-aaaa-bbbb-cccc-000000000001,GPU-0d5c1b2e-aaaa-bbbb-cccc-000000000002"
MIGS = "MIG-4b5e8f2a-1111-2222-3333-444444444444,MIG-4b5e8f2a-1111-2222-3333-555555555555"

# (id, environ, gpu_available, expected: {field: value})
TABLE = [
    ("no slurm at all", {}, False,
     dict(launcher="single", num_processes=1, process_id=0, coordinator_host="127.0.0.1", platform="cpu",
          local_device_ids=None)),
    ("G4N1p4 rank 2, SLURM bound one GPU", step(2, 2, 4, "node7", cvd="2", **layout(1, 4, 1)), True,
     dict(launcher="srun", num_processes=4, process_id=2, coordinator_host="node7", local_device_ids=(0,),
          platform="gpu", coordinator_port=PORT_1234_0)),
    ("G4N1p4 rank 3, all four visible", step(3, 3, 4, "node7", cvd="0,1,2,3", **layout(1, 4, 1)), True,
     dict(local_device_ids=(3,), devices_per_process=1)),
    ("G4N2p2 one process per node owns 2", step(1, 0, 2, cvd="0,1", **layout(2, 2, 2)), True,
     dict(num_processes=2, process_id=1, local_device_ids=(0, 1), devices_per_process=2,
          coordinator_host="node1")),
    ("G4N2p4 rank 3 on second node", step(3, 1, 4, cvd="1", **layout(2, 2, 1)), True,
     dict(process_id=3, local_device_ids=(0,), coordinator_host="node1")),
    ("G8N2p8 rank 7", step(7, 3, 8, cvd="3", **layout(2, 4, 1)), True,
     dict(num_processes=8, process_id=7, local_device_ids=(0,))),
    ("K=2 of 4 visible, second slice", step(1, 1, 4, cvd="0,1,2,3", **layout(2, 4, 2)), True,
     dict(local_device_ids=(2, 3), devices_per_process=2)),
    ("K=4 whole node visible", step(0, 0, 2, cvd="0,1,2,3", **layout(2, 4, 4)), True,
     dict(local_device_ids=(0, 1, 2, 3), devices_per_process=4)),
    ("GPU UUIDs count as entries", step(1, 1, 2, "n1", cvd=UUIDS, **layout(1, 2, 1)), True,
     dict(local_device_ids=(1,))),
    ("MIG ids count as entries", step(0, 0, 1, "n1", cvd=MIGS, **layout(1, 2, 2)), True,
     dict(local_device_ids=(0, 1), num_processes=1)),
    ("one UUID visible means ordinal 0", step(5, 1, 8, cvd=UUIDS.split(",")[1]), True,
     dict(local_device_ids=(0,))),
    ("nodelist node[5]", step(0, 0, 1, "node[5]"), True, dict(coordinator_host="node5")),
    ("nodelist with suffix", step(0, 0, 2, "node[1-2]-ib"), True, dict(coordinator_host="node1-ib")),
    ("nodelist two brackets", step(0, 0, 4, "rack[1-2]-n[01-02]"), True, dict(coordinator_host="rack1-n01")),
    ("nodelist zero padded", step(0, 0, 2, "gpu[008-009]"), True, dict(coordinator_host="gpu008")),
    ("nodelist comma list", step(0, 0, 3, "b17,a[3-4]"), True, dict(coordinator_host="b17")),
    ("port differs by step", step(0, 0, 1, "n1", step_id="3"), True, dict(coordinator_port=PORT_1234_0 + 3)),
    ("port differs by job", step(0, 0, 1, "n1", job="1235"), True, dict(coordinator_port=PORT_1234_0 + 16)),
    ("port stays below the ephemeral range", step(0, 0, 1, "n1", job="1399", step_id="15"), True,
     dict(coordinator_port=PORT_BASE + 16 * 1399 + 15)),
    ("JAX_COORDINATOR_PORT wins over the derived port",
     step(0, 0, 1, "n1", JAX_COORDINATOR_PORT="4567"), True, dict(coordinator_port=4567)),
    ("JAX_COORDINATOR_ADDRESS wins over the nodelist",
     step(1, 1, 2, "n1", JAX_COORDINATOR_ADDRESS="head.ib:7777"), True,
     dict(coordinator_host="head.ib", coordinator_port=7777, launcher="srun")),
    ("JAX_COORDINATOR_ADDRESS host only, port derived",
     step(0, 0, 1, "n1", JAX_COORDINATOR_ADDRESS="head"), True,
     dict(coordinator_host="head", coordinator_port=PORT_1234_0)),
    ("JAX_LOCAL_DEVICE_IDS wins", step(0, 0, 1, "n1", cvd="0,1", JAX_LOCAL_DEVICE_IDS="1"), True,
     dict(local_device_ids=(1,))),
    ("JAX_NUM_PROCESSES and JAX_PROCESS_ID win",
     step(0, 0, 4, JAX_NUM_PROCESSES="2", JAX_PROCESS_ID="1"), True, dict(num_processes=2, process_id=1)),
    ("JAX_* alone, no scheduler", {"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234", "JAX_NUM_PROCESSES": "2",
                                   "JAX_PROCESS_ID": "1"}, False,
     dict(launcher="jax-env", coordinator_host="10.0.0.1", num_processes=2, process_id=1)),
    ("JAX_* inside a job but outside srun", {"SLURM_JOB_ID": "9", "JAX_COORDINATOR_ADDRESS": "h:1",
                                             "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"}, False,
     dict(launcher="jax-env", num_processes=2)),
    ("SLURM_NTASKS when the step count is missing",
     {k: v for k, v in step(1, 1, 4).items() if k != "SLURM_STEP_NUM_TASKS"}, True, dict(num_processes=4)),
    ("submitit local executor", {"SUBMITIT_LOCAL_JOB_ID": "4321", "SUBMITIT_LOCAL_NTASKS": "4",
                                 "SUBMITIT_LOCAL_GLOBALID": "3", "SUBMITIT_LOCAL_LOCALID": "3",
                                 "CUDA_VISIBLE_DEVICES": ""}, False,
     dict(launcher="submitit-local", num_processes=4, process_id=3, coordinator_host="127.0.0.1",
          coordinator_port=PORT_BASE + 16 * (4321 % 1400), local_device_ids=None, platform="cpu")),
    ("local backend emulating 2 nodes x 4 GPUs, K=2",
     {"SUBMITIT_LOCAL_JOB_ID": "1", "SUBMITIT_LOCAL_NTASKS": "4", "SUBMITIT_LOCAL_GLOBALID": "2",
      "SUBMITIT_LOCAL_LOCALID": "0", "JAX_COORDINATOR_PORT": "5555", **layout(2, 4, 2)}, False,
     dict(num_processes=4, process_id=2, devices_per_process=2, coordinator_port=5555, local_device_ids=None)),
    ("CPU forced on a GPU machine", step(0, 0, 1, "n1", cvd="0", JAX_PLATFORMS="cpu"), True,
     dict(platform="cpu", local_device_ids=(0,))),
    ("HPCJAX_PLATFORM beats JAX_PLATFORMS", step(0, 0, 1, "n1", JAX_PLATFORMS="cuda", HPCJAX_PLATFORM="cpu"),
     True, dict(platform="cpu")),
    ("JAX_PLATFORMS=cuda means GPU", step(0, 0, 1, "n1", cvd="0", JAX_PLATFORMS="cuda,cpu"), False,
     dict(platform="gpu")),
    ("GPUs emulated when none is usable", step(1, 1, 8, cvd="1", **layout(2, 4, 1)), False,
     dict(platform="cpu", local_device_ids=(0,))),
    ("no CUDA_VISIBLE_DEVICES on GPU: slice of the node's GPUs",
     step(1, 1, 2, "n1", SLURM_GPUS_ON_NODE="4", **layout(1, 4, 2)), True, dict(local_device_ids=(2, 3))),
]


@pytest.mark.parametrize("environ, gpu, expected", [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_mapping_table(environ, gpu, expected):
    env = resolve(environ, gpu_available=gpu)
    for name, value in expected.items():
        assert getattr(env, name) == value, (name, env)


ERRORS = [
    ("python outside srun", {"SLURM_JOB_ID": "77", "SLURM_PROCID": "0", "SLURM_NTASKS": "8",
                             "HPCJAX_GPUS_PER_PROCESS": "1"},
     "outside an srun step", "srun --gpus-per-task=1"),
    ("one GPU per process, more ranks than GPUs", step(4, 4, 8, cvd="0,1,2,3"),
     "needs a GPU of its own but only 4 are visible", "#SBATCH --gpus-per-node"),
    ("K=2 but only 3 visible", step(1, 1, 4, cvd="0,1,2", **layout(2, 4, 2)),
     "needs GPUs 2..3 (2 per process) but only 3 are visible", "srun --gpus-per-task=2"),
    ("layout needs 8 processes, SLURM started 4", step(0, 0, 4, cvd="0", **layout(2, 4, 1)),
     "needs 8 processes but 4 were started", "#SBATCH --ntasks-per-node=4"),
    ("layout needs 2 nodes, step has 1", step(0, 0, 8, cvd="0", SLURM_STEP_NUM_NODES="1", **layout(2, 4, 1)),
     "needs 2 nodes but the step runs on 1", "#SBATCH --nodes=2"),
    ("process id out of range", step(0, 0, 4, JAX_PROCESS_ID="9"), "outside 0..3", "JAX_PROCESS_ID"),
    ("garbage integer", step(0, 0, 4, SLURM_STEP_NUM_TASKS="four"), "is not an integer", "whole number"),
    ("bad JAX_LOCAL_DEVICE_IDS", step(0, 0, 1, JAX_LOCAL_DEVICE_IDS="a,b"), "not a comma-separated", "0,1"),
    ("bad nodelist", step(0, 0, 1, "node[1-"), "cannot read hostlist", "node[1-4]"),
    ("JAX_LOCAL_DEVICE_IDS beyond the visible GPUs (jax#23452)",
     step(3, 3, 4, cvd="3", JAX_LOCAL_DEVICE_IDS="3"), "names GPU ordinal 3 but this task sees 1", "use 0..0"),
]


@pytest.mark.parametrize("environ, message, hint", [row[1:] for row in ERRORS], ids=[row[0] for row in ERRORS])
def test_mapping_errors(environ, message, hint):
    with pytest.raises(LayoutError) as err:
        resolve(environ, gpu_available=True)
    assert message in err.value.message and hint in err.value.hint


def test_table_is_large_enough():
    assert len(TABLE) + len(ERRORS) >= 30


def test_explicit_arguments_beat_everything():
    env = resolve(step(3, 3, 4, JAX_COORDINATOR_ADDRESS="x:1", JAX_PROCESS_ID="2"), gpu_available=True,
                  coordinator_address="head:9", num_processes=4, process_id=1, local_device_ids=[5],
                  devices_per_process=1, platform="cpu")
    assert (env.coordinator_address, env.process_id, env.local_device_ids, env.platform) == \
        ("head:9", 1, (5,), "cpu")
    assert env.sources["process_id"] == "argument"


def test_every_value_says_where_it_came_from():
    env = resolve(step(1, 1, 8, cvd="1", **layout(2, 4, 1)), gpu_available=False)
    text = env.explain()
    assert "SLURM_STEP_NODELIST=node[1-2]" in text and "derived from job 1234 step 0" in text
    assert "SLURM_PROCID" in text and "emulated" in text
    assert set(env.sources) == {"num_processes", "process_id", "coordinator", "devices_per_process",
                                "platform", "local_device_ids"}


@pytest.mark.parametrize("environ, rank, node", [
    ({**step(0, 0, 8, "rack[1-2]-n[01-02]"), **layout(4, 4, 2)}, 5, "rack2-n01"),  # 2 tasks per node: the 3rd node
    ({**step(0, 0, 4, "node[1-2]"), **layout(2, 2, 1)}, 3, "node2"),
    ({"SLURM_JOB_NODELIST": "node[3-4]", **layout(2, 2, 1)}, 1, "node3"),  # no step's list: the job's
    ({**step(0, 0, 4, "node[1-2]"), **layout(2, 2, 1)}, 7, None),  # beyond the list
    ({**step(0, 0, 4, "node[1-2"), **layout(2, 2, 1)}, 3, None),  # not a nodelist
    (step(0, 0, 4, "node[1-2]"), 3, None),  # no layout exported
    ({**step(0, 0, 4, "localhost"), **layout(2, 2, 1), "HPCJAX_NODE_NAME": "local0"}, 3, "local1"),  # local backend
])
def test_another_ranks_node_is_where_the_layout_places_it(environ, rank, node):
    """What the hang watch names for a held rank that could not answer (hpcjax.protocol.hangblame)."""
    from hpcjax.protocol.placement import rank_node

    assert rank_node(rank, environ) == node
