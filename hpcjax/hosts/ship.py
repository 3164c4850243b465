"""What hpcjax ships to a cluster, with rsync through the shared SSH connection:

    <remote_dir>/hpcjax/<version>-<digest>/hpcjax/    hpcjax's own package, once per content
    <remote_dir>/code/<project>/<stamp>/              a snapshot of the user's working tree per job
    <remote_dir>/data/<digest>/                       an uploaded directory, once per content

A snapshot is a new directory per submission whose unchanged files are hard links into the
previous snapshot (rsync --link-dest): cheap, and immutable for the job that runs in it, so
editing the laptop's copy never changes a queued or running job. Only new or changed files
travel. Both ends need rsync; the cluster needs nothing else but a POSIX shell.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import shlex
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from hpcjax import __version__
from hpcjax.values.errors import HpcjaxError, UsageError

DEFAULT_LIMIT_MB = 200  # a working tree larger than this is refused before anything is sent
IGNORE_FILE = ".hpcjaxignore"  # glob patterns (one per line) of files never shipped, beside .gitignore
DONE = ".hpcjax-complete"  # a directory shipped whole carries this marker
FETCHED = ".hpcjax-fetched"  # a directory `hpcjax fetch` brought back: never shipped with the tree


@dataclass(frozen=True)
class Shipped:
    path: str  # where it is on the cluster
    files: int  # files in it
    total_bytes: int  # their size
    sent_files: int  # files rsync sent (the rest were there already)
    sent_bytes: int  # bytes of file data rsync sent (its "Literal data")


def rsync(host, *args: str, into: str, input: bytes | None = None, parent_made: bool = False) -> str:
    """rsync through the host's shared SSH connection into a directory there (made first:
    rsync's own --mkpath is too new for many clusters' rsync; with parent_made, rsync makes the
    last part itself and no round trip is spent); its --stats output."""
    made = host.run(["mkdir", "-p", "--", into]) if not parent_made else None
    if made is not None and made.returncode != 0:
        raise HpcjaxError(f"cannot make {into} on {host.destination}: {made.stderr.strip()}",
                          "free space or fix permissions there (quota -s; ls -ld on remote_dir)")
    return _rsync(host, [*args, f"{host.destination}:{into}/"], input)


def fetch(host, source: str, target: Path, *, excludes: tuple[str, ...] = (), files: list[str] | None = None
          ) -> tuple[int, int]:
    """A directory of the host (or some of its files) into a local one: rsync keeps partial
    files (--partial), so an interrupted fetch resumes. (files received, bytes received)."""
    if not source.strip("/"):  # rsync of "/" would copy the whole machine
        raise UsageError(f"refusing to fetch {source!r} from {host.name}: not a directory of a job",
                         "give the run directory's path")
    target.mkdir(parents=True, exist_ok=True)
    where = f"{host.destination}:{source}/" if host.remote else f"{source}/"
    listing = ["--from0", "--files-from=-"] if files is not None else []
    # --safe-links: a link in the job's directory that leads out of it is not recreated here
    out = _rsync(host, ["-rlt", "--safe-links", "--partial", *listing, *(f"--exclude={e}" for e in excludes),
                        where, f"{target}/"], b"\0".join(f.encode() for f in files) if files is not None else None)
    mark_fetched(target)
    return stats(out)


def mark_fetched(target: Path) -> None:
    """A fetched directory stays out of the next snapshot (FETCHED) and out of git (its own .gitignore)."""
    (target / FETCHED).write_text("brought back by `hpcjax fetch`: hpcjax never ships this directory\n")
    ignore = target / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# brought back by `hpcjax fetch`\n*\n")


def _rsync(host, args: list[str], input: bytes | None) -> str:
    ssh = ["-e", shlex.join(host.ssh("-o", "ControlMaster=no", "-o", "BatchMode=yes"))] if host.remote else []
    if host.remote:
        host.connect()
        host.round_trips += 1
    done = subprocess.run(["rsync", *ssh, "--protect-args", "--stats", *args], input=input, capture_output=True)
    said = done.stderr.decode(errors="replace").strip()
    if done.returncode != 0:
        hint = "free space on the cluster (quota -s; df -h on remote_dir)" if re.search(
            r"No space left|Disk quota exceeded|quota", said, re.I) else \
            "rsync must be installed on the cluster too (`command -v rsync` there)" if done.returncode == 127 or \
            "command not found" in said else "try the same rsync by hand to see more"
        raise HpcjaxError(f"rsync with {host.name} failed: {said.splitlines()[-1] if said else done.returncode}",
                          hint)
    return done.stdout.decode(errors="replace")


def stats(text: str) -> tuple[int, int]:
    """(files sent, bytes of file data sent) from rsync --stats."""
    files = re.search(r"Number of regular files transferred: ([\d,]+)", text)
    literal = re.search(r"Literal data: ([\d,]+)", text)
    return (int(files.group(1).replace(",", "")) if files else 0,
            int(literal.group(1).replace(",", "")) if literal else 0)


# --- hpcjax itself ---------------------------------------------------------------------
def package_dir() -> Path:
    return Path(__file__).resolve().parent.parent


def package_files() -> list[Path]:
    root = package_dir()
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix in (".py", ".j2"))


def package_digest() -> str:
    """The content of hpcjax's package: a changed checkout ships anew, the same one never twice."""
    digest = hashlib.sha256()
    root = package_dir()
    for path in package_files():
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def package_target(home: str) -> str:
    """Where this hpcjax's package is (or goes) on the cluster: the directory put first on PYTHONPATH."""
    return f"{home}/hpcjax/{__version__}-{package_digest()}"


