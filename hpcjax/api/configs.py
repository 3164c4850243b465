"""The Python API's configuration, in Ray Train's names, built on JobSpec: the same
validation and the same messages as the command line, raised when the config is made.

    ScalingConfig(nodes=2, gpus_per_node=4, time="02:00:00", partition="gpu", ...)
    RunConfig(storage_path="/shared/runs", name="exp1", backend=None, max_failures=1)
    Data("/shared/datasets/mnist")        # an argument that reaches the function as a str path
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from hpcjax.values.errors import UsageError
from hpcjax.hosts.cluster import THIS_MACHINE, Cluster
from hpcjax.job import profiles
from hpcjax.launch import request
from hpcjax.values.validate import require_int, resolved_local_path

# Ray's fields that describe TPU slices or Ray's own scheduler: no meaning on SLURM.
NOT_ON_SLURM = ("use_tpu", "topology", "accelerator_type", "placement_strategy", "trainer_resources")
ON_CLUSTER = "cluster:"  # Data("cluster:/path"): a path of the cluster's, not of this machine


class ScalingConfig:
    """The layout and every job option the CLI has (partition, account, time, image,
    runtime, binds, modules, env, profile, ...), checked at once through JobSpec.
    Ray's `num_workers` (processes) and `resources_per_worker={"GPU": K}` are accepted
    when they describe one layout."""

    def __init__(self, *, nodes: int | None = None, gpus_per_node: int | None = None,
                 gpus_per_process: int | None = None, num_workers: int | None = None,
                 resources_per_worker: dict | None = None, use_gpu: bool | None = None,
                 profile: str | None = None, profile_file: str | None = None,
                 cluster: str | Cluster | None = None, **options) -> None:
        for name in NOT_ON_SLURM:
            if name in options:
                raise UsageError(f"ScalingConfig({name}=...) is Ray's TPU or scheduler setting; hpcjax runs "
                                 "on SLURM GPU clusters only",
                                 "describe the layout with nodes=, gpus_per_node= (and gpus_per_process=)")
        if use_gpu is False:
            raise UsageError("ScalingConfig(use_gpu=False): hpcjax runs one process per GPU (or per K GPUs)",
                             "leave use_gpu out; on a machine without GPUs they are emulated as CPU devices")
        if resources_per_worker is not None:
            unknown = set(resources_per_worker) - {"GPU", "CPU"}
            if unknown:
                raise UsageError(f"resources_per_worker has {sorted(unknown)}: only GPU and CPU are known",
                                 'e.g. resources_per_worker={"GPU": 4}')
            gpus_per_process = gpus_per_process or resources_per_worker.get("GPU")
            options.setdefault("cpus_per_task", resources_per_worker.get("CPU"))
        if num_workers is not None:
            nodes, gpus_per_node = layout_from_workers(num_workers, nodes, gpus_per_node, gpus_per_process or 1)
        self.options = {k: v for k, v in dict(options, nodes=nodes, gpus_per_node=gpus_per_node,
                                              gpus_per_process=gpus_per_process).items() if v is not None}
        for key, value in self.options.items():  # the kind of each (env a dict, modules a list, ...)
            if key in profiles.OPTIONS:
                profiles.check_value(key, value, f"ScalingConfig({key}=...)", sequences=(list, tuple),
                                     example=f"ScalingConfig({key}={python_example(key)})")
        self.profile, self.profile_file = profile, profile_file
        # What the API asks, as the command line's is (hpcjax.launch.request: one resolve for both). The
        # command is the call's, set when it is submitted; everything else is checked now: the options
        # over the profile, and where the job goes (`cluster`: a profile naming a host, an SSH
        # destination, or a Cluster; else the profile's host, else $HPCJAX_CLUSTER; else this machine).
        self.request = request.Request(command=("python",), given=dict(self.options), profile=profile,
                                       profile_file=profile_file, cluster=cluster, python_api=True)
        values = request.options(self.request)
        self.spec = request.job(self.request, values)
        self.cluster = request.where(self.request, values)

    @property
    def num_workers(self) -> int:
        return self.spec.layout.num_processes

    def going(self, backend: str | None) -> Cluster:
        """Where a job of this config goes on `backend`: the local backend runs here (a cluster that
        only a default named gives way to it; one named with cluster= is a contradiction, refused)."""
        return request.where(dataclasses.replace(self.request, backend=backend or request.AUTO))

    def __repr__(self) -> str:
        return f"ScalingConfig({self.spec.layout.name}, {self.options})"


def python_example(key: str) -> str:
    """An option's value as Python spells it, for a hint."""
    return ('{"XLA_FLAGS": "..."}' if key in profiles.TABLES else '["..."]' if key in profiles.LISTS else
            "True" if key in profiles.BOOLS else "2" if key in profiles.INTS else '"..."')


