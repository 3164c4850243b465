"""The stage step: what a checked submission needs where it runs, made there; the spec given the
paths it has there.

  this machine   the log directory; a Python call's folder
  a cluster      over the one SSH connection, in as few round trips as it takes: the remote
                 directory and the places inside it (one shell, which also says what is there
                 already), hpcjax itself (once per version), a new snapshot of the working tree
                 (unchanged files hard-linked to the last one), the uploads (once per content), a
                 Python call's folder, and the links that put uploads and kept run directories
                 where the job looks. The job runs in its snapshot, with the shipped hpcjax first
                 on PYTHONPATH (and bound into containers): nothing of hpcjax is installed there.

A dry run stops before this step and only asks what the spec would be there (`as_there`).
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path, PurePosixPath

from hpcjax import __version__
from hpcjax.catalog.records import RECORDS_THERE
from hpcjax.containers import binds
from hpcjax.values.errors import HpcjaxError
from hpcjax.values.voice import say
from hpcjax.hosts import ship
from hpcjax.job.spec import JobSpec
from hpcjax.values.validate import make_directory


def stage(sub, probe):
    """Make what the job needs where it runs; the submission with its paths there (a new value)."""
    if sub.cluster.remote:
        return stage_there(sub, probe)
    make_directory(sub.spec.output_dir, "--output-dir")  # sbatch, and the ranks, write there
    sub = dataclasses.replace(sub, workdir=str(Path.cwd()), log_dir=str(Path(sub.spec.output_dir).resolve()))
    return sub.call.write(sub, None) if sub.call is not None else sub


def as_there(sub, home: str):
    """The submission as it would run there, for render and a dry run: nothing made or shipped."""
    spec = cluster_spec(sub.spec, home, ship.package_target(home), sub.cluster.python)
    return dataclasses.replace(sub, spec=spec, home_there=home, workdir=home, log_dir=log_dir_of(spec, home))


def stage_there(sub, probe):
    home = probe.home
    cluster, host = sub.cluster, sub.cluster.host()
    kept = sub.kept_run_dirs()
    found = survey(sub, home)
    package, sent_now = ship.ship_hpcjax(host, home, present="package" in found)
    if sent_now:
        say(f"shipped hpcjax {__version__} to {cluster.name}:{package} (once per version; the ranks import it)")
    snapshot = home
    if sub.ship_code:
        shipped = ship.ship_tree(host, home, sub.tree, list(probe.tree_files), probe.tree_bytes,
                                 previous=found["snapshots"])
        say(f"shipped {sub.tree} to {cluster.name}:{shipped.path} ({shipped.files} files, "
            f"{shipped.total_bytes / 1e6:.1f} MB; sent {shipped.sent_files} file(s), {shipped.sent_bytes} bytes)")
        snapshot = str(PurePosixPath(shipped.path) / ship.relative_cwd(sub.tree))
    stored = {str(local): upload(cluster, home, local, found) for local in sub.to_upload()}
    run_dirs = {named: f"{home}/runs/{ship.project_name(sub.tree)}/{path}" for named, path in kept.items()}
    links = [(stored[str(local)], name) for local, name in sub.uploads] + [(d, n) for n, d in run_dirs.items()]
    if links:
        link = 'cd -- "$1" && shift && while [ $# -gt 1 ]; do mkdir -p -- "$1" "$(dirname -- "$2")" && ' \
               'ln -sfn -- "$1" "$2" && shift 2; done'
        done = host.run(["sh", "-c", link, "sh", snapshot, *[x for pair in links for x in pair]])
        if done.returncode != 0:
            raise HpcjaxError(f"cannot link the uploads and run directories into {snapshot} on {cluster.name}: "
                              f"{done.stderr.strip()}", "check the remote directory is writable there")
    sub = dataclasses.replace(sub, data_there=stored, run_dirs=run_dirs)
    if sub.call is not None:
        sub = sub.call.write(sub, home)
    bound = list(stored.values()) + list(run_dirs.values()) + list(sub.bound_there)
    spec = dataclasses.replace(sub.spec, container=binds.in_place(sub.spec.container, bound)) if bound else sub.spec
    spec = cluster_spec(spec, home, package, cluster.python)
    return dataclasses.replace(sub, spec=spec, home_there=home, workdir=snapshot, log_dir=log_dir_of(spec, snapshot))


def survey(sub, home: str) -> dict:
    """One shell there: the places the job needs made, and what is there already (hpcjax's package,
    the project's earlier snapshots, each upload's stored copy)."""
    project = f"{home}/code/{ship.project_name(sub.tree)}"
    targets = {str(local): ship.upload_target(home, local) for local in sub.to_upload()}
    script = [f"mkdir -p -- {shlex.quote(home)}/jobs {shlex.quote(home)}/{RECORDS_THERE} {shlex.quote(home)}/data "
              f"{shlex.quote(project)} {' '.join(map(shlex.quote, sub.dirs_there))} || exit 3",
              f"[ -e {shlex.quote(ship.package_target(home))}/{ship.DONE} ] && echo package",
              f"for s in {shlex.quote(project)}/*; do [ -d \"$s\" ] && echo \"snapshot ${{s##*/}}\"; done"]
    script += [f"[ -e {shlex.quote(t)}/{ship.DONE} ] && echo {shlex.quote('upload ' + t)}" for t in targets.values()]
    done = sub.cluster.host().run(["sh", "-c", "; ".join(script) + "; true"])
    if done.returncode != 0:
        raise HpcjaxError(f"cannot make hpcjax's directories in {home} on {sub.cluster.name}: {done.stderr.strip()}",
                          "free space or fix permissions there (quota -s; ls -ld on remote_dir)")
    lines = done.stdout.splitlines()
    found = {"snapshots": sorted(line.split(" ", 1)[1] for line in lines if line.startswith("snapshot ")),
             "uploads": {line.split(" ", 1)[1] for line in lines if line.startswith("upload ")}}
    if "package" in lines:
        found["package"] = True
    return found


def upload(cluster, home: str, local: Path, found: dict) -> str:
    """A local directory (or file) on the cluster, stored by content (sent once); its path there."""
    shipped = ship.upload(cluster.host(), home, local, present=ship.upload_target(home, local) in found["uploads"])
    if shipped.sent_files:
        say(f"uploaded {local} to {cluster.name}:{shipped.path} ({shipped.files} files, "
            f"{shipped.total_bytes / 1e6:.1f} MB)")
    else:
        say(f"{local} is on {cluster.name} already ({shipped.path}): nothing sent")
    return shipped.path


def cluster_spec(spec: JobSpec, home: str, package: str, python: str) -> JobSpec:
    """The spec as it runs there: logs under the remote directory, the shipped hpcjax first on
    PYTHONPATH and bound into a container, the cluster's Python for hpcjax's own programs."""
    output_dir = spec.output_dir if spec.output_dir.startswith("/") else f"{home}/{spec.output_dir}"
    env = dict(spec.env)
    env["PYTHONPATH"] = package + (f":{env['PYTHONPATH']}" if env.get("PYTHONPATH") else "")
    env[binds.BIND_SOURCE_ENV] = f"{package}/hpcjax"
    return dataclasses.replace(spec, output_dir=output_dir, env=tuple(env.items()), cluster_python=python)


def log_dir_of(spec: JobSpec, workdir: str) -> str:
    return spec.output_dir if spec.output_dir.startswith("/") else f"{workdir}/{spec.output_dir}"