def ship_hpcjax(host, home: str, present: bool | None = None) -> tuple[str, bool]:
    """hpcjax's package on the cluster (shipped unless that content is there already; `present`:
    whether it is, when the caller has asked): the directory to put first on PYTHONPATH, and
    whether it was sent now."""
    target = package_target(home)
    if present if present is not None else host.files.exists(f"{target}/{DONE}"):
        return target, False
    root = package_dir()
    listing = b"\0".join(str(p.relative_to(root.parent)).encode() for p in package_files())
    rsync(host, "-rlt", "--from0", "--files-from=-", f"{root.parent}/", into=target, input=listing)
    host.files.write_text(f"{target}/{DONE}", f"hpcjax {__version__}\n")
    return target, True


# --- the user's working tree -----------------------------------------------------------
def tree_root(start: Path) -> Path:
    """The git repository `start` is in, else `start` itself."""
    done = subprocess.run(["git", "-C", str(start), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else start


def tree_files(root: Path, leave_out: tuple[str, ...] = ()) -> list[str]:
    """The files to ship, relative to root: git's tracked and untracked-not-ignored ones (or
    every file without git), less what .hpcjaxignore names, the directories `leave_out` (relative
    to root), and what `hpcjax fetch` brought back (a directory holding FETCHED): a fetched run
    never travels back with the code."""
    patterns = ignore_patterns(root / IGNORE_FILE)
    done = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"],
                          capture_output=True)
    if done.returncode == 0:
        names = [n for n in done.stdout.decode(errors="surrogateescape").split("\0") if n]
    else:
        names = _walk_tree(root, tuple(d.rstrip("/") for d in leave_out), patterns)
    # git leaves a fetched directory out by its own .gitignore; without git, by its mark
    fetched = tuple(str(Path(n).parent) for n in names if Path(n).name == FETCHED)
    skipped = tuple(d.rstrip("/") + "/" for d in (*leave_out, *fetched) if d not in (".", ""))
    return sorted(n for n in names if (root / n).is_file() and not n.startswith(skipped)
                  and not _ignored(n, patterns))


def ignore_patterns(ignore: Path) -> list[str]:
    """The patterns of an .hpcjaxignore (none without one); a `!` line, which .gitignore reads as
    "ship it after all", is refused rather than read as a name no file has."""
    if not ignore.is_file():
        return []
    lines = [line.strip() for line in ignore.read_text(errors="replace").splitlines()]
    patterns = [line for line in lines if line and not line.startswith("#")]
    for number, line in enumerate(lines, 1):
        if line.startswith("!"):
            raise UsageError(f"{ignore}:{number}: {line!r}: {IGNORE_FILE} lists only what is left out; a '!' "
                             "pattern (ship it after all) is not read",
                             "remove the line, and narrow the pattern it was to except from")
    return patterns


def _ignored(name: str, patterns: list[str]) -> bool:
    """Whether .hpcjaxignore's glob patterns leave out the file `name` (relative to the tree), as
    .gitignore's plain patterns would: one without a slash names a file or directory at any depth,
    one with a slash the path from the tree's root; a directory left out leaves out what it holds."""
    parts = name.split("/")
    for pattern in patterns:
        body = pattern.strip("/")
        if "/" in pattern.rstrip("/"):  # from the root (/data, sub/data): the file, or a directory above it
            if fnmatch.fnmatch(name, body) or name.startswith(body + "/"):
                return True
        elif any(fnmatch.fnmatch(part, body) for part in (parts[:-1] if pattern.endswith("/") else parts)):
            return True
    return False


def _walk_tree(root: Path, left_out: tuple[str, ...], patterns: list[str]) -> list[str]:
    """Every file under root without git, relative to it, never descending into .git, a directory
    `hpcjax fetch` brought back, or one left out whole (a run directory, an ignored directory): a
    tree of data or checkpoints left out is not walked file by file only to be dropped."""
    names: list[str] = []
    for here, dirs, files in os.walk(root):
        prefix = "" if here == str(root) else os.path.relpath(here, root) + "/"
        if prefix and FETCHED in files:
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if d != ".git" and (prefix + d) not in left_out
                   and not _ignored(prefix + d + "/", patterns)]  # as if a file in it
        names += [prefix + f for f in files]
    return names


