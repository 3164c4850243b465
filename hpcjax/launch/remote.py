"""Submitting to a cluster from a laptop, over SSH: check the cluster, ship hpcjax and the
working tree (hosts.ship), render the script for the cluster's paths, and sbatch it there.

Everything that can be checked is checked before anything is shipped or submitted: the
connection (within seconds), sbatch and rsync on the login node, the remote directory is
writable, the bind sources exist there. The job then runs in its own snapshot of the tree
(`sbatch --chdir`), with the shipped hpcjax first on PYTHONPATH (and bound into containers),
so nothing needs to be installed on the cluster but a Python with JAX, or an image.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import re
import time
from pathlib import Path, PurePosixPath

from hpcjax import __version__
from hpcjax.catalog import records
from hpcjax.containers import binds
from hpcjax.errors import HpcjaxError, SlurmNotFound, SubmitError, UsageError
from hpcjax.hosts import ship
from hpcjax.hosts.cluster import Cluster
from hpcjax.launch.render import render_sbatch
from hpcjax.launch.run import say
from hpcjax.launch.spec import JobSpec
from hpcjax.rundir import run_dir_argument
from hpcjax.validate import local_path

RECORDS = "records"  # <remote_dir>/records/<job>.json: the job's record, on the cluster itself
UPLOAD_NAME = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")  # where an upload appears for the job


def parse_upload(text: str, cwd: Path | None = None) -> tuple[Path, str]:
    """--upload LOCAL[:NAME]: a local directory (or file) and the relative path where the job
    finds it in its working directory (default: LOCAL's own path there when LOCAL is below the
    working directory, else its name), so code that opens ./data on the laptop opens the same
    path on the cluster."""
    cwd = (cwd or Path.cwd()).resolve()
    form = "--upload ./data or --upload ~/datasets/mnist:data/mnist"
    if not text.strip():
        raise UsageError("--upload '' names no directory (it would ship the whole working directory)",
                         f"give a local directory or file, optionally with the name the job sees: {form}")
    if "\0" in text:
        raise UsageError(f"--upload {text!r} holds a NUL byte, which no path does", f"e.g. {form}")
    local, name = text, ""
    if not local_path(text, "--upload").exists() and ":" in text:
        local, name = text.rsplit(":", 1)
    # The name is the path as given (a link named ./data is seen as ./data), the content what it leads to.
    given = Path(os.path.abspath(local_path(local, "--upload")))
    path = given.resolve()
    if not local.strip() or not path.exists():
        raise UsageError(f"--upload {text}: {local or repr(local)} does not exist on this machine",
                         f"give a local directory or file, optionally with the name the job sees: {form}")
    if not name:
        name = str(given.relative_to(cwd)) if cwd in given.parents else given.name
    check_links(path, f"--upload {text}")
    if not UPLOAD_NAME.fullmatch(name) or ".." in name.split("/"):
        raise UsageError(f"--upload {text}: {name!r} is not a relative path the job can be given",
                         "letters, digits, '.', '_', '-' and '/', below the working directory, e.g. data/mnist")
    return path, name


def check_links(path: Path, what: str) -> None:
    """Refuse data whose links lead out of it: as links, the job would find the cluster's files
    at those paths, or none (rsync sends links as links)."""
    outside = ship.outside_links(path)
    if outside:
        raise UsageError(f"{what}: {len(outside)} link(s) in it lead outside it: {', '.join(outside[:3])}",
                         "the job would find the cluster's files at those paths, or none: send what they point "
                         "to as well (--upload TARGET:NAME, or another Data), or replace the links by copies")


@dataclasses.dataclass(frozen=True)
class Prepared:
    spec: JobSpec  # with the cluster's paths
    snapshot: str  # the job's working directory there
    package: str  # the shipped hpcjax (its parent directory)
    run_dirs: tuple[tuple[str, str], ...] = ()  # (a relative --run-dir, where it is kept there)


def relative_run_dirs(spec: JobSpec, root: Path) -> dict[str, str]:
    """The relative run directories the job's command(s) name, each as its path below the tree's
    root. A snapshot is new at every submission: these are kept beside the snapshots instead (one
    per project and path) and linked into each, so a relaunch or a requeue resumes, as it does in a
    directory on the cluster."""
    here = PurePosixPath(ship.relative_cwd(root))
    found = {}
    for command in spec.array_commands or (spec.command,):
        named = run_dir_argument(command)
        if named and not named.startswith(("/", "~", "$")) and posixpath.normpath(named) != ".":
            path = posixpath.normpath(str(here / named))
            if path not in (".", "..") and not path.startswith("../"):  # what leaves the tree is the job's affair
                found[named] = path
    return found


def check_cluster(cluster: Cluster, *, create: bool = True) -> str:
    """Connect, and find what hpcjax needs on the login node; the remote directory, expanded
    (made there unless create=False: render and a dry run leave nothing behind)."""
    host = cluster.host()
    host.connect()  # a wrong host, a refused key: a clear error within seconds
    missing = host.run(["sh", "-c", "for p in sbatch rsync; do command -v $p >/dev/null || echo $p; done"])
    if "sbatch" in missing.stdout.split():
        raise SlurmNotFound(f"`sbatch` is not on the PATH of {cluster.name} in a login shell",
                            "check `ssh DEST bash -lc 'command -v sbatch'`; a site module may be needed in "
                            "~/.bash_profile, or name the login node of the SLURM cluster".replace("DEST",
                                                                                            cluster.destination))
    if "rsync" in missing.stdout.split():
        raise HpcjaxError(f"`rsync` is not installed on {cluster.name}", "hpcjax ships code with rsync; ask "
                          "the site for it, or run hpcjax on the login node itself")
    return cluster.home(create=create)


def cluster_spec(spec: JobSpec, cluster: Cluster, home: str, package: str) -> JobSpec:
    """The spec as it runs there: logs under the remote directory, the shipped hpcjax first on
    PYTHONPATH and bound into a container."""
    output_dir = spec.output_dir if spec.output_dir.startswith("/") else f"{home}/{spec.output_dir}"
    env = dict(spec.env)
    env["PYTHONPATH"] = package + (f":{env['PYTHONPATH']}" if env.get("PYTHONPATH") else "")
    env[binds.BIND_SOURCE_ENV] = f"{package}/hpcjax"
    return dataclasses.replace(spec, output_dir=output_dir, env=tuple(env.items()))


def missing_paths(cluster: Cluster, paths: list[str]) -> list[str]:
    """Those of `paths` that do not exist on the cluster (one round trip for all)."""
    if not paths:
        return []
    done = cluster.host().run(["sh", "-c", 'for p; do [ -e "$p" ] || printf "%s\\n" "$p"; done', "sh", *paths])
    return done.stdout.split("\n")[:-1]


def as_there(spec: JobSpec, cluster: Cluster) -> JobSpec:
    """The spec as `submit` would run it on the cluster, for render and --dry-run: connects and
    checks, ships nothing, makes nothing there."""
    home = check_cluster(cluster, create=False)
    check_binds(cluster, spec)
    return cluster_spec(spec, cluster, home, ship.package_target(home))


def check_binds(cluster: Cluster, spec: JobSpec) -> None:
    """The image file and the bind sources exist on the cluster (they are its paths, not this machine's)."""
    image, sources = binds.paths_to_check(spec)
    missing = missing_paths(cluster, ([image] if image else []) + sources)
    if image in missing:
        raise binds.missing_image(image, f"on {cluster.name}")
    if missing:
        raise UsageError(f"bind source(s) not on {cluster.name}: {', '.join(missing)}",
                         "bind paths are the cluster's: fix the path, or upload a local directory with --upload")


def prepare(spec: JobSpec, cluster: Cluster, *, root: Path | None = None, limit_mb: int = ship.DEFAULT_LIMIT_MB,
            ship_code: bool = True, uploads: tuple[tuple[Path, str], ...] = ()) -> Prepared:
    """Check, then ship hpcjax, the tree and the uploads (the only step that writes on the
    cluster). An upload appears in the job's working directory as a link to its stored copy."""
    home = check_cluster(cluster)
    check_binds(cluster, spec)
    root = ship.tree_root(root or Path.cwd())
    kept = relative_run_dirs(spec, root) if ship_code else {}
    names = ship.tree_files(root, tuple(kept.values())) if ship_code else []
    ship.check_size(root, names, limit_mb)  # refused before anything is sent
    check_uploads(uploads, names, root, ship_code)
    host = cluster.host()
    package, sent_now = ship.ship_hpcjax(host, home)
    if sent_now:
        say(f"shipped hpcjax {__version__} to {cluster.name}:{package} (once per version; the ranks import it)")
    snapshot = home
    if ship_code:
        shipped = ship.ship_tree(host, home, root, limit_mb, tuple(kept.values()))
        say(f"shipped {root} to {cluster.name}:{shipped.path} ({shipped.files} files, "
            f"{shipped.total_bytes / 1e6:.1f} MB; sent {shipped.sent_files} file(s), {shipped.sent_bytes} bytes)")
        snapshot = str(PurePosixPath(shipped.path) / ship.relative_cwd(root))
    stored = [upload(cluster, home, local) for local, _ in uploads]
    run_dirs = {named: f"{home}/runs/{ship.project_name(root)}/{path}" for named, path in kept.items()}
    links = [(there, name) for (_, name), there in zip(uploads, stored)] + [(d, n) for n, d in run_dirs.items()]
    if links:
        link = 'cd -- "$1" && shift && while [ $# -gt 1 ]; do mkdir -p -- "$1" "$(dirname -- "$2")" && ' \
               'ln -sfn -- "$1" "$2" && shift 2; done'
        done = host.run(["sh", "-c", link, "sh", snapshot, *[x for pair in links for x in pair]])
        if done.returncode != 0:
            raise HpcjaxError(f"cannot link the uploads and run directories into {snapshot} on {cluster.name}: "
                              f"{done.stderr.strip()}", "check the remote directory is writable there")
        spec = dataclasses.replace(spec, container=binds.in_place(spec.container, stored + list(run_dirs.values())))
    return Prepared(cluster_spec(spec, cluster, home, package), snapshot, package, tuple(run_dirs.items()))


def check_uploads(uploads, names: list[str], root: Path, ship_code: bool) -> None:
    """Each upload's name free in the job's working directory: not a shipped file or folder."""
    if uploads and not ship_code:
        raise UsageError("--upload needs the working tree shipped (the upload appears in its directory)",
                         "drop --upload, or pass the data's path on the cluster instead")
    here = ship.relative_cwd(root)
    shipped = {str(PurePosixPath(n).relative_to(here)) if here != "." else n for n in names
               if here == "." or n.startswith(here + "/")}
    taken = shipped | {str(parent) for n in shipped for parent in PurePosixPath(n).parents}
    for local, name in uploads:
        if name in taken:
            raise UsageError(f"--upload {local}:{name}: {name} is part of the shipped working tree",
                             f"ignore it (.gitignore or {ship.IGNORE_FILE}) so only the upload is sent, or "
                             "give the upload another name: --upload LOCAL:NAME")
    seen = [name for _, name in uploads]
    if len(set(seen)) != len(seen):
        raise UsageError(f"two uploads share a name: {', '.join(seen)}", "give each its own: --upload LOCAL:NAME")


def upload(cluster: Cluster, home: str, local: Path) -> str:
    """A local directory (or file) on the cluster, stored by content (sent once); its path there."""
    shipped = ship.upload(cluster.host(), home, local)
    if shipped.sent_files:
        say(f"uploaded {local} to {cluster.name}:{shipped.path} ({shipped.files} files, "
            f"{shipped.total_bytes / 1e6:.1f} MB)")
    else:
        say(f"{local} is on {cluster.name} already ({shipped.path}): nothing sent")
    return shipped.path



def sbatch(prepared: Prepared, cluster: Cluster) -> tuple[str, str]:
    """Submit the prepared job there; (job id, its log directory)."""
    spec = prepared.spec
    text = render_sbatch(spec)
    home = cluster.home()
    script = f"{home}/jobs/{time.strftime('%Y%m%d-%H%M%S')}-{spec.job_name[:40]}.sh".replace(" ", "_")
    log_dir = spec.output_dir if spec.output_dir.startswith("/") else f"{prepared.snapshot}/{spec.output_dir}"
    done = cluster.host().run(
        ["sh", "-c", 'mkdir -p -- "$1" "$(dirname -- "$2")" && cat > "$2" && cd -- "$3" && sbatch --parsable "$2"',
         "sh", log_dir, script, prepared.snapshot], input=text)
    if done.returncode != 0:
        said = done.stderr.strip() or done.stdout.strip()
        from hpcjax.launch.slurmctl import slurm_on

        raise SubmitError(f"sbatch on {cluster.name} refused the job ({spec.layout.name}): {said}",
                          f"{slurm_on(cluster.host()).refusal_hint(said)} (there; the script is at {script})")
    job_id = done.stdout.strip().splitlines()[-1].split(";")[0]
    if not job_id.isdigit():
        raise SubmitError(f"sbatch on {cluster.name} said {done.stdout.strip()!r}, not a job id",
                          "run the script by hand there to see why: sbatch " + script)
    return job_id, log_dir


def save_record(cluster: Cluster, job_id: str, record: dict) -> None:
    """The job's record on the cluster: another laptop (or this one after a wipe) finds it there."""
    import json

    cluster.host().files.write_text(f"{cluster.home()}/{RECORDS}/{job_id}.json", json.dumps(record))


def load_record(cluster: Cluster, job_id: str) -> dict | None:
    path = f"{cluster.home()}/{RECORDS}/{job_id}.json"
    return records.parse(cluster.host().files.read_text(path) or "", job_id, f"{cluster.name}:{path}")
