"""Every SLURM release a user may meet: each option hpcjax gives a SLURM command, with the oldest
release whose man page has it, and the behaviour changes between releases that hpcjax's command
lines allow for. Read from SchedMD's man pages (doc/man/man1/*.1) and RELEASE_NOTES at each
release's first tag, 20.02 to 25.11; docs/slurm-versions.md is this table for people, and
tests/launch/test_slurm_versions.py holds every command builder and the batch script to it.

A cluster's release is `scontrol --version` ("slurm 22.05.8"). Where an option is newer than
the cluster, the builder leaves it out, and only where the older behaviour is what the option asks
for: `srun --overlap` (20.11) asks a step to share its job's resources, which every step did
before 20.11."""

from __future__ import annotations

import re

FLOOR = (20, 11)  # the oldest release hpcjax is written for (older ones are said, once)
NEWEST_READ = (25, 11)  # the newest release whose man pages the table was read from

# (command, option): the oldest release that has it. 20.02 means "20.02 or older": the table starts there.
OPTIONS: dict[tuple[str, str], tuple[int, int]] = {
    **{("sbatch", o): (20, 2) for o in (
        "--parsable", "--job-name", "--nodes", "--ntasks-per-node", "--gpus-per-node", "--time", "--cpus-per-task",
        "--mem", "--partition", "--account", "--qos", "--constraint", "--exclusive", "--exclude", "--output",
        "--array", "--dependency", "--kill-on-invalid-dep", "--signal", "--requeue", "--open-mode", "--test-only",
        "--gres", "--gpus-per-task", "--wrap")},
    **{("srun", o): (20, 2) for o in (
        "--kill-on-bad-exit", "--unbuffered", "--label", "--output", "--ntasks", "--ntasks-per-node",
        "--gpus-per-task", "--cpus-per-task", "--nodes", "--nodelist", "--exclude", "--time", "--signal", "--jobid",
        "--quiet", "--export", "--pty", "--job-name", "--gres", "--partition", "--gpus-per-node", "--help",
        "--gpu-bind", "--version")},
    ("srun", "--overlap"): (20, 11),
    **{("squeue", o): (20, 2) for o in ("-h", "-r", "-t", "-j", "-o", "-s", "--start", "-p")},
    **{("sacct", o): (20, 2) for o in ("-j", "-P", "-n", "-o", "-X", "--duplicates")},
    ("scancel", "--signal"): (20, 2),
    **{("sinfo", o): (20, 2) for o in ("-h", "-N", "-o", "-p", "-s", "-R", "--partition")},
    ("sinfo", "-O"): (20, 11),  # with a suffix after each field ("Gres:|"): 20.11's type[:[.][size][suffix]]
    **{("scontrol", o): (20, 2) for o in ("show", "requeue", "update", "--version", "-o")},
    **{("sacctmgr", o): (20, 2) for o in ("-n", "-P", "show")},
}

# Behaviour that changed under the same option, and what hpcjax does about it.
CHANGES = (
    ((20, 11), "a step no longer shares its job's resources with other steps by default "
               "(`srun --overlap` asks for it)", "hpcjax's side steps (stacks, shell, jupyter) pass --overlap "
                                                 "from 20.11 on, and nothing before"),
    ((20, 11), "an overlapping step shares its job's CPUs only: a step that takes the job's GPUs (a step's "
               "default) waits behind the step that holds them (measured on the 20.11 dev cluster; 22.05 on shares "
               "them)", "`hpcjax stacks`'s step asks for no GPU (--gres=none), on every release"),
    ((20, 11), "--gpus-per-task binds nothing: every task sees all of its node's GPUs of the job (21.08 made "
               "--gpus-per-task imply --gpu-bind=per_task; measured on the 20.11 dev cluster)",
     "the batch script binds each task's GPUs itself: --gpu-bind=mask_gpu, one mask per task, before 21.08"),
    ((22, 5), "in a job of typed GPUs (--gpus-per-node=a100:2), a step's --gpus-per-task=a100:1 leaves its "
              "tasks without CUDA_VISIBLE_DEVICES (measured on the 22.05 dev cluster; 24.11 and 26.05 bind them)",
     "the batch script gives srun --gpu-bind=per_task:K from 21.08 on, so every task is bound on every release"),
    ((22, 5), "srun no longer reads SLURM_CPUS_PER_TASK from sbatch's --cpus-per-task (23.11 reads it again)",
     "the batch script gives srun --cpus-per-task itself, on every release"),
)

VERSION = re.compile(r"(?:slurm[- ])?(\d+)\.(\d+)(?:\.\d+)?")


def parse(text: str) -> tuple[int, int] | None:
    """`slurm 22.05.8` (scontrol --version), `22.05`, `slurm-wlm 23.11.4`: (22, 5); None if none is there."""
    found = VERSION.search(text or "")
    return (int(found[1]), int(found[2])) if found else None


def shown(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]:02d}"


def has(version: tuple[int, int] | None, command: str, option: str) -> bool:
    """Whether a cluster of this release takes the option (an unknown release: assumed current).
    An option not in the table is a KeyError: every option hpcjax gives is listed."""
    return version is None or version >= OPTIONS[(command, option)]


def too_old(version: tuple[int, int] | None) -> str:
    """What to say of a release older than the floor ("" when it is not)."""
    if version is None or version >= FLOOR:
        return ""
    return (f"SLURM {shown(version)} is older than {shown(FLOOR)}, the oldest release hpcjax is written for: "
            "options newer than it are left out where that keeps their meaning, and the rest is untested there")
