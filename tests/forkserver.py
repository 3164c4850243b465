"""`python -m hpcjax ...` for the tests, forked from one warm Python per test process.

The suite runs the hpcjax command about 2,000 times (run_hpcjax). A fresh interpreter spends about
0.06 s starting and 0.1 s importing hpcjax and Jinja before the verb's own work: a fifth of the
pure tier's CPU and minutes of the main run's, on two cores where every CPU-second is wall time.
Here one Python per test process (the zygote, started at the first call) imports hpcjax's command
side once, then forks a child per call. The child is the command: it takes the caller's stdin,
stdout and stderr (passed over a Unix socket), its working directory and its whole environment,
then runs `hpcjax` as `python -m hpcjax` does (runpy, the working directory first on sys.path)
and ends as Python ends (threads joined, atexit run, streams flushed, SystemExit's and an uncaught
exception's exit status, Ctrl-C's signal). Its module state is the freshly imported one: nothing
a call did reaches the next, since each is its own fork.

What it cannot be, it leaves to a fresh interpreter (`fresh_python_needed`): an environment whose
interpreter settings differ from the zygote's (PYTHON* but PYTHONUNBUFFERED, which the child applies;
the locale; the loader's LD_*), a working directory that is not there, or the
tests run with HPCJAX_TEST_FRESH_PYTHON=1 (the whole suite the old way, to compare). It imports
no module that loads NumPy (a BLAS's threads do not survive a fork), and checks that it runs one
thread before it serves. tests/test_forkserver.py holds it to a fresh interpreter's answers.
"""

from __future__ import annotations

import atexit
import json
import locale
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

# Read when a Python starts, so a child of the zygote keeps the zygote's: a call that sets any of
# them differently gets a fresh interpreter.
INTERPRETER_SETTINGS = ("PYTHON", "LANG", "LC_", "LD_")
# The command side's modules that load NumPy (and JAX): never imported by the zygote.
NUMPY_ROOMS = ("hpcjax.rank.", "hpcjax.train.")


# ...but for one the child applies itself: -u's streams, written through.
APPLIED_IN_THE_CHILD = ("PYTHONUNBUFFERED",)


def interpreter_settings(environ) -> dict:
    return {k: v for k, v in environ.items() if k.startswith(INTERPRETER_SETTINGS) and k not in APPLIED_IN_THE_CHILD}


# ---------------------------------------------------------------------------------------- zygote

def warm_up() -> None:
    """Import hpcjax's command side (every module but those that load NumPy) and the libraries
    its verbs import lazily, so that no call pays for them."""
    import importlib
    import pkgutil

    import hpcjax
    for module in pkgutil.walk_packages(hpcjax.__path__, "hpcjax."):
        if module.name.endswith(".__main__") or module.name.startswith(NUMPY_ROOMS):
            continue
        importlib.import_module(module.name)
    importlib.import_module("hpcjax.cli")
    if "numpy" in sys.modules:
        raise SystemExit("forkserver: warming up imported NumPy, whose threads a fork loses")
    if len(os.listdir("/proc/self/task")) != 1:
        raise SystemExit("forkserver: the zygote runs more than one thread, which a fork loses")


