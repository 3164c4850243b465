"""A login node of the tests' own: OpenSSH's sshd on 127.0.0.1, its own port, host key and
configuration, key authentication only, as the dev cluster's second account (the cluster
user, slurm/devcluster/cluster-user.sh). The "laptop" is the test process (root, files under
pytest's 0700 temporary directories that the cluster user cannot read), reaching it through
a Host alias in a client configuration file, as a user's ~/.ssh/config would name a site.
Real ssh, real sshd, real rsync: nothing about SSH is a stand-in here."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

SSHD = "/usr/sbin/sshd"
ALIAS = "hpcjax-test-cluster"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Sshd:
    def __init__(self, state: Path, user: str, python: str, enter: tuple[str, ...] = ()) -> None:
        """state: a directory the cluster user can read (sshd reads authorized_keys as that user);
        enter: the command that runs sshd inside a release's root (slurm/devcluster/enter.sh R), whose
        logins then have that root's Python and SLURM (root-user.sh)."""
        self.user, self.python, self.enter = user, python, tuple(enter)
        self.root = state / f"sshd-{uuid.uuid4().hex[:8]}"
        self.root.mkdir(parents=True)
        self.root.chmod(0o755)
        self.port = free_port()
        self.remote_dir = f"$HOME/hpcjax-tests/{self.root.name}"  # this session's alone
        for name in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.root / name)], check=True)
        shutil.copy(self.root / "client_key.pub", self.root / "authorized_keys")
        (self.root / "authorized_keys").chmod(0o644)
        (self.root / "sshd_config").write_text(f"""\
Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.root}/host_key
PidFile {self.root}/sshd.pid
AuthorizedKeysFile {self.root}/authorized_keys
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin no
AllowUsers {user}
AllowTcpForwarding yes
X11Forwarding no
PrintMotd no
MaxSessions 64
MaxStartups 64
LogLevel VERBOSE
AcceptEnv HPCJAX_TEST_LOGIN_PATH XLA_FLAGS HPCJAX_PY_SPY
""")
        # A login whose PATH lacks SLURM (the cluster user's ~/.profile honours the variable):
        # only a shell, as on a login node whose profile misses a site module.
        self.bare_path = self.root / "bare-path"
        self.bare_path.mkdir()
        (self.bare_path / "sh").symlink_to("/bin/sh")
        host_key = (self.root / "host_key.pub").read_text().split()
        (self.root / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host_key[0]} {host_key[1]}\n")
        # The session's XLA_FLAGS (tests/conftest.py) travel with every login, as sbatch carries
        # them to local jobs: a remote job's losses then match the same program run here.
        self.client_config = self.root / "ssh_config"
        self.client_config.write_text(self.host_block(ALIAS, self.port, self.root / "client_key"))
        self.process: subprocess.Popen | None = None

    def host_block(self, alias: str, port: int, key: Path, hostname: str = "127.0.0.1", extra: str = "") -> str:
        return f"""\
Host {alias}
  HostName {hostname}
  Port {port}{extra}
  User {self.user}
  IdentityFile {key}
  IdentitiesOnly yes
  UserKnownHostsFile {self.root}/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  SendEnv XLA_FLAGS HPCJAX_PY_SPY
"""

    def add_alias(self, alias: str, *, port: int | None = None, key: Path | None = None,
                  hostname: str = "127.0.0.1", no_slurm: bool = False) -> None:
        """Another Host block: an unknown host, a wrong port, a key the server does not accept,
        or a login without SLURM on its PATH."""
        extra = f"\n  SetEnv HPCJAX_TEST_LOGIN_PATH={self.bare_path}" if no_slurm else ""
        with self.client_config.open("a") as handle:
            handle.write(self.host_block(alias, port or self.port, key or self.root / "client_key", hostname, extra))

    def new_key(self, name: str) -> Path:
        """A key the server has never seen."""
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.root / name)], check=True)
        return self.root / name

    @property
    def ssh_options(self) -> tuple[str, ...]:
        return ("-F", str(self.client_config))

    def start(self) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        log = open(self.root / "sshd.log", "a")
        self.process = subprocess.Popen([*self.enter, SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")],
                                        stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.1)
        raise RuntimeError(f"sshd did not start: {(self.root / 'sshd.log').read_text()[-2000:]}")

    def stop(self) -> None:
        """Stop the server and every connection it serves (a login node going away)."""
        if self.process and self.process.poll() is None:
            # Each connection's sshd (a child of this listener) outlives it: end those first,
            # this server's alone (another test session may run its own sshd).
            subprocess.run(["pkill", "-TERM", "-P", str(self.process.pid)], capture_output=True)
            self.process.terminate()
            self.process.wait(10)
        self.process = None

    def ssh(self, command: str) -> subprocess.CompletedProcess:
        """A command on the cluster as the cluster user, with a fresh connection (no hpcjax)."""
        return subprocess.run(["ssh", "-F", str(self.client_config), "-o", "ControlPath=none", ALIAS,
                               f"bash -lc {shlex_quote(command)}"], capture_output=True, text=True, timeout=60)

    def profiles(self, path: Path, name: str = "devcluster", host: str = ALIAS, **extra: str) -> Path:
        """A profiles file whose profile names this cluster (as a user's would)."""
        lines = [f"[profiles.{name}]", f'host = "{host}"', f'remote_dir = "{self.remote_dir}"',
                 f'ssh_options = ["-F", "{self.client_config}"]', f'python = "{self.python}"']
        lines += [f'{k} = "{v}"' for k, v in extra.items()]
        path.write_text("\n".join(lines) + "\n")
        return path

    def cleanup(self) -> None:
        subprocess.run(["ssh", *self.ssh_options, "-O", "exit", ALIAS], capture_output=True)
        self.stop()
        subprocess.run(["su", "-", self.user, "-c", f"rm -rf {self.remote_dir}"], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def laptop_env() -> dict[str, str]:
    """The laptop has no SLURM: commands that would find the dev cluster here must not."""
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    return env
