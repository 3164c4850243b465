"""The one voice hpcjax speaks to its user with (issue 64): every message, on the login side and
on the ranks, goes to stderr through here, never through a bare print: stdout is the data a
program may read, and what is said, and how, has one owner.

- `say(text, source)`: progress, notes and refusals, whole lines at once and flushed (a line
  of a rank's log is never interleaved with another's half line); `source` names the verb a line
  comes from where several speak at once (`hpcjax site: ...`).
- `relay(text)`: another program's words passed on as they came (Jupyter's log), unchanged.

The exit guard's sitecustomize is the one exception: it runs in every Python of a job before
anything of hpcjax may be imported, and imports nothing itself.
"""

import sys


def say(text: str, source: str = "") -> None:
    print(f"hpcjax {source}: {text}" if source else text, file=sys.stderr, flush=True)


def relay(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()
