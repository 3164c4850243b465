"""Where SLURM's commands run and a job's files are read: this machine (`local`), or, for a
laptop, the cluster's login node over SSH. Everything that asks SLURM about a job
(launch.slurmctl) goes through a Host, so the login node and a laptop share one code path.
Standard library only.
"""

from __future__ import annotations

from hpcjax.hosts.here import LocalHost

THIS_MACHINE = LocalHost()


def this_machine() -> LocalHost:
    return THIS_MACHINE
