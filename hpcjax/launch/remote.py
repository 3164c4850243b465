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
import time
from pathlib import Path, PurePosixPath

from hpcjax import __version__
from hpcjax.containers import binds
from hpcjax.errors import HpcjaxError, SlurmNotFound, SubmitError, UsageError
from hpcjax.hosts import ship
from hpcjax.hosts.cluster import Cluster
from hpcjax.launch.render import render_sbatch
from hpcjax.launch.run import say
from hpcjax.launch.spec import JobSpec

RECORDS = "records"  # <remote_dir>/records/<job>.json: the job's record, on the cluster itself


@dataclasses.dataclass(frozen=True)
class Prepared:
    spec: JobSpec  # with the cluster's paths
    snapshot: str  # the job's working directory there
    package: str  # the shipped hpcjax (its parent directory)


def check_cluster(cluster: Cluster) -> str:
    """Connect, and find what hpcjax needs on the login node; the remote directory, expanded."""
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
    return cluster.home()


def cluster_spec(spec: JobSpec, cluster: Cluster, home: str, package: str) -> JobSpec:
    """The spec as it runs there: logs under the remote directory, the shipped hpcjax first on
    PYTHONPATH and bound into a container."""
    output_dir = spec.output_dir if spec.output_dir.startswith("/") else f"{home}/{spec.output_dir}"
    env = dict(spec.env)
    env["PYTHONPATH"] = package + (f":{env['PYTHONPATH']}" if env.get("PYTHONPATH") else "")
    env[binds.BIND_SOURCE_ENV] = f"{package}/hpcjax"
    return dataclasses.replace(spec, output_dir=output_dir, env=tuple(env.items()))


def check_binds(cluster: Cluster, spec: JobSpec) -> None:
    sources = [s for s, _ in binds.user_binds(spec.container) if "$" not in s]
    if not sources:
        return
    done = cluster.host().run(["sh", "-c", 'for p; do [ -e "$p" ] || printf "%s\\n" "$p"; done', "sh", *sources])
    if done.stdout.strip():
        raise UsageError(f"bind source(s) not on {cluster.name}: {', '.join(done.stdout.split(chr(10))[:-1])}",
                         "bind paths are the cluster's: fix the path, or upload a local directory with --upload")


def prepare(spec: JobSpec, cluster: Cluster, *, root: Path | None = None,
            limit_mb: int = ship.DEFAULT_LIMIT_MB, ship_code: bool = True) -> Prepared:
    """Check, then ship hpcjax and the tree (the only step that writes on the cluster)."""
    home = check_cluster(cluster)
    check_binds(cluster, spec)
    root = ship.tree_root(root or Path.cwd())
    names = ship.tree_files(root) if ship_code else []
    ship.check_size(root, names, limit_mb)  # refused before anything is sent
    host = cluster.host()
    package, sent_now = ship.ship_hpcjax(host, home)
    if sent_now:
        say(f"shipped hpcjax {__version__} to {cluster.name}:{package} (once per version; the ranks import it)")
    snapshot = home
    if ship_code:
        shipped = ship.ship_tree(host, home, root, limit_mb)
        say(f"shipped {root} to {cluster.name}:{shipped.path} ({shipped.files} files, "
            f"{shipped.total_bytes / 1e6:.1f} MB; sent {shipped.sent_files} file(s), {shipped.sent_bytes} bytes)")
        snapshot = str(PurePosixPath(shipped.path) / ship.relative_cwd(root))
    return Prepared(cluster_spec(spec, cluster, home, package), snapshot, package)


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
        raise SubmitError(f"sbatch on {cluster.name} refused the job ({spec.layout.name}): "
                          f"{done.stderr.strip() or done.stdout.strip()}",
                          f"the script is on the cluster at {script}; check the layout against "
                          "`sinfo -o '%P %D %c %G'` there")
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
    import json

    text = cluster.host().files.read_text(f"{cluster.home()}/{RECORDS}/{job_id}.json")
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None
