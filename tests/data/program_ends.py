"""Every way a Python program ends, for the exit-status matrix (issue 48): `end(how)` ends this
process that way. Run as a script (`python3 program_ends.py HOW`) it is bare Python's answer, the
status the matrix compares hpcjax's report with."""

import os
import signal
import sys

WAYS = ("return", "exit3", "raise3", "main4", "error", "hooked", "interrupt", "os_exit5", "kill")


def main() -> int:
    return 4


def end(how: str) -> None:
    """Return (how == "return"), or end the program as `how` says."""
    if how == "exit3":
        sys.exit(3)
    if how == "raise3":
        raise SystemExit(3)
    if how == "main4":
        raise SystemExit(main())
    if how == "error":
        raise ValueError("the program failed")
    if how == "hooked":
        sys.excepthook = lambda kind, value, trace: print(f"custom hook: {kind.__name__}: {value}", file=sys.stderr)
        raise ValueError("the program failed under a custom excepthook")
    if how == "interrupt":
        raise KeyboardInterrupt
    if how == "os_exit5":
        sys.stdout.flush()
        os._exit(5)
    if how == "kill":
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    assert how == "return", how


if __name__ == "__main__":
    end(sys.argv[1])
