"""Every HPCJAX_* environment variable hpcjax reads, in one table: who sets it and what it does.
Each variable's value is read and checked by the module that owns it (timeouts, the preflight's
floors, the records, ...); this table owns only which names exist, so that a misspelt one in a
job's --env or a profile's env is refused with the name meant (tests/test_envnames.py holds the
table to the names the code reads). Standard library only.
"""

from __future__ import annotations

import difflib

from hpcjax.protocol import timeouts as T  # the defaults said below are theirs
from hpcjax.values.errors import SpecError

PREFIX = "HPCJAX_"
YOU, JOB = "you (--env, a profile's env, or your shell)", "the job's script (set by hpcjax)"

NAMES = {
    # what you may set
    "HPCJAX_HOME": (YOU, "where hpcjax keeps its job records and the catalog of runs (default ~/.hpcjax)"),
    "HPCJAX_PROFILES": (YOU, "the site profiles file (default ~/.config/hpcjax/profiles.toml)"),
    "HPCJAX_BACKEND": (YOU, "the backend `auto` means: slurm or local"),
    "HPCJAX_CLUSTER": (YOU, "the cluster a laptop reaches by default (an SSH destination or a profile)"),
    "HPCJAX_BIND_SOURCE": (YOU, "hpcjax's package directory as the compute nodes see it"),
    "HPCJAX_COMPILE_CACHE": (YOU, "JAX's persistent compilation cache of the job (a directory, or off)"),
    "HPCJAX_PY_SPY": (YOU, "the py-spy binary `hpcjax stacks` runs on the nodes"),
    "HPCJAX_HANG_FLOOR": (YOU, f"the hang watch's shortest timeout, in seconds (default {T.DEFAULT_FLOOR_S:g})"),
    "HPCJAX_HANG_CEILING": (YOU, f"the hang watch's longest timeout, in seconds (default {T.DEFAULT_CEILING_S:g}; "
                                 "0: no watch)"),
    "HPCJAX_HANG_FACTOR": (YOU, f"the hang watch's timeout over the longest step seen (default {T.DEFAULT_FACTOR:g})"),
    "HPCJAX_STEP_TIMEOUT": (YOU, "a fixed hang timeout, in seconds (0: no watch)"),
    "HPCJAX_INIT_TIMEOUT": (YOU, "how long every rank waits for the others at the start, in seconds "
                                 f"(default {T.DEFAULT_INIT_TIMEOUT_S})"),
    "HPCJAX_HEARTBEAT_TIMEOUT": (YOU, "how long a silent rank may go unheard, in seconds "
                                      f"(default {T.DEFAULT_HEARTBEAT_TIMEOUT_S})"),
    "HPCJAX_EXIT_GUARD": (YOU, "1 (the default) guards a distributed program's exit, 0 does not"),
    # the preflight's floors' defaults are preflight_rules.DEFAULTS' (not imported: `render` loads this)
    "HPCJAX_PREFLIGHT_RATIO": (YOU, "the preflight's floor: a node's throughput over the median"),
    "HPCJAX_PREFLIGHT_GFLOPS": (YOU, "the preflight's floor of matmul GFLOP/s per device"),
    "HPCJAX_PREFLIGHT_BUSBW": (YOU, "the preflight's floor of all-reduce bus bandwidth, GB/s"),
    "HPCJAX_PREFLIGHT_FREE_GB": (YOU, "the preflight's floor of free space in the job's directory, GB"),
    # what the job's script sets for the ranks
    "HPCJAX_NODES": (JOB, "the layout's nodes"),
    "HPCJAX_GPUS_PER_NODE": (JOB, "the layout's GPUs per node"),
    "HPCJAX_GPUS_PER_PROCESS": (JOB, "the layout's GPUs per process"),
    "HPCJAX_LOG_DIR": (JOB, "the job's log directory, absolute"),
    "HPCJAX_STOP_MARKER": (JOB, "the file a rank that stopped on the warning leaves"),
    "HPCJAX_JOB_KEY": (JOB, "a job's name inside a hold (1234.s2)"),
    "HPCJAX_NODE_NAME": (JOB, "a local rank's node name (local0, local1)"),
    "HPCJAX_PLATFORM": (JOB, "the local backend's JAX platform (cpu)"),
    "HPCJAX_COORDINATOR_HOST": (JOB, "the node of the coordinator, in the batch script"),
}
# Read once, now refused with what replaced them.
RETIRED = {"HPCJAX_EXIT_BOUND": "HPCJAX_EXIT_GUARD"}


def check(names, where: str = "--env") -> None:
    """A job's variables: one that starts with HPCJAX_ but names nothing hpcjax reads is a typo
    that would be silently ignored (SpecError naming the closest)."""
    for name in names:
        if not name.startswith(PREFIX) or name in NAMES or name in RETIRED:
            continue
        close = difflib.get_close_matches(name, list(NAMES), n=1, cutoff=0.6)
        ours = ", ".join(n for n, (who, _) in NAMES.items() if who == YOU)
        raise SpecError(f"{where} {name}: hpcjax reads no variable of that name",
                        (f"did you mean {close[0]}? " if close else "") + f"the ones you may set: {ours}",
                        field="env")
