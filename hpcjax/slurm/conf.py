"""Whether SLURM's commands can read their configuration here: checked before any is run, since
a SLURM_CONF that names no file makes each of them retry for 60 s, silently to a caller that
captures its output."""

from __future__ import annotations

import os

from hpcjax.values.errors import SlurmNotFound


def check_conf(environ=None) -> None:
    """SLURM_CONF naming no readable file: every SLURM command would retry it for 60 s and then fail
    (s_p_parse_file), silently to a caller that captures its output. Said at once instead."""
    conf = (os.environ if environ is None else environ).get("SLURM_CONF")
    if conf is not None and not os.access(conf, os.R_OK):
        raise SlurmNotFound(f"SLURM_CONF={conf!r} names no file this user can read: SLURM's commands would "
                            "wait 60 s for it and fail", "unset SLURM_CONF (SLURM then reads its own default) or "
                            "point it at the cluster's slurm.conf (`scontrol show config` on the login node names it)")
