"""A roll call of every process before jax.distributed.initialize.

When a process never arrives, JAX's client aborts the others with a gRPC
DEADLINE_EXCEEDED and a C++ stack trace that names nobody. This check-in runs
first, on the coordinator's own port (free until JAX binds it): process 0
listens, every other process reports its id, and process 0 answers "go" once
all have. A timeout then says exactly which processes did not arrive.
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from contextlib import contextmanager

from hpcjax.values.errors import HpcjaxError
from hpcjax.values.nodelist import ranges
from hpcjax.values.voice import say

GO = b"go\n"
ABORT = b"no "  # followed by process 0's reason and a newline
NO_COORDINATOR = ABORT + b"it could not start the JAX coordination service\n"
# Retries double from the first delay to the last: every rank imports JAX at once, so a rank that
# finds process 0 not yet listening is most often early by milliseconds (a flat 50 ms retry cost
# 25 ms on average to every job's start), while one that keeps waiting (process 0 slow to start)
# comes back 20 times a second at most, however many ranks ask.
RETRY_S = (0.002, 0.05)
CLIENT_GRACE_S = 5.0
POLL_S = (0.001, 0.01)  # process 0's look for its own coordination service, the same way
SAY_EVERY_S = 30.0  # how often a rank that cannot reach process 0 says so again
QUIET_REFUSED_S = 10.0  # ... but a refusal only after this long: at first it is the usual race
RESOLVE_GRACE_S = 3.0  # a resolver failing "for now" (EAI_AGAIN) is retried this long


class RendezvousError(HpcjaxError):
    """Not every process arrived at the roll call in time."""


def _listen(port: int) -> socket.socket:
    if socket.has_dualstack_ipv6():
        server = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True, reuse_port=False)
    else:
        server = socket.create_server(("", port))
    return server


def gather(port: int, num_processes: int, timeout_s: float) -> list[socket.socket]:
    """Process 0: wait until every other process has checked in; return their connections."""
    deadline = time.monotonic() + timeout_s
    try:
        server = _listen(port)
    except OSError as err:
        raise RendezvousError(f"process 0 cannot listen on coordinator port {port}: {err}",
                              "another job on this node may hold the port: set JAX_COORDINATOR_PORT") from err
    arrived: dict[int, socket.socket] = {}
    with server:
        while len(arrived) < num_processes - 1:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = sorted(set(range(1, num_processes)) - set(arrived))
                error = RendezvousError(
                    f"process(es) {ranges(missing, ', ')} of {num_processes} did not arrive within {timeout_s:g} s "
                    f"(arrived: 0{', ' + ranges(sorted(arrived), ', ') if arrived else ''})",
                    "look at the missing ranks' logs (`hpcjax logs JOBID --rank R`); if they start "
                    "slowly, raise HPCJAX_INIT_TIMEOUT")
                release(list(arrived.values()), abort_word(error.message))  # they fail with the same words
                raise error
            server.settimeout(remaining)
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            conn.settimeout(max(1.0, remaining))
            try:
                rank = int(conn.recv(32).decode().strip())
            except (OSError, ValueError):
                conn.close()
                continue
            if rank in arrived:  # a retry after a broken first attempt
                arrived[rank].close()
            arrived[rank] = conn
    return list(arrived.values())


def abort_word(reason: str) -> bytes:
    return ABORT + reason.replace("\n", " ").encode()[:3000] + b"\n"


def release(conns: list[socket.socket], word: bytes = GO) -> None:
    """Tell every waiting process to go on (or that process 0 gave up)."""
    for conn in conns:
        try:
            conn.sendall(word)
        except OSError:
            pass
    for conn in conns:
        # Let each client close first, so no TIME_WAIT is left on the port here.
        try:
            conn.recv(1)
        except OSError:
            pass
        conn.close()


def delays(first_and_last: tuple[float, float]):
    """The waits between tries: doubling from the first to the last, then the last."""
    delay, last = first_and_last
    while True:
        yield delay
        delay = min(2 * delay, last)


def wait_until_listening(port: int, timeout_s: float) -> bool:
    """True once something (JAX's coordination service) accepts connections on port."""
    deadline = time.monotonic() + timeout_s
    waits = delays(POLL_S)
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("localhost", port), timeout=1.0):
                return True
        except OSError:
            time.sleep(next(waits))
    return False