def check_size(root: Path, names: list[str], limit_mb: int) -> int:
    sizes = {n: (root / n).stat().st_size for n in names}
    total = sum(sizes.values())
    if total > limit_mb * 1_000_000:
        largest = sorted(sizes.items(), key=lambda item: -item[1])[:5]
        raise UsageError(
            f"the working tree {root} holds {total / 1e6:.0f} MB in {len(names)} files, over the "
            f"{limit_mb} MB that hpcjax ships with every job; largest: "
            + ", ".join(f"{n} ({s / 1e6:.0f} MB)" for n, s in largest),
            f"leave data out of the tree: add the files to .gitignore or {IGNORE_FILE} (glob patterns) and "
            "pass data with --upload DIR or hpcjax.Data(DIR); or raise the limit (ship_limit_mb in the profile)")
    return total


def project_name(root: Path) -> str:
    """The tree's name on the cluster (its snapshots, its run directories): its name and a digest of its path."""
    return f"{re.sub(r'[^A-Za-z0-9._-]', '_', root.name)}-{hashlib.sha256(str(root).encode()).hexdigest()[:8]}"


def ship_tree(host, home: str, root: Path, names: list[str], total: int, previous: list[str] | None = None) -> Shipped:
    """A new snapshot of the tree on the cluster: its files `names` (listed and size-checked by the
    caller: tree_files, check_size), `total` bytes; unchanged files hard-linked to the last one.
    `previous`: the snapshots there (listed, and their directory made, by the caller), else they
    are asked for."""
    base = f"{home}/code/{project_name(root)}"
    made = previous is not None
    if previous is None:
        previous = [n for n in host.files.list_names(base) if not n.startswith(".")]
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    link = [f"--link-dest=../{previous[-1]}"] if previous else []
    out = rsync(host, "-rlt", "--from0", "--files-from=-", *link, f"{root}/", into=f"{base}/{stamp}", parent_made=made,
                input=b"\0".join(n.encode(errors="surrogateescape") for n in names))
    sent_files, sent_bytes = stats(out)
    return Shipped(f"{base}/{stamp}", len(names), total, sent_files, sent_bytes)


# --- data ------------------------------------------------------------------------------
def content_digest(path: Path) -> str:
    """A directory's (or file's) content: its name, its files' names and bytes, so the same data is
    stored once (the name too: it is the stored copy's, `<digest>/<name>`, which two directories of
    the same files but other names must not share)."""
    digest = hashlib.sha256(path.name.encode() + b"\0")
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        digest.update(str(file.relative_to(path.parent if path.is_file() else path)).encode() + b"\0")
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def upload_target(home: str, local: Path) -> str:
    """Where a local directory (or file) is stored there, by its content."""
    return f"{home}/data/{content_digest(local.resolve())}"


def upload(host, home: str, local: Path, present: bool | None = None) -> Shipped:
    """A local directory (or file) on the cluster, stored by content: a second upload of the
    same content sends nothing (`present`: whether it is there, when the caller has asked). Its
    path there is `Shipped.path`."""
    local = local.resolve()
    target = upload_target(home, local)
    name = local.name
    count = 1 if local.is_file() else sum(1 for p in local.rglob("*") if p.is_file())
    size = local.stat().st_size if local.is_file() else sum(p.stat().st_size for p in local.rglob("*") if p.is_file())
    if present if present is not None else host.files.exists(f"{target}/{DONE}"):
        return Shipped(f"{target}/{name}", count, size, 0, 0)
    out = rsync(host, "-rlt", str(local), into=target, parent_made=present is not None)
    host.files.write_text(f"{target}/{DONE}", f"{local}\n")
    sent_files, sent_bytes = stats(out)
    return Shipped(f"{target}/{name}", count, size, sent_files, sent_bytes)


def relative_cwd(root: Path) -> str:
    """Where the command was typed, inside the tree (the job starts there in its snapshot)."""
    try:
        return str(Path(os.getcwd()).resolve().relative_to(root.resolve()))
    except ValueError:
        return "."
