"""What every container runtime binds and passes, whatever its syntax.

hpcjax inside any JAX image: unless the image ships hpcjax (`bind_hpcjax=False`), the
launch binds this hpcjax's package directory into the container at HPCJAX_TARGET and puts
it first on PYTHONPATH, so a site's stock image needs no rebuild. The working directory and
the log directory (where a rank leaves the stop marker) are bound in every runtime; each
runtime's class (containers/runtimes/) writes these in its own syntax.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from hpcjax import contract
from hpcjax.errors import SpecError, UsageError

HPCJAX_TARGET = "/opt/hpcjax/lib"  # inside the container: <this>/hpcjax is hpcjax's package
# What a rank needs from the job's environment when the container starts clean.
PASSED_NAMES = ("SLURM_*", "SLURMD_NODENAME", "JAX_*", "XLA_*", "NCCL_*", "CUDA_VISIBLE_DEVICES",
                "HPCJAX_*", "PYTHONUNBUFFERED", "OMPI_*", "PMIX_*", "TF_CPP_*")
BIND_SOURCE_ENV = "HPCJAX_BIND_SOURCE"  # the hpcjax package to bind, as the compute nodes see it
# Caches a rank writes, named by the job's --env: bound in place when they exist here.
CACHE_VARIABLES = (contract.COMPILE_CACHE_ENV, "JAX_COMPILATION_CACHE_DIR")
# The log directory as the batch script resolved it, for the runtimes' bind lines.
LOG_DIR = f'"${contract.LOG_DIR_ENV}"'


def hpcjax_package_dir(spec=None) -> str:
    """The hpcjax package bound into containers: this one, unless HPCJAX_BIND_SOURCE (the job's
    --env, else this process's environment) names the path the compute nodes see (a login node
    may mount the venv elsewhere; a laptop ships hpcjax to the cluster)."""
    given = dict(spec.env).get(BIND_SOURCE_ENV) if spec is not None else None
    return given or os.environ.get(BIND_SOURCE_ENV) or str(Path(__file__).resolve().parent.parent)


def user_binds(container) -> list[tuple[str, str]]:
    """(source, target) of each --bind SRC[:DST[:OPTS]]."""
    pairs = []
    for bind in container.binds:
        source, _, rest = bind.partition(":")
        pairs.append((source, rest.split(":")[0] or source))
    return pairs


def binds_of(spec) -> list[tuple[str, str]]:
    """(source, target) of every bind: the user's, the caches the job's --env names, and
    hpcjax's own package unless the image ships it."""
    pairs = user_binds(spec.container)
    bound = {s for s, _ in pairs}
    for name in CACHE_VARIABLES:
        cache = dict(spec.env).get(name)
        if cache and cache.startswith("/") and Path(cache).is_dir() and cache not in bound:
            pairs.append((cache, cache))
    if spec.container.bind_hpcjax and spec.container.in_container:
        pairs.append((hpcjax_package_dir(spec), f"{HPCJAX_TARGET}/hpcjax"))
    return pairs


def python_path(spec) -> str:
    """PYTHONPATH inside the container: hpcjax's bound package first, then the user's own."""
    user = dict(spec.env).get("PYTHONPATH")
    first = [HPCJAX_TARGET] if spec.container.bind_hpcjax else []
    return ":".join(first + ([user] if user else []))


def passed_names(spec) -> tuple[str, ...]:
    """The variables a clean container must still see: the ranks' own and the job's --env."""
    return PASSED_NAMES + tuple(key for key, _ in spec.env)


def paths_to_check(spec) -> tuple[str | None, list[str]]:
    """What must exist on the submitting machine: the image file (None: a URI, a $VAR, no image)
    and the bind sources (one with a $VAR is the job's to expand)."""
    container = spec.container
    image = container.image if container.image and container.image_is_local_file else None
    return image, [source for source, _ in user_binds(container) if "$" not in source]


def missing_image(image: str, where: str = "on this machine") -> SpecError:
    return SpecError(f"image {image!r} does not exist{'' if where == 'on this machine' else ' ' + where}",
                     "give the path of an existing image (a .sif file; a directory or .sqfs for "
                     "charliecloud), a URI such as docker://nvcr.io/nvidia/jax:24.04-py3, or $VAR "
                     "for an image that a module sets inside the job")


def check_before_submit(spec) -> None:
    """What only the submitting machine can tell: the image file and every bind source exist."""
    image, sources = paths_to_check(spec)
    if image and not Path(image).exists():
        raise missing_image(image)
    for source in sources:
        if not Path(source).exists():
            raise UsageError(f"bind source {source!r} does not exist on this machine",
                             "fix the path or create it; a path that exists only on the compute nodes can be "
                             "written with a variable the job sets, e.g. --bind '$SCRATCH/data:/data'")


def in_place(container, paths: list[str]):
    """The container with each path bound at the same place inside (the call folder, logs and
    data a job is given by path), so the program sees the paths it was given; bare runs need none."""
    if not container.in_container:
        return container
    present = {b.split(":")[0] for b in container.binds}
    return dataclasses.replace(container, binds=container.binds + tuple(
        f"{p}:{p}" for p in dict.fromkeys(paths) if p not in present))
