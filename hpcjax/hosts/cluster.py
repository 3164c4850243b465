"""Where a job goes: this machine's SLURM, or a cluster's login node over SSH, with the
directory on the cluster that holds everything hpcjax ships there.

    Cluster()                                            # sbatch on this machine (THIS_MACHINE)
    Cluster("me@login.example.org", remote_dir="$SCRATCH/hpcjax")
    Cluster("ibex", ssh_options=("-F", "~/.ssh/hpc_config"))   # a Host alias

A site profile names it (`host`, `remote_dir`, `ssh_options`, `python`), or the command line
(`--cluster DEST`). This machine is a Cluster too, never None: `.remote` tells the two apart. The remote directory is expanded on the cluster once per process
(`$SCRATCH` is the cluster's, not the laptop's) and checked to be writable.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.hosts.ssh import check_destination

DEFAULT_REMOTE_DIR = "$HOME/hpcjax"
# $VAR, ${VAR}, ~ and plain path characters: expanded by the cluster's shell, never evaluated.
REMOTE_DIR = re.compile(r"(~|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|[A-Za-z0-9_./+@-])+")

_hosts: dict = {}
_homes: dict = {}


@dataclass(frozen=True)
class Cluster:
    destination: str | None = None  # an SSH destination (user@host, or a Host alias); None: this machine
    remote_dir: str = DEFAULT_REMOTE_DIR  # on the cluster; $VAR and ~ expanded there
    ssh_options: tuple[str, ...] = ()  # extra arguments to ssh (e.g. -F FILE), before the destination
    python: str = "python3"  # the cluster's Python, for hpcjax's own programs (smoke, the API's worker)
    profile: str | None = None  # the profile that named it, if one did (what a job record keeps)
    profile_file: str | None = None  # the file that profile is in (None: the default one)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ssh_options", tuple(self.ssh_options))
        if self.destination is not None:
            check_destination(self.destination, "cluster")
        if not REMOTE_DIR.fullmatch(self.remote_dir or ""):
            raise UsageError(f"remote_dir {self.remote_dir!r} has characters hpcjax will not pass to a shell",
                             'use a path with $VARIABLES the cluster sets, e.g. remote_dir = "$SCRATCH/hpcjax"')
        if not self.python or any(c.isspace() for c in self.python):
            raise UsageError(f"python {self.python!r} is not a command", 'e.g. python = "python3"')

    @property
    def remote(self) -> bool:
        return self.destination is not None

    @property
    def name(self) -> str:
        return self.destination or "this machine"

    def host(self):
        """The host (one per cluster and process, so its connection and watcher are shared)."""
        from hpcjax.hosts import this_machine

        if not self.remote:
            return this_machine()
        key = (self.destination, self.ssh_options)
        if key not in _hosts:
            from hpcjax.hosts.ssh import SshHost

            _hosts[key] = SshHost(self.destination, self.ssh_options)
        return _hosts[key]

    def home_script(self, *, create: bool = True) -> str:
        """A shell program that prints remote_dir as an absolute path there: made and checked
        writable, or (create=False: render, --dry-run, the check step) the path it would be,
        checked writable where it would be made, nothing made. Exit 3 when it cannot be."""
        path = self.remote_dir.replace("~", "$HOME", 1) if self.remote_dir.startswith("~") else self.remote_dir
        if create:
            return (f'd="{path}"; mkdir -p -- "$d" && [ -w "$d" ] && cd -- "$d" && pwd -P || '
                    f'{{ echo "cannot create or write $d" >&2; exit 3; }}')
        # shell builtins only: a login whose PATH misses coreutils must still get an answer
        return (f'( d="{path}"; [ -d "$d" ] && [ -w "$d" ] && cd -- "$d" && pwd -P && exit 0; '
                'case "$d" in /*) full="$d";; *) full="$PWD/$d";; esac; '
                'p="$full"; while [ -n "$p" ] && [ ! -e "$p" ]; do p="${p%/*}"; done; '
                '[ -d "${p:-/}" ] && [ -w "${p:-/}" ] && printf "%s\\n" "$full" && exit 0; '
                'echo "cannot create or write $d"; exit 3 )')

    def home(self, *, create: bool = True) -> str:
        """remote_dir as an absolute path on the cluster, created and checked writable (once per
        process); create=False: what home_script(create=False) says, nothing made (not kept)."""
        key = (self.destination, self.ssh_options, self.remote_dir)
        if key not in _homes:
            done = self.host().run(["sh", "-c", self.home_script(create=create)])
            if done.returncode != 0:
                raise HpcjaxError(f"the remote directory {self.remote_dir} is not usable on {self.name}: "
                                  f"{done.stderr.strip() or done.stdout.strip()}",
                                  "set remote_dir in the profile to a directory you can write there, "
                                  'e.g. remote_dir = "$SCRATCH/hpcjax"')
            if not create:
                return done.stdout.strip()
            _homes[key] = done.stdout.strip()
        return _homes[key]

    def as_record(self) -> dict:
        """What a job record keeps: which cluster, and where its files are. Never how to reach
        it (ssh options) nor what to run there (python): a record may be written by others
        (the cluster's records directory), and those come from the user's own configuration
        only (job.clusters.cluster_from_record)."""
        return {"destination": self.destination, "remote_dir": self.remote_dir, "profile": self.profile,
                "profile_file": self.profile_file}

    def describe(self) -> str:
        if not self.remote:
            return "this machine"
        options = f" (ssh {shlex.join(self.ssh_options)})" if self.ssh_options else ""
        return f"{self.destination}{options}, remote directory {self.remote_dir}"


THIS_MACHINE = Cluster()
