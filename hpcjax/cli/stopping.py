"""A `kill` (SIGTERM) stops a verb that serves in the foreground (a tunnel, a Jupyter) as Ctrl-C does,
so what it opened is closed on the way out, never left forwarding or serving."""

from __future__ import annotations

import contextlib
import signal


@contextlib.contextmanager
def sigterm_as_ctrl_c():
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
