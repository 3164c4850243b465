"""A cluster's login node over SSH, through the system's OpenSSH client (never a Python
re-implementation): the user's ~/.ssh/config, ProxyJump, keys, certificates, agents and a
site's two-factor prompts behave as in a terminal.

One authenticated connection per destination, shared by every hpcjax command for
CONTROL_PERSIST (OpenSSH connection multiplexing: ControlMaster/ControlPath/ControlPersist),
so a site that asks for a second factor asks once, not at every `status`. The control
sockets live in a directory only this user can read, short enough for a Unix socket path.

Every command runs as `bash -lc '<argv quoted once>'` on the login node, so site PATHs and
modules set in the login profile are there, as in an interactive login.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.hosts.files import RemoteFiles

CONTROL_PERSIST = "10m"  # how long the shared connection outlives the last command
CONNECT_TIMEOUT_S = 10
SSH_FAILED = 255  # ssh's own exit code: the connection, not the remote command, failed
# What OpenSSH says, and what the user should do about it.
CONNECT_ERRORS = (
    (r"Could not resolve hostname|Name or service not known|nodename nor servname",
     "the host is unknown", "check the name (a Host alias of ~/.ssh/config, or user@login.example.org)"),
    (r"Connection refused", "the connection was refused",
     "check the port (Port in ~/.ssh/config) and that the login node's sshd is up"),
    (r"Connection timed out|Operation timed out|No route to host|Network is unreachable",
     "the host did not answer", "check the network (a VPN? a ProxyJump in ~/.ssh/config?)"),
    (r"Permission denied|Too many authentication failures|no mutual signature",
     "authentication failed", "check that `ssh DEST` logs in from a terminal: the key (IdentityFile), "
                              "the agent (ssh-add -l) and the user name"),
    (r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED",
     "the host key is not known or has changed", "log in once with `ssh DEST` and check the key it shows"),
)


def check_destination(destination: str, what: str = "SSH destination") -> None:
    """Refuse what ssh would read as an option (a leading '-') or split (whitespace), and a user@ or
    @host with a part left empty (ssh answers that with its usage text)."""
    user, at, host = destination.rpartition("@") if isinstance(destination, str) else ("", "", "")
    if (not destination or destination.startswith("-") or any(c.isspace() for c in destination)
            or not host or (at and not user)):
        raise UsageError(f"invalid {what} {destination!r}",
                         "give an SSH destination: user@login.example.org or a Host alias of ~/.ssh/config")


class ConnectionLost(HpcjaxError):
    """SSH could not reach the cluster (or the connection dropped); a follower may retry."""


def control_dir() -> Path:
    """Where the shared connections' sockets live: this user's alone (0700), and short."""
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"hpcjax-ssh-{os.getuid()}"
    base.mkdir(mode=0o700, exist_ok=True)
    info = base.stat()
    if info.st_uid != os.getuid():
        raise HpcjaxError(f"{base} belongs to another user: it cannot hold this user's SSH connections",
                          "set XDG_RUNTIME_DIR to a directory of your own")
    if info.st_mode & 0o077:
        base.chmod(0o700)
    return base


def explain(said: str, destination: str) -> tuple[str, str]:
    """(what went wrong, hint) from ssh's stderr."""
    for pattern, what, hint in CONNECT_ERRORS:
        if re.search(pattern, said, re.IGNORECASE):
            return what, hint.replace("DEST", destination)
    last = said.strip().splitlines()[-1] if said.strip() else "no message"
    return f"ssh failed ({last})", f"try `ssh {destination}` in a terminal"


