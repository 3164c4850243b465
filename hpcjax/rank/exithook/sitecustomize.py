"""hpcjax's exit guard for an unmodified program (hpcjax.rank.exitguard), then the site's own
sitecustomize, which this one would otherwise hide: Python imports the first it finds, and a job
puts this directory first on its ranks' PYTHONPATH. Nothing here may stop the program: a problem
is said in one line and the program runs as it would have."""

import os
import sys


def _install_guard() -> None:
    try:
        from hpcjax.rank import exitguard
    except ImportError:  # hpcjax is not on the path itself: it is this directory's package
        sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))))
        from hpcjax.rank import exitguard
    exitguard.install()


def _run_the_sites_own() -> None:
    import importlib.machinery
    import importlib.util

    others = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]
    found = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if found is None or found.loader is None:
        return
    module = importlib.util.module_from_spec(found)
    sys.modules["_site_sitecustomize"] = module
    found.loader.exec_module(module)


_HERE = os.path.dirname(os.path.abspath(__file__))
for _step in (_install_guard, _run_the_sites_own):
    try:
        _step()
    except Exception as _error:  # noqa: BLE001 - a broken hook must not break the user's program
        print(f"hpcjax: exit guard's sitecustomize: {_step.__name__}: {type(_error).__name__}: {_error}",
              file=sys.stderr)