def serve(listener: socket.socket) -> None:
    """Fork a supervisor per call; it forks the command and reports its pid, then its status."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the supervisors are reaped by the kernel
    watch = selectors.DefaultSelector()
    watch.register(listener, selectors.EVENT_READ)
    watch.register(sys.stdin, selectors.EVENT_READ)  # EOF: the test process is gone
    while True:
        for key, _ in watch.select():
            if key.fileobj is sys.stdin:
                return
            connection, _ = listener.accept()
            if os.fork() == 0:
                try:
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    listener.close()
                    supervise(connection)
                finally:
                    os._exit(0)  # never back into the zygote's loop
            connection.close()


def supervise(connection: socket.socket) -> None:
    message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        try:
            connection.close()
            run_command(request, fds)
        finally:
            os._exit(1)  # run_command ends the process; this only if it could not start the command
    for fd in fds:
        os.close(fd)
    connection.sendall(struct.pack("!i", pid))
    _, status = os.waitpid(pid, 0)
    connection.sendall(struct.pack("!i", os.waitstatus_to_exitcode(status)))


def run_command(request: dict, fds: list[int]) -> None:
    """Become `python -m hpcjax ARGS` in the caller's directory, environment and streams."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path.insert(0, os.getcwd())  # as `python -m` puts it there
    sys.argv = ["-m", *request["args"]]
    if os.environ.get("PYTHONUNBUFFERED"):
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(write_through=True)
    import runpy
    import traceback

    code = 0
    try:
        runpy._run_module_as_main("hpcjax")
    except SystemExit as ended:
        code = exit_code_of(ended.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    end_as_python_does(code)


def exit_code_of(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def end_as_python_does(code: int) -> None:
    threading._shutdown()  # non-daemon threads are waited for
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            code = code or 120  # as Python's own exit when a stream cannot be flushed
    if code == -signal.SIGINT:  # an uncaught Ctrl-C ends the process by the signal, as Python's does
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def zygote_main(path: str) -> None:
    sys.path.pop(0)  # this folder: the command's sys.path starts with its own working directory
    warm_up()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    serve(listener)


# ---------------------------------------------------------------------------------------- caller

class Zygote:
    """The test process's zygote, started at the first call and ended with the process."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="hpcjax-forkserver.")
        self.path = os.path.join(self.folder, "socket")
        self.settings = interpreter_settings(os.environ)
        self.process = subprocess.Popen([sys.executable, __file__, self.path], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, cwd=self.folder)
        self.ready = self.process.stdout.readline().strip() == "ready"
        atexit.register(self.close)

    def close(self) -> None:
        self.process.stdin.close()  # the zygote ends at EOF
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        for name in os.listdir(self.folder):
            os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)


_zygote: Zygote | None = None
_zygote_lock = threading.Lock()


def zygote() -> Zygote | None:
    global _zygote
    with _zygote_lock:
        if _zygote is None or _zygote.process.poll() is not None:
            _zygote = Zygote()
        return _zygote if _zygote.ready else None


def fresh_python_needed(cwd, env: dict) -> bool:
    if os.environ.get("HPCJAX_TEST_FRESH_PYTHON") == "1" or not os.path.isdir(cwd or "."):
        return True  # the second: subprocess.run's own error
    warm = zygote()
    return warm is None or interpreter_settings(env) != warm.settings


def run(args: list[str], cwd, env: dict, timeout: float) -> subprocess.CompletedProcess:
    """subprocess.run([python, -m, hpcjax, *args], capture_output=True, text=True, ...)'s answer."""
    argv = [sys.executable, "-m", "hpcjax", *args]
    if fresh_python_needed(cwd, env):
        return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    deadline = time.monotonic() + timeout
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(_zygote.path)
        request = {"args": list(args), "cwd": os.path.abspath(cwd or os.getcwd()), "env": env}
        socket.send_fds(connection, [json.dumps(request).encode()], [0, out_write, err_write])
    finally:
        os.close(out_write)
        os.close(err_write)
    pid = receive_int(connection)
    streams = read_until_closed({out_read: bytearray(), err_read: bytearray()}, deadline)
    connection.settimeout(max(0.0, deadline - time.monotonic()) + 0.5)
    try:
        if streams is None:
            raise TimeoutError
        returncode = receive_int(connection)
    except TimeoutError:
        os.kill(pid, signal.SIGKILL)
        raise subprocess.TimeoutExpired(argv, timeout) from None
    finally:
        connection.close()
    out, err = (text_of(streams[fd]) for fd in (out_read, err_read))
    return subprocess.CompletedProcess(argv, returncode, out, err)


def receive_int(connection: socket.socket) -> int:
    data = b""
    while len(data) < 4:
        chunk = connection.recv(4 - len(data))
        if not chunk:
            raise RuntimeError("forkserver: the zygote's supervisor ended without an answer")
        data += chunk
    return struct.unpack("!i", data)[0]


def read_until_closed(buffers: dict[int, bytearray], deadline: float) -> dict[int, bytearray] | None:
    """Both pipes read to EOF (None at the deadline), as communicate() reads them."""
    watch = selectors.DefaultSelector()
    for fd in buffers:
        watch.register(fd, selectors.EVENT_READ)
    try:
        while watch.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            for key, _ in watch.select(left):
                chunk = os.read(key.fd, 65536)
                if chunk:
                    buffers[key.fd] += chunk
                else:
                    watch.unregister(key.fd)
        return buffers
    finally:
        watch.close()
        for fd in buffers:
            os.close(fd)


def text_of(data: bytearray) -> str:
    """As subprocess's text mode decodes (the locale's encoding, universal newlines)."""
    return bytes(data).decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


if __name__ == "__main__":
    zygote_main(sys.argv[1])
