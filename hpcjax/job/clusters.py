"""Which cluster a name means: the command line's --cluster or the API's cluster= (a profile of the
profiles file that names a host, else an SSH destination), a profile's values, or a job record;
$HPCJAX_CLUSTER when none is named. This machine is `Cluster()`, a value like any other (never None)."""

from __future__ import annotations

import os
from pathlib import Path

from hpcjax.hosts.cluster import DEFAULT_REMOTE_DIR, THIS_MACHINE, Cluster
from hpcjax.job.profiles import CLUSTER_KEYS, load, resolve
from hpcjax.values.errors import ConfigError, UsageError

CLUSTER_ENV = "HPCJAX_CLUSTER"  # the cluster (a profile or an SSH destination) when none is named


def cluster_of(values: dict, destination: str | None = None, profile: str | None = None,
               profile_file: str | Path | None = None) -> Cluster:
    """The cluster a profile's values name (or `destination`, with the profile's other cluster
    keys); Cluster(): this machine. `profile`: the profile the values came from, in `profile_file`."""
    destination = destination or values.get("host")
    if not destination:
        return THIS_MACHINE
    named = profile if values.get("host") == destination else None
    return Cluster(destination, remote_dir=values.get("remote_dir", DEFAULT_REMOTE_DIR),
                   ssh_options=tuple(values.get("ssh_options", ())), python=values.get("python", "python3"),
                   profile=named, profile_file=str(profile_file) if named and profile_file else None)


def cluster_named(name: str | None, values: dict | None = None, profile_file: str | Path | None = None,
                  *, what: str = "--cluster", environ=os.environ, profile: str | None = None) -> Cluster:
    """The cluster `name` means (the command line's --cluster, the API's cluster=; when None,
    $HPCJAX_CLUSTER): a profile of the profiles file that names a host, else an SSH
    destination; the profile's other cluster keys (remote_dir, ssh_options, python) come
    along over `values`' (those of the job's profile, `profile`). Without a name: the cluster
    `values` name (a profile's host), or Cluster() for this machine."""
    values = dict(values or {})
    if name is not None and not name.strip():
        raise UsageError(f"{what} {name!r} names no cluster",
                         f"give a profile that names a host, or an SSH destination (user@login.example.org); "
                         f"leave {what} out to run on this machine")
    if not name and not values.get("host"):
        name, what = environ.get(CLUSTER_ENV) or None, CLUSTER_ENV
    if name:
        named = _profile_named(name, profile_file)
        if named is not None:
            if not named.get("host"):
                raise ConfigError(f"{what} {name}: the profile {name!r} names no host",
                                  f'add host = "user@login.example.org" to [profiles.{name}], or give an SSH '
                                  f"destination to {what}")
            values = {**values, **{k: v for k, v in named.items() if k in CLUSTER_KEYS}}
            name, profile = None, name
    return cluster_of(values, name, profile, Path(profile_file).expanduser().resolve() if profile_file else None)


def cluster_from_record(fields: dict | None, profile_file: str | Path | None = None) -> Cluster:
    """The cluster a job record names, reached as the user's own configuration says: through
    the profile it was named by (when that still names the same host), else as the bare SSH
    destination (~/.ssh/config applies). A record names a cluster, never how to reach it: its
    ssh options or Python, if an old or a hostile one holds them, are never used."""
    fields = fields if isinstance(fields, dict) else {}
    destination = fields.get("destination")
    if not destination:
        return THIS_MACHINE
    if fields.get("profile"):
        try:
            kept_file = fields.get("profile_file") if isinstance(fields.get("profile_file"), str) else None
            cluster = cluster_named(str(fields["profile"]), profile_file=profile_file or kept_file)
        except (ConfigError, UsageError):  # the profile is gone or changed: the destination alone
            cluster = THIS_MACHINE
        if cluster.destination == destination:
            return cluster
    remote_dir = fields.get("remote_dir") if isinstance(fields.get("remote_dir"), str) else DEFAULT_REMOTE_DIR
    return Cluster(destination, remote_dir=remote_dir)


def _profile_named(name: str, profile_file: str | Path | None) -> dict | None:
    """The profile `name` of the profiles file, or None when it is not one (an SSH destination)."""
    if "@" in name:
        return None
    try:
        path, found = load(profile_file)
    except ConfigError:
        if profile_file:
            raise
        return None  # no profiles file: the name is an SSH destination
    return resolve(name, path)[0] if name in found else None