class SshHost:
    """A login node: `run` a command there, read and write files there (RemoteFiles)."""

    remote = True

    def __init__(self, destination: str, options: tuple[str, ...] = ()) -> None:
        check_destination(destination)
        self.destination, self.options = destination, tuple(options)
        import hashlib  # only where a connection is made

        digest = hashlib.sha1("\0".join((destination,) + self.options).encode()).hexdigest()[:12]
        self.key = f"ssh-{digest}"  # one shared connection, and one Slurm watcher, per (destination, options)
        self.name = f"{destination} (over SSH)"
        self.files = RemoteFiles(self)
        self._connected = False
        self.round_trips = 0  # commands sent over the connection (ssh, rsync): what a submission costs

    def ssh(self, *extra: str) -> list[str]:
        # Keyed by the destination and options as given, not only by OpenSSH's %C (user, host,
        # port): two Host aliases of one login node may differ in what a session sends.
        return ["ssh", *self.options, "-o", f"ControlPath={control_dir()}/{self.key[4:]}-%C", *extra]

    def alive(self) -> bool:
        """Whether the shared connection is up (`ssh -O check`)."""
        check = subprocess.run(self.ssh("-O", "check", self.destination), capture_output=True, text=True)
        return check.returncode == 0

    def connect(self) -> None:
        """Open the shared connection unless it is up. Prompts (a password, a second factor)
        go to the terminal as `ssh` itself asks them; without a terminal nothing may prompt,
        so a failure comes within CONNECT_TIMEOUT_S instead of a wait for input."""
        if self._connected and self.alive() or self.alive():
            self._connected = True
            return
        interactive = sys.stdin.isatty()
        argv = self.ssh("-o", "ControlMaster=yes", "-o", f"ControlPersist={CONTROL_PERSIST}",
                        "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}", "-o", "ServerAliveInterval=15",
                        *(() if interactive else ("-o", "BatchMode=yes")), "-f", "-N", self.destination)
        # -f puts the master in the background once it is authenticated: its stderr goes to a
        # file, not a pipe (a pipe would stay open as long as the master lives).
        with tempfile.TemporaryFile(mode="w+") as said:
            try:
                done = subprocess.run(argv, stdin=None if interactive else subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=said,
                                      timeout=None if interactive else CONNECT_TIMEOUT_S * 3)
                code = done.returncode
            except subprocess.TimeoutExpired:
                code = SSH_FAILED
            said.seek(0)
            text = said.read()
        if code != 0:
            what, hint = explain(text, self.destination)
            raise ConnectionLost(f"cannot connect to {self.destination}: {what}", hint)
        self._connected = True

    def run(self, argv: list[str], *, input: str | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess:
        """argv on the login node, through the shared connection; text in and out. A command
        that is not there exits 127, as in a local shell. ConnectionLost when SSH itself fails."""
        return self._run(argv, input=input, timeout=timeout, text=True)

    def run_bytes(self, argv: list[str], *, input: bytes | None = None,
                  timeout: float | None = None) -> subprocess.CompletedProcess:
        return self._run(argv, input=input, timeout=timeout, text=False)

    def command(self, argv: list[str], *, tty: bool = False) -> list[str]:
        """The local argv that runs argv on the login node in a login shell (its site PATH and modules),
        through the shared connection: for a command whose output streams or whose terminal is the
        user's (-t: a shell, Ctrl-C reaching it)."""
        self.connect()
        self.round_trips += 1
        return self.ssh("-o", "ControlMaster=no", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
                        *(["-t"] if tty else []), self.destination, "--", "bash -lc " + shlex.quote(shlex.join(argv)))

    @contextlib.contextmanager
    def forward(self, local_port: int, node: str, port: int):
        """127.0.0.1:local_port here reaches node:port from the login node while the block runs
        (`ssh -O forward` on the shared connection; cancelled after, whatever happens)."""
        self.connect()
        spec = f"127.0.0.1:{local_port}:{node}:{port}"
        opened = subprocess.run(self.ssh("-O", "forward", "-L", spec, self.destination), capture_output=True, text=True)
        if opened.returncode != 0:
            raise HpcjaxError(f"cannot forward port {local_port} here to {node}:{port}: {opened.stderr.strip()}",
                              "the port here may be taken (by a Jupyter of your own?): pass --local-port")
        try:
            yield f"127.0.0.1:{local_port}"
        finally:
            subprocess.run(self.ssh("-O", "cancel", "-L", spec, self.destination), capture_output=True)

    def _run(self, argv, *, input, timeout, text: bool) -> subprocess.CompletedProcess:
        full = self.command(argv)
        try:
            done = subprocess.run(full, input=input, capture_output=True, text=text, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ConnectionLost(f"no answer from {self.destination} within {timeout:g} s",
                                 "the connection may have dropped; hpcjax tries again") from None
        said = done.stderr if text else done.stderr.decode(errors="replace")
        if done.returncode == SSH_FAILED and not done.stdout and _ssh_said_it(said):
            self._connected = False
            what, hint = explain(said, self.destination)
            raise ConnectionLost(f"lost the connection to {self.destination}: {what}", hint)
        return done

    def close(self) -> None:
        """End the shared connection (`ssh -O exit`)."""
        subprocess.run(self.ssh("-O", "exit", self.destination), capture_output=True)
        self._connected = False

    def __repr__(self) -> str:
        return f"SshHost({self.destination!r})"


def _ssh_said_it(said: str) -> bool:
    """Whether stderr is ssh's own complaint (not the remote command's exit 255)."""
    return bool(re.search(r"^(ssh|kex_exchange_identification|Connection|Control socket|mux_client|"
                          r"Permission denied|Host key|ssh_exchange)", said.strip(), re.MULTILINE)) \
        or any(re.search(pattern, said, re.IGNORECASE) for pattern, _, _ in CONNECT_ERRORS)