def layout_from_workers(workers: int, nodes: int | None, gpus_per_node: int | None,
                        gpus_per_process: int) -> tuple[int, int]:
    """Ray's num_workers (processes) as nodes x GPUs per node."""
    require_int("num_workers", workers, 1, "the number of processes, e.g. num_workers=8")
    nodes = nodes or 1
    if workers % nodes:
        raise UsageError(f"num_workers={workers} does not divide over nodes={nodes}",
                         "every node runs the same number of processes: make num_workers a multiple of nodes")
    derived = workers // nodes * gpus_per_process
    if gpus_per_node is not None and gpus_per_node != derived:
        raise UsageError(f"num_workers={workers} over {nodes} node(s) means {derived} GPUs per node, "
                         f"but gpus_per_node={gpus_per_node}",
                         "give either num_workers or gpus_per_node, not both")
    return nodes, derived


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Where a run keeps its results, checkpoints and logs (storage_path/name), which
    backend runs it, and how many failed or preempted jobs are resubmitted."""

    storage_path: str | None = None  # default: ./hpcjax-results
    name: str | None = None  # default: the function's name and the time
    backend: str | None = None  # "slurm", "local", or None: SLURM where sbatch exists
    max_failures: int = 0

    def __post_init__(self) -> None:
        if self.backend is not None:
            from hpcjax import backends

            if not isinstance(self.backend, str):
                raise UsageError(f"backend must be a name, got {self.backend!r}",
                                 f"valid backends: {', '.join((backends.AUTO, *backends.names()))}, or None")
            if self.backend != backends.AUTO:
                backends.get(self.backend)  # an unknown name lists the valid ones
        require_int("max_failures", self.max_failures, 0, "how many times a failed job is resubmitted, e.g. 1")
        if self.name is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", str(self.name)):
            raise UsageError(f"run name {self.name!r} is not a plain file name",
                             "use letters, digits, '.', '_' and '-', e.g. name='mnist-run1'")

    def run_dir(self, default_name: str, cluster: Cluster = THIS_MACHINE) -> Path | PurePosixPath:
        name = self.name or f"{default_name}-{time.strftime('%Y%m%d-%H%M%S')}"
        return storage_dir(self.storage_path, "hpcjax-results", cluster) / name


def storage_dir(storage_path: str | None, default: str, cluster: Cluster = THIS_MACHINE) -> Path | PurePosixPath:
    """Where calls and runs keep their files: on this machine, resolved; on a cluster reached
    over SSH, a path there (a relative one under its remote directory)."""
    if not cluster.remote:
        return resolved_local_path(str(storage_path or default), "storage_path")
    path = str(storage_path or default)
    if path.startswith("~") or "$" in path:
        raise UsageError(f"storage_path {path!r} on {cluster.name}: ~ and $VARIABLES are the cluster's, "
                         "and hpcjax does not expand them here",
                         "give an absolute path there, or a relative one (under the profile's remote_dir)")
    return PurePosixPath(path) if path.startswith("/") else PurePosixPath(cluster.home()) / path


@dataclass
class Result:
    """What fit() returns (Ray Train's names)."""

    metrics: dict | None  # the last report
    metrics_history: list[dict]
    checkpoint: object | None  # hpcjax.Checkpoint, the latest reported
    path: str  # storage_path/name
    error: Exception | None = None  # hpcjax.RemoteError: rank, host, remote traceback
    jobs: list[str] = field(default_factory=list)  # the job ids, one per attempt
    starts: list[dict] = field(default_factory=list)  # each attempt's time to its first report (session.starts)


class Data:
    """A file or directory the function reads: it arrives as a plain str path that exists
    where the function runs (in place on shared storage; bound into a container).

        Data("/shared/mnist")          # on this machine, which the nodes share (the login node)
        Data("./mnist")                # from a laptop: uploaded to the cluster once per content
        Data("cluster:/shared/mnist")  # already on the cluster: used in place
    """

    def __init__(self, path: str | os.PathLike) -> None:
        try:
            text = os.fspath(path)
        except TypeError:
            text = None
        if not isinstance(text, str) or not text.strip() or "\0" in text:
            raise UsageError(f"Data({path!r}) names no path", "give a directory or file: Data('./my_dataset'), "
                             "or one on the cluster: Data('cluster:/shared/mnist')")
        self.on_cluster = isinstance(text, str) and text.startswith(ON_CLUSTER)
        if self.on_cluster:  # checked on the cluster when the job is submitted
            text = text[len(ON_CLUSTER):]
            if not text.startswith("/"):
                raise UsageError(f"Data path {str(path)!r} on the cluster is not absolute",
                                 "name it from the root of the cluster's filesystem, e.g. "
                                 "Data('cluster:/shared/datasets/mnist')")
            self.path = text
        else:
            resolved = resolved_local_path(text, "Data path")
            if not resolved.exists():
                raise UsageError(f"Data path {str(path)!r} does not exist (resolved to {resolved})",
                                 "give an existing file or directory; one that is on the cluster only is "
                                 "written Data('cluster:/path/there')")
            self.path = str(resolved)
        if "," in self.path or ":" in self.path:
            raise UsageError(f"Data path {self.path!r} contains ',' or ':', which container binds split on",
                             "rename the directory or link it from a plain path")

    def __repr__(self) -> str:
        return f"Data({(ON_CLUSTER if self.on_cluster else '') + self.path!r})"
