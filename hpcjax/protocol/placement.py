"""Where a job's ranks run, named the same way by every rank and every follower: this process's
node (SLURM's name, else the local backend's), the step's nodes, and the node the layout places
another rank on (blocks, as srun places tasks, and as the local backend does). Standard library
only, and imported by the rank side too."""

from __future__ import annotations

import os

from hpcjax.protocol.contract import NODE_NAME_ENV, Layout

# A node's name as the job followers know it: SLURM's, else the local backend's.
NODE_NAME_VARS = ("SLURMD_NODENAME", NODE_NAME_ENV)


def node_name(environ=os.environ) -> str:
    """This process's node as `hpcjax status` and the failure report name it."""
    import socket  # here, not at the top: the local backend's verbs import this module, few ask the node's name

    return next((environ[v] for v in NODE_NAME_VARS if environ.get(v)), socket.gethostname())


def slurm_node_name(environ=os.environ) -> str | None:
    """The node as SLURM names it, in a process SLURM started (None elsewhere): several slurmd
    may share one host, so a host's processes are told apart by it."""
    return environ.get(NODE_NAME_VARS[0]) or None


def local_node_name(rank: int, layout: Layout) -> str:
    """The node a rank of the local backend stands for: block placement, as srun's."""
    return f"local{layout.node_of(rank)}"


# What srun sets for every task: the step's nodes (a step may use fewer than the job's), else the job's.
NODELIST_VARS = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST")


def step_nodelist(environ=os.environ) -> tuple[str, str]:
    """(the variable, the step's compressed nodelist), "" for both outside a SLURM step."""
    return next(((var, environ[var]) for var in NODELIST_VARS if environ.get(var)), ("", ""))


def rank_node(rank: int, environ=os.environ) -> str | None:
    """The node that the job's layout places a rank on, as seen from another rank of the job: the
    local backend's name, or the step's nodelist in blocks, as srun places tasks; None when the
    layout or the nodelist is not known (or not a nodelist)."""
    from hpcjax.values.nodelist import HostlistError, expand_hostlist

    layout = Layout.from_env(environ)
    if layout is None:
        return None
    if environ.get(NODE_NAME_ENV):
        return local_node_name(rank, layout)
    try:
        nodes = expand_hostlist(step_nodelist(environ)[1])
    except HostlistError:
        return None
    return nodes[layout.node_of(rank)] if layout.node_of(rank) < len(nodes) else None
