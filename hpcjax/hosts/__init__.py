"""Where SLURM's commands run and a job's files are read: this machine (`here`), or, for a
laptop, the cluster's login node over SSH. Everything that asks SLURM about a job
(slurm.controller) goes through a Host, so the login node and a laptop share one code path.
Standard library only.

`ssh` is the login node over OpenSSH; `ship` sends code and files there with rsync.
"""

from __future__ import annotations

from hpcjax.hosts.here import LocalHost

THIS_MACHINE = LocalHost()


def this_machine() -> LocalHost:
    return THIS_MACHINE
