"""The exit guard: a distributed JAX program ends within seconds of its last line, with its own
exit status.

Why (issue 48, reproduced with bare `sbatch` + `srun`, no hpcjax at all): JAX dispatches
asynchronously, so a program that ends by printing a result's shape returns while the
collective that computes it is still in flight. Then JAX's exit handler runs its distributed
shutdown (a barrier of every process, then process 0 ends the coordination service), which
does not wait for that work. A process whose collective had not yet made its communicator
(gloo's `connectFullMesh`, over the coordination service's key-value store) finds the store gone,
its collective fails, and it exits; the others sit in `gloo::transport::tcp::Pair::
waitUntilConnected` for peers that no longer exist, and their interpreter's final garbage
collection, destroying JAX's client, joins that thread: ~150 s at 2 nodes x 4 ranks, in 4 of 6 jobs.

The guard acts in a process with a distributed JAX client only (every other Python of the job,
its children, pip, a prologue, is left exactly as it would be), once the program has returned
and its threads are joined (its exit handler is registered at Python's thread shutdown, so it
runs first of all exit handlers):

1. the exit is watched by the hang watch with its floor (hangwatch.program_returned): a process
   that never ends is named, with its stacks; the preemption warning (USR2) is ignored, as the
   work it warns about is done;
2. a barrier of the guard's own (the coordination service's, bounded by the floor): every
   process has ended its program; one still working (process 0 writing results) is waited for;
3. the work in flight is drained: a collective of every device of the job
   (`jax.experimental.multihost_utils.sync_global_devices`, JAX's "barrier across all
   hosts/devices"), blocked on. It completes only after every collective dispatched before it,
   in every process: XLA's CPU client schedules one collective at a time, each after the last
   one's end (xla/pjrt/cpu/cpu_client.cc, "Schedule only one collective at a time"), and on a GPU
   a device's work runs in order on its stream. A computation without collectives ends by itself;
4. nothing else: JAX's own exit handler shuts down as it always does, with nothing left in
   flight, and the interpreter ends with the status it computed itself. The guard never chooses
   an exit status: Python does not show a program's `raise SystemExit(n)` to an exit handler,
   so a guard that ended the process itself could only guess it.

A barrier that fails (a process died or never returned) is said, and JAX's own shutdown follows;
the hang watch names a process that then never ends.

`arm()` is called by hpcjax's runtime (train, the Python API's workers, the checks) and by the
guard's `sitecustomize` (timeouts.EXIT_HOOK_DIR) when a program first imports JAX: a job puts that
directory first on its ranks' PYTHONPATH, so that an unmodified script is guarded too.
HPCJAX_EXIT_GUARD=0 turns the guard off. Standard library only until the exit of a process
that imported JAX.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading

from hpcjax.protocol import contract
from hpcjax.rank.watch import hangwatch
from hpcjax.protocol.timeouts import HangSettings, exit_guard_on
from hpcjax.values.voice import say

BARRIER = "hpcjax/exit"
DRAIN = "hpcjax/exit-drain"
JAX_SHUTDOWN_TIMEOUT_S = 300  # JAX's own default: how long its shutdown waits for every process

_armed_pid: int | None = None  # the process that armed the guard: a forked child's exit is its own


def arm(environ=os.environ) -> bool:
    """Guard this process's exit, if it turns out to run distributed JAX (once; again does
    nothing). False when the guard is off (HPCJAX_EXIT_GUARD=0)."""
    global _armed_pid
    if _armed_pid == os.getpid():
        return True
    try:
        on = exit_guard_on(environ)
    except Exception:  # a bad value was refused at submission; a rank that still has one stays unguarded
        on = False
    if not on:
        return False
    _armed_pid = os.getpid()
    threading._register_atexit(_program_returned)  # noqa: SLF001 - the one hook at the thread shutdown
    return True


def armed() -> bool:
    """Whether this process's exit is guarded (for a program, or a test, that wants to know)."""
    return _armed_pid == os.getpid()


def barrier_timeout_s(environ=os.environ) -> float:
    """How long a process that ended its program waits for the others to end theirs: the hang
    watch's floor (the exit is watched with it, and its default is JAX's own 300 s), or JAX's
    shutdown timeout when the watch is off."""
    try:
        settings = HangSettings.from_env(environ)
    except Exception:  # a bad knob is said by the watch
        return JAX_SHUTDOWN_TIMEOUT_S
    return JAX_SHUTDOWN_TIMEOUT_S if settings.off else settings.floor_s


def distributed_client() -> tuple[object | None, int | None]:
    """JAX's distributed client in this process and the process's id; (None, None) where JAX is
    not imported, not distributed, was shut down by the program itself, or this is a child forked
    after the guard was armed."""
    state = getattr(sys.modules.get("jax._src.distributed"), "global_state", None)
    if os.getpid() != _armed_pid or getattr(state, "client", None) is None:
        return None, None
    return state.client, getattr(state, "process_id", None)


def _program_returned() -> None:
    """At Python's thread shutdown, before the program's other threads are joined: the exit proper
    begins after them, with this last-registered (so first-run) exit handler. A program whose main
    thread returns while its threads work on is not done."""
    atexit.register(_exit_began)


def _exit_began() -> None:
    client, process_id = distributed_client()
    if client is None:
        return
    try:
        _finish(client, process_id)
    finally:
        _keep_the_interrupt()


def _finish(client, process_id) -> None:
    try:  # the warning is for work in progress, and the work is done
        signal.signal(getattr(signal, f"SIG{contract.WARNING_SIGNAL}"), signal.SIG_IGN)
    except (ValueError, OSError, AttributeError):
        pass
    try:
        hangwatch.program_returned()
    except Exception as error:  # a bad knob: the job was checked at submission, a rank may still differ
        _say(process_id, f"the exit is not watched: {error}")
    try:
        client.wait_at_barrier(BARRIER, int(barrier_timeout_s() * 1000))
    except Exception as error:  # a process never reached its end: JAX's own shutdown says what happened
        _say(process_id, f"not every process reached the end of its program ({_first_line(error)}); "
                         "JAX's own shutdown follows")
        return
    try:
        _drain()
    except Exception as error:  # the work in flight failed: JAX's shutdown follows, the hang watch bounds it
        _say(process_id, f"the work in flight did not finish ({_first_line(error)}); JAX's own shutdown follows")


def _keep_the_interrupt() -> None:
    """A program ended by an uncaught KeyboardInterrupt dies by SIGINT once the interpreter has
    finished (status 130 in a shell). CPython keeps that in a flag which any code it runs from a
    string clears (exec and eval of text: a first import of `socket` at exit, which defines named
    tuples, is enough), and the guard imports at exit: measured, 130 became 1. The flag is set
    again the way CPython sets it, by a KeyboardInterrupt out of code run from a string
    (Python/pythonrun.c, run_eval_code_obj). CPython shows that ending as `sys.last_type`."""
    if getattr(sys, "last_type", None) is KeyboardInterrupt:
        try:
            exec("raise KeyboardInterrupt")  # noqa: S102 - a constant: sets CPython's flag, see above
        except KeyboardInterrupt:
            pass


def _drain() -> None:
    """Wait until every collective this job dispatched has completed in every process (the
    module's docstring says why a collective of every device does that). Nothing to wait for
    where the program never started a backend."""
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized():
        return
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(DRAIN)


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]


def _say(process_id, text: str) -> None:
    say(f"hpcjax: process {process_id}: {text}")
