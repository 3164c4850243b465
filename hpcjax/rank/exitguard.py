"""The exit guard: a program that has ended its work ends its process, whatever JAX's shutdown does.

When a program of a multi-process job returns, JAX's exit handler runs its distributed
shutdown: a barrier of every process, bounded only by `shutdown_timeout_seconds` (300 s by
default), then the coordination service's end in process 0. A process that reaches its end
while another still works (rank 0 writing its results) waits there rightly. But a job whose
processes have all printed their last line has been seen to sit ~150 s at that exit on a
SLURM cluster, holding every node, and then to be cut by SLURM's time-limit warning (issue 36).

The guard changes one thing once the program has returned and its threads have ended (its exit
handler is registered at Python's thread shutdown, so it runs first of all exit handlers): JAX's shutdown is preceded by a barrier of the guard's own, so that
every process knows the others have ended their programs too; from then on JAX's shutdown has
nothing left to wait for, and if it has not finished after HPCJAX_EXIT_BOUND seconds (default
10; 0: off) the process ends with the program's own exit status, its output flushed. A process
that never reaches its end (died, or works on) fails the guard's barrier, and JAX's own shutdown
runs as it would have, with its own errors. The guard's barrier waits the hang watch's floor
(300 s, JAX's own shutdown timeout too), and the exit is watched with that floor
(hangwatch.program_returned): a process that never ends is named, with its stacks. The
preemption warning (USR2) is ignored once the program has returned: the work it warns about is done.

`install()` is called by hpcjax's runtime (train, the Python API's workers, the checks) and by
the guard's `sitecustomize` (timeouts.EXIT_HOOK_DIR), which the job puts first on the ranks'
PYTHONPATH so that an unmodified script gets the bound too. Standard library only; JAX is only
looked at, never imported.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time

from hpcjax import contract
from hpcjax.rank import hangwatch
from hpcjax.timeouts import EXIT_BOUND_ENV, HangSettings, exit_bound_s

BARRIER = "hpcjax/exit"
JAX_SHUTDOWN_TIMEOUT_S = 300  # JAX's own default: how long its shutdown waits for every process
HOST_MARGIN_S = 2.0  # process 0 serves the coordination service: it leaves last, or the others' agents abort


class _Guard:
    bound = 0
    status = 0  # the program's exit status as far as it is known: sys.exit's, 1 after an uncaught exception


_guard: _Guard | None = None


def install(environ=os.environ) -> bool:
    """Watch this process's exit (once; a second call does nothing). False when the guard is
    off (HPCJAX_EXIT_BOUND=0) or this Python cannot hook its shutdown."""
    global _guard
    if _guard is not None:
        return True
    bound = exit_bound_s(environ)
    register = getattr(threading, "_register_atexit", None)  # 3.9+: called at the thread shutdown
    if not bound or register is None:
        return False
    _guard = _Guard()
    _guard.bound = bound
    _record_exit_status()
    register(_program_returned)
    return True


def barrier_timeout_s(environ=os.environ) -> float:
    """How long a process that ended its program waits for the others to end theirs: the hang
    watch's floor (the exit is watched with it, and its default is JAX's own 300 s), or JAX's
    shutdown timeout when the watch is off."""
    try:
        settings = HangSettings.from_env(environ)
    except Exception:  # a bad knob is said by the watch
        return JAX_SHUTDOWN_TIMEOUT_S
    return JAX_SHUTDOWN_TIMEOUT_S if settings.off else settings.floor_s


def _status_of(code) -> int:
    """The exit status Python gives SystemExit(code)."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _record_exit_status() -> None:
    real_exit, previous_hook = sys.exit, sys.excepthook

    def recording_exit(code=None):
        _guard.status = _status_of(code)
        real_exit(code)

    def recording_hook(kind, value, trace):
        _guard.status = 130 if issubclass(kind, KeyboardInterrupt) else 1
        previous_hook(kind, value, trace)

    sys.exit, sys.excepthook = recording_exit, recording_hook


def _program_returned() -> None:
    """At Python's thread shutdown, before the program's other threads are joined: the exit proper
    begins after them, with this last-registered (so first-run) exit handler. A program whose main
    thread returns while its threads work on is not done."""
    atexit.register(_exit_began)


def _exit_began() -> None:
    try:  # the warning is for work in progress, and the work is done
        signal.signal(getattr(signal, f"SIG{contract.WARNING_SIGNAL}"), signal.SIG_IGN)
    except (ValueError, OSError, AttributeError):
        pass
    try:
        hangwatch.program_returned()
    except Exception as error:  # a bad knob: the job was checked at submission, a rank may still differ
        print(f"hpcjax: the exit is not watched: {error}", file=sys.stderr, flush=True)
    distributed = sys.modules.get("jax._src.distributed")
    state = getattr(distributed, "global_state", None)
    if state is None or getattr(state, "client", None) is None:
        return  # not a distributed JAX program, or it shut down itself
    original = state.shutdown
    state.shutdown = lambda: _bounded_shutdown(state, original)


def _bounded_shutdown(state, original) -> None:
    try:
        state.client.wait_at_barrier(BARRIER, int(barrier_timeout_s() * 1000))
    except Exception as error:  # a process never reached its end: JAX's own shutdown says what happened
        said = (str(error).strip().splitlines() or [type(error).__name__])[0]
        print(f"hpcjax: process {getattr(state, 'process_id', None)}: not every process reached the end of its "
              f"program ({said[:300]}); JAX's own shutdown follows, unbounded", file=sys.stderr, flush=True)
        return original()
    failure: list[BaseException] = []
    done = threading.Event()

    def shut_down() -> None:
        try:
            original()
        except BaseException as error:  # re-raised below, where JAX's exit handler would have raised it
            failure.append(error)
        finally:
            done.set()

    threading.Thread(target=shut_down, name="hpcjax-jax-shutdown", daemon=True).start()
    if done.wait(_guard.bound):
        if failure:
            raise failure[0]
        return
    _end_stalled(getattr(state, "process_id", None))


def _end_stalled(process_id: int | None) -> None:
    print(f"hpcjax: process {process_id}: every process has ended its program, but JAX's distributed "
          f"shutdown had not finished {_guard.bound} s later; ending this process with the program's exit "
          f"status {_guard.status} (the bound is {EXIT_BOUND_ENV}; 0 turns it off)", file=sys.stderr)
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if process_id == 0:
        time.sleep(HOST_MARGIN_S)
    os._exit(_guard.status)

