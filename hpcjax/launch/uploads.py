"""What a job is given beside its code, from a laptop: uploads (`--upload LOCAL[:NAME]`, the API's
`Data`), and the run directories its command names relative to its working directory, which
are kept beside the snapshots (a snapshot is new at every submission) and linked into each.
Read and checked here (the resolve and check steps); shipped by launch.staging."""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path, PurePosixPath

from hpcjax.values.errors import UsageError
from hpcjax.hosts import ship
from hpcjax.job.spec import JobSpec
from hpcjax.protocol.rundir import run_dir_argument
from hpcjax.values.validate import local_path

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
    try:
        path = given.resolve()
    except (RuntimeError, OSError):  # a loop of symbolic links
        raise UsageError(f"--upload {text}: {local} is a loop of symbolic links", f"give a directory or file: {form}")
    if not local.strip() or not path.exists():
        raise UsageError(f"--upload {text}: {local or repr(local)} does not exist on this machine",
                         f"give a local directory or file, optionally with the name the job sees: {form}")
    if path == Path(path.anchor):
        raise UsageError(f"--upload {text}: {path} is the whole file system",
                         f"give the directory or file the job reads: {form}")
    if not name:
        name = str(given.relative_to(cwd)) if cwd in given.parents else given.name
    if not UPLOAD_NAME.fullmatch(name) or ".." in name.split("/"):  # checked before the walk of what it names
        raise UsageError(f"--upload {text}: {name!r} is not a relative path the job can be given",
                         "letters, digits, '.', '_', '-' and '/', below the working directory, e.g. data/mnist")
    check_links(path, f"--upload {text}")
    return path, name


def check_links(path: Path, what: str) -> None:
    """Refuse data the job could not be given as it is here (one walk of it): a FIFO, a socket or a
    device (rsync would send an empty directory or nothing), what you cannot read (it would arrive
    with mode 000, or not at all), a name that is not UTF-8, a loop of links, and links that lead
    out of it (as links, the job would find the cluster's files at those paths, or none)."""
    found = survey(path)
    for why, names, hint in (
            ("is not a directory or a regular file", found["special"], "upload a directory or a file; a FIFO, a "
             "socket or a device cannot be copied to the cluster"),
            ("cannot be read (by you, or by its owner: its mode travels with it)", found["unreadable"],
             "make it readable (chmod u+r), or leave it out"),
            ("has a name that is not UTF-8", found["not_utf8"], "rename it in UTF-8"),
            ("is a loop of symbolic links", found["loops"], "remove the loop"),
            ("leads outside it", found["outside"], "the job would find the cluster's files at those paths, or "
             "none: send what they point to as well (--upload TARGET:NAME, or another Data), or replace the links "
             "by copies")):
        if names:
            shown = ", ".join(names[:3]) + (f" (and {len(names) - 3} more)" if len(names) > 3 else "")
            raise UsageError(f"{what}: {len(names)} entr{'y' if len(names) == 1 else 'ies'} {why}: {shown}", hint)


def survey(path: Path) -> dict[str, list[str]]:
    """What in `path` (a directory or a file) cannot be uploaded as it is, by kind, as names below it."""
    import stat

    found: dict[str, list[str]] = {"special": [], "unreadable": [], "not_utf8": [], "loops": [], "outside": []}

    def shown(entry: Path) -> str:
        name = str(entry.relative_to(path)) if entry != path else str(path)
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")

    def look(entry: Path, root: Path) -> bool:
        """Record what is wrong with one entry; True when it is a directory to walk into."""
        try:
            str(entry).encode("utf-8")
        except UnicodeEncodeError:
            found["not_utf8"].append(shown(entry))
        try:
            mode = entry.lstat().st_mode
        except OSError:
            found["unreadable"].append(shown(entry))
            return False
        if stat.S_ISLNK(mode):
            try:
                target = entry.resolve(strict=True)
            except RuntimeError:
                found["loops"].append(shown(entry))
                return False
            except OSError:
                target = None
            if target is None or (target != root and root not in target.parents):
                try:
                    found["outside"].append(f"{shown(entry)} -> {os.readlink(entry)}")
                except OSError:  # a link only its owner may read (/proc/1/cwd)
                    found["unreadable"].append(shown(entry))
            return False
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            found["special"].append(shown(entry))
            return False
        owner = stat.S_IRUSR | (stat.S_IXUSR if stat.S_ISDIR(mode) else 0)  # its mode travels with it (rsync -p)
        if mode & owner != owner or not os.access(entry, os.R_OK | (os.X_OK if stat.S_ISDIR(mode) else 0)):
            found["unreadable"].append(shown(entry))
            return False
        return stat.S_ISDIR(mode)

    try:
        path = root = path.resolve(strict=True)  # a link given as the data: what it leads to
    except RuntimeError:
        found["loops"].append(str(path))
        return found
    except OSError:
        found["unreadable"].append(str(path))
        return found
    if look(path, root):
        for directory, subdirs, files in os.walk(path, onerror=lambda error: found["unreadable"].append(
                shown(Path(error.filename)) if error.filename else str(error))):
            for name in sorted(files) + sorted(subdirs):
                if not look(Path(directory) / name, root) and name in subdirs:
                    subdirs.remove(name)
    return {kind: sorted(set(names)) for kind, names in found.items()}


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
