"""A cancel that a second Ctrl-C cannot stop halfway. The first Ctrl-C starts the cancel of a
job the caller was waiting on; a second one (a user pressing again, or a SIGINT to the whole
process group) raised a KeyboardInterrupt from inside the cancel, and the job stayed RUNNING
(issue 63). While the cancel runs, SIGINT is ignored here and by the programs it starts (scancel,
ssh): a process started with a signal ignored keeps it ignored."""

from __future__ import annotations

import contextlib
import signal
import threading


@contextlib.contextmanager
def uninterrupted():
    """SIGINT ignored for the block (in the main thread: elsewhere Python cannot change a handler,
    and no KeyboardInterrupt is raised there anyway)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
