"""The resolve step, one for every entry point (issue 64). The command line (from argparse) and the
Python API (from ScalingConfig and RunConfig) each build only a `Request`: a frozen value of what
was asked, as it was written, and where each part came from. `resolve` turns it into a Submission,
once: the profile merged under what was given, the spec with its sweep and dependencies, the
cluster (this machine is a Cluster value too), the backend, the nodes to avoid, the tree that
travels, the hold. A change to how a submission is resolved is made here.

    request = Request(command=("python", "train.py"), given={"nodes": 2}, profile="ibex")
    sub = resolve(request)                  # launch.steps.submit(sub) runs it
    spec, cluster, values = job_and_cluster(request)   # what `render` needs, no backend chosen
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

from hpcjax.hosts.cluster import THIS_MACHINE, Cluster
from hpcjax.launch import AUTO
from hpcjax.values.errors import SpecError, UsageError


@dataclass(frozen=True)
class Request:
    """What an entry point asks for, before anything is resolved."""

    command: tuple = ()
    given: dict = field(default_factory=dict)  # the job options the caller gave (None: not given)
    # How the caller writes each job option (the command line: its flag), for the words of a refusal;
    # empty: as Python's keywords (`nodes=2`), which is how the spec already names them.
    flags: dict = field(default_factory=dict)
    defaults: dict = field(default_factory=dict)  # what neither the caller nor the profile sets: the verb's
    fields: dict = field(default_factory=dict)  # spec fields the entry point sets itself (the API's logs, name)
    profile: str | None = None
    profile_file: str | None = None
    # The cluster as named (a profile that names a host, an SSH destination, or a Cluster); None: the
    # profile's host, else $HPCJAX_CLUSTER, else this machine.
    cluster: str | Cluster | None = None
    remote_dir: str | None = None  # over the cluster's own
    backend: str | None = AUTO
    python_api: bool = False  # spelled as the API's arguments (backend='local', cluster=), else as options
    sweep: tuple = ()  # "NAME=V1,V2" texts: one job array, an element per combination
    max_parallel: int | None = None
    after: object = None  # "JOBID[:ok|:any]" texts, or handles with a job_id
    uploads: tuple = ()  # --upload's "PATH[:NAME]" texts
    travels: dict = field(default_factory=dict)  # the rest of the Submission (announce, hold, call, Data, ...)

    @property
    def named_cluster(self) -> bool:
        """The cluster was named outright (not by a default: a profile's host, $HPCJAX_CLUSTER)."""
        return isinstance(self.cluster, (str, Cluster))

    @property
    def cluster_word(self) -> str:
        return "cluster=" if self.python_api else "--cluster"


def options(request: Request) -> dict:
    """The profile's values (if a profile is named) under what was given: scalars replace, lists add.
    The profiles file is read once per process while it is unchanged (job.profiles.load)."""
    from hpcjax.job import profiles

    if request.profile_file and not request.profile and not request.named_cluster and not request.python_api:
        raise UsageError("--profile-file without --profile", "name the profile to apply: --profile NAME")
    values = profiles.resolve(request.profile, request.profile_file)[0] if request.profile else {}
    return profiles.with_overrides(values, request.given)


def job(request: Request, values: dict):
    """The JobSpec: `values` (options(request)) over the verb's defaults, with the entry point's own
    fields, its sweep and its dependencies. A bad value is named as the caller gave it."""
    from hpcjax.job import after, profiles, sweeps

    try:
        spec = profiles.build_spec(request.command, values, defaults=request.defaults)
    except SpecError as err:
        raise as_given(err, request, values) from None
    changes = dict(request.fields)
    if request.sweep:
        commands, combos = sweeps.expand(spec.command, list(request.sweep))
        changes.update(array=len(commands), array_parallel=request.max_parallel,
                       array_commands=tuple(commands), sweep=tuple(combos))
    elif request.max_parallel is not None:
        raise UsageError("--max-parallel limits the elements of a sweep, and no --sweep is given",
                         "add --sweep NAME=V1,V2 (and {NAME} in the command), or drop --max-parallel")
    if request.after is not None:
        changes["after"] = after.dependencies(request.after, after.ARGUMENT if request.python_api else after.OPTION)
    return dataclasses.replace(spec, **changes) if changes else spec


def where(request: Request, values: dict | None = None) -> Cluster:
    """The Cluster the request goes to: the one named, else the profile's host (in `values`), else
    $HPCJAX_CLUSTER, else this machine; the request's remote_dir over the cluster's own. A backend
    that runs here runs here: a cluster only a default named gives way to it, one named outright is
    a contradiction (hpcjax.backends.cluster_for, the one rule)."""
    from hpcjax.job import clusters

    backend, name = request.backend or AUTO, request.cluster
    if backend != AUTO:  # only then is the backends' table needed (render and status import none of it)
        from hpcjax import backends

        if name is None and backends.runs_here(backend):  # this machine's, whatever the defaults name
            return THIS_MACHINE
    if values is None:
        values = options(request) if request.profile else {}
    if isinstance(name, Cluster):
        cluster = name
    elif name is None or isinstance(name, str):
        cluster = clusters.cluster_named(name, values, request.profile_file, what=request.cluster_word,
                                         profile=request.profile)
    else:
        raise UsageError(f"cluster must be a profile name or an SSH destination, got {type(name).__name__}",
                         'e.g. ScalingConfig(cluster="me@login.example.org") or cluster="ibex" (a profile)')
    if backend != AUTO:
        cluster = backends.cluster_for(backend, cluster, named=request.named_cluster,
                                       spelled=backends.ARGUMENTS if request.python_api else backends.OPTIONS)
    if cluster.remote and request.remote_dir:
        cluster = dataclasses.replace(cluster, remote_dir=request.remote_dir)
    return cluster


def job_and_cluster(request: Request):
    """The spec, where it goes and the merged options, the profile read once: what `render` needs."""
    values = options(request)
    return job(request, values), where(request, values), values


def submission(request: Request, spec, cluster: Cluster, values: dict):
    """The Submission of what job_and_cluster(request) found: the backend, the nodes to avoid, the tree
    that travels (from a laptop), the uploads, the profile's shipping limit."""
    from hpcjax import launch
    from hpcjax.launch import uploads

    if request.uploads and not cluster.remote:
        raise UsageError("--upload ships a local directory to a cluster reached over SSH; this job runs "
                         "on this machine, where it reads the directory in place",
                         "drop --upload (give the program the path), or name the cluster: --cluster DEST")
    shipped = tuple(uploads.parse_upload(text) for text in request.uploads)
    backend = AUTO if request.backend is None else request.backend  # '' is refused there, with the valid ones
    return launch.submission(spec, backend, cluster, uploads=shipped,
                             limit_mb=values.get("ship_limit_mb"), **request.travels)


def resolve(request: Request):
    """The Submission a request asks for, resolved once (every entry point's one resolve step)."""
    spec, cluster, values = job_and_cluster(request)
    return submission(request, spec, cluster, values)


def as_given(err: SpecError, request: Request, values: dict) -> SpecError:
    """err with its fields named as the caller gave them: `gpus_per_process=3` becomes
    `--gpus-per-process 3` when the command line said it, else the profile that did is named, else
    the default is named as the flag that changes it. The API's keywords are the spec's own names."""
    from hpcjax.job import profiles

    if not request.flags:
        return err
    message = err.message
    for key in [k for k in err.fields if k in profiles.OPTIONS]:
        flag = request.flags.get(key, key)
        if request.given.get(key) is not None:
            message = flagged(message, {key: flag}) if "_" in key or f"{key}=" in message else \
                re.sub(rf"^{key}\b", flag, message)
        elif request.profile and values.get(key) is not None:
            path = Path(request.profile_file).expanduser() if request.profile_file else profiles.default_path()
            message += f" (set by {path}, profile {request.profile!r}, key {key})"
        else:  # not given anywhere: the default, named as the flag that changes it
            message = re.sub(rf"\b{key}=(\S+)", lambda m: f"{flag} {m[1]} (the default)", message)
    return SpecError(message, err.hint, field=err.fields)


def flagged(message: str, flags: dict) -> str:
    """message with Python field names written as the caller's flags (`flags`: name -> flag):
    `d_model=96` as `--d-model 96`; a bare name only when it has an underscore (never an English word)."""
    for name, flag in flags.items():
        message = re.sub(rf"\b{name}=", flag + " ", message)
        if "_" in name:
            message = re.sub(rf"(?<![-\w]){name}\b", flag, message)
    return message