def why(err: BaseException) -> str:
    """A connection error in a person's words."""
    if isinstance(err, socket.gaierror):
        return f"name not known ({err.strerror or err})"
    if isinstance(err, ConnectionRefusedError):
        return "connection refused (process 0 is not listening yet, or a firewall rejects the port)"
    if isinstance(err, (socket.timeout, TimeoutError)):
        return "timed out (a firewall may drop the packets, or the host is down)"
    if isinstance(err, OSError) and err.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
        return f"unreachable ({err.strerror})"
    return f"{type(err).__name__}: {err}"


def resolve_coordinator(host: str, port: int, process_id: int) -> None:
    """Fail fast, with the reason, when the coordinator's name does not resolve here: a
    retry would only wait out the timeout in silence."""
    deadline = time.monotonic() + RESOLVE_GRACE_S
    while True:
        try:
            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            return
        except socket.gaierror as err:
            if time.monotonic() >= deadline or err.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", -5)):
                raise RendezvousError(
                    f"process {process_id} on {socket.gethostname()}: the coordinator host {host!r} does not "
                    f"resolve here: {why(err)}",
                    f"the node names must resolve where every rank runs: check `getent hosts {host}` on this "
                    "node (its /etc/hosts or DNS); inside a container, that the image has an /etc/hosts for "
                    "the runtime to bind the node's") from err
            time.sleep(0.5)  # a resolver that failed for now (EAI_AGAIN) gets a few more tries


def check_in(host: str, port: int, process_id: int, timeout_s: float) -> None:
    """Any other process: report to process 0 and wait for its "go". It waits a little
    longer than process 0 does, so that process 0, which knows who is missing, speaks first.
    A coordinator it cannot reach is reported in this rank's log at once, then every
    SAY_EVERY_S while it keeps trying."""
    resolve_coordinator(host, port, process_id)
    timeout_s = timeout_s + max(CLIENT_GRACE_S, 0.1 * timeout_s)
    started = time.monotonic()
    deadline = started + timeout_s
    last_error: Exception | None = None
    last_said = None
    waits = delays(RETRY_S)
    while time.monotonic() < deadline:
        # A refusal in the first seconds is the usual race (process 0 still importing JAX).
        quiet_s = QUIET_REFUSED_S if isinstance(last_error, ConnectionRefusedError) else 0.0
        if last_error is not None and time.monotonic() - started >= quiet_s and (
                last_said is None or time.monotonic() - last_said >= SAY_EVERY_S):
            last_said = time.monotonic()
            say(f"hpcjax: process {process_id}: cannot reach the coordinator at {host}:{port} yet: "
                f"{why(last_error)}; still trying ({last_said - started:.0f} of {timeout_s:.0f} s)")
        try:
            with socket.create_connection((host, port), timeout=min(5.0, timeout_s)) as conn:
                conn.sendall(f"{process_id}\n".encode())
                conn.settimeout(max(0.1, deadline - time.monotonic()))
                word = _read_line(conn)
                if word == GO:
                    return
                if word.startswith(ABORT):
                    reason = word[len(ABORT):].decode(errors="replace").strip()
                    raise RendezvousError(f"process {process_id}: process 0 at {host}:{port} gave up: {reason}",
                                          "see process 0's log: `hpcjax logs JOBID --rank 0`")
                last_error = ConnectionError("process 0 closed the roll call without a go")
        except (OSError, socket.timeout) as err:
            last_error = err
        time.sleep(next(waits))
    raise RendezvousError(
        f"process {process_id}: process 0 at {host}:{port} did not release the roll call within "
        f"{timeout_s:g} s (last error: {why(last_error) if last_error else 'none'})",
        "process 0 is waiting for another process, or never started: see its log "
        "(`hpcjax logs JOBID --rank 0`)")


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n") and len(data) < 4096:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


@contextmanager
def roll_call(host: str, port: int, process_id: int, num_processes: int, timeout_s: float):
    """Around jax.distributed.initialize: everyone checks in first; process 0 lets the
    others go only once its coordination service listens, so their first connection
    succeeds (a refused one costs a gRPC reconnect backoff of a second or more)."""
    if num_processes <= 1:
        yield
        return
    if process_id != 0:
        check_in(host, port, process_id, timeout_s)
        yield
        return
    conns = gather(port, num_processes, timeout_s)
    releaser = threading.Thread(
        target=lambda: release(conns, GO if wait_until_listening(port, timeout_s) else NO_COORDINATOR),
        daemon=True)
    try:
        releaser.start()
        yield
    except BaseException:
        if releaser.is_alive():
            release(conns, NO_COORDINATOR)
        raise
    releaser.join(timeout_s)
