"""hpcjax's exit guard for an unmodified program (hpcjax.rank.watch.exitguard), then the site's own
sitecustomize, which this one would otherwise hide: Python imports the first it finds, and a job
puts this directory first on its ranks' PYTHONPATH.

Every Python of the job runs this at its start: the ranks, but also their children, pip, a
prologue's Python. So it imports nothing and changes nothing but one entry first on
sys.meta_path, which is asked about each module the program imports for the first time and finds
none: when `jax` is first imported, and only then, it arms the guard (which acts at exit, and only
where JAX's distributed client runs). Nothing here may stop the program: a problem is said in one line and the
program runs as it would have.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


class _JaxFirst:
    """First on sys.meta_path, so that it sees `jax` before Python's own finders find it; it
    finds nothing itself. It stays there once the guard is armed: Python is iterating over
    sys.meta_path when it asks, and an entry removed then would make it skip the next finder."""

    armed = False

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "jax" and not cls.armed:
            cls.armed = True
            _arm()
        return None


def _arm() -> None:
    try:
        try:
            from hpcjax.rank.watch import exitguard
        except ImportError:  # hpcjax is not on the path itself: it is this directory's package
            sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))))
            from hpcjax.rank.watch import exitguard
        exitguard.arm()
    except Exception as error:  # noqa: BLE001 - a broken hook must not break the user's program
        print(f"hpcjax: exit guard's sitecustomize: not armed: {type(error).__name__}: {error}", file=sys.stderr)


def _run_the_sites_own() -> None:
    """The sitecustomize Python would have imported without this one, made what `import
    sitecustomize` gives the program (as Python's own site would have left it)."""
    finder = sys.modules["_frozen_importlib_external"].PathFinder  # importlib.machinery's, already loaded
    others = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]
    found = finder.find_spec("sitecustomize", others)
    if found is None or found.loader is None:
        return
    ours = sys.modules.get("sitecustomize")
    module = sys.modules["_frozen_importlib"].module_from_spec(found)
    sys.modules["sitecustomize"] = module
    try:
        found.loader.exec_module(module)
    except BaseException:
        sys.modules["sitecustomize"] = ours
        raise


sys.meta_path.insert(0, _JaxFirst)
try:
    _run_the_sites_own()
except Exception as _error:  # noqa: BLE001 - a broken site hook must not break the user's program
    print(f"hpcjax: exit guard's sitecustomize: the site's own sitecustomize failed: {type(_error).__name__}: "
          f"{_error}", file=sys.stderr)
