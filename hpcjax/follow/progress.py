"""Progress, said on stderr (stdout is the data a program may read): one owner of how hpcjax
tells the user what it is doing while it waits. `source` names the verb a line comes from where
several speak at once (`hpcjax site: ...`)."""

import sys


def say(text: str, source: str = "") -> None:
    print(f"hpcjax {source}: {text}" if source else text, file=sys.stderr, flush=True)
