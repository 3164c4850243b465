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
from typing import NamedTuple

from hpcjax.protocol import contract
from hpcjax.values import shellword
from hpcjax.values.errors import SpecError, UsageError
from hpcjax.protocol.timeouts import EXIT_HOOK_DIR, exit_guard_on

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


class Bind(NamedTuple):
    """One bind mount: the host's path, the path inside ('': the same as the host's, as the user
    wrote it), and its options (ro, rw or none)."""

    source: str
    target: str = ""
    options: str = ""

    @property
    def inside(self) -> str:
        return self.target or self.source

    def word(self, options: bool = True) -> str:
        """SRC[:DST][:OPTS] as one shell word ($NAME expands on the node: hpcjax.values.shellword)."""
        text = self.source + (f":{self.inside}" if self.target or (options and self.options) else "")
        return shellword.word(text + (f":{self.options}" if options and self.options else ""))


BIND_OPTIONS = ("ro", "rw")  # what every runtime can be asked for (each writes it its own way)
BIND_FORM = "write --bind SRC[:DST[:OPTIONS]], e.g. --bind /data, --bind '$SCRATCH/data:/data:ro'"


def parse_bind(text: str) -> Bind:
    """--bind SRC[:DST[:OPTIONS]] (DST defaults to SRC; OPTIONS ro or rw), refused when a part is
    empty, there are more parts, DST is not absolute, or an option is unknown."""
    parts = text.split(":")
    if len(parts) > 3:
        raise SpecError(f"bind {text!r} has {len(parts)} ':'-separated parts, at most 3 (SRC:DST:OPTIONS)",
                        BIND_FORM + "; bind a path with ':' in its name through a link to it")
    source, target, options = (parts + ["", ""])[:3]
    if not source or (len(parts) > 1 and not target):
        raise SpecError(f"bind {text!r} has an empty {'source' if not source else 'target'}", BIND_FORM)
    if target and not target.startswith(("/", "$")):
        raise SpecError(f"bind {text!r}: the target {target!r} inside the container is not an absolute path",
                        "give the target as /path inside the image, e.g. --bind ./data:/data")
    if len(parts) == 3 and options not in BIND_OPTIONS:
        raise SpecError(f"bind {text!r}: unknown option {options!r}",
                        f"valid options: {', '.join(BIND_OPTIONS)} (e.g. --bind /data:/data:ro)")
    return Bind(source, target, options)


def user_binds(container) -> list[Bind]:
    """Each --bind SRC[:DST[:OPTIONS]], parsed."""
    return [parse_bind(bind) for bind in container.binds]


def binds_of(spec) -> list[Bind]:
    """Every bind: the user's, the caches the job's --env names, and hpcjax's own package
    unless the image ships it."""
    found = user_binds(spec.container)
    bound = {b.source for b in found}
    for name in CACHE_VARIABLES:
        cache = dict(spec.env).get(name)
        if cache and cache.startswith("/") and Path(cache).is_dir() and cache not in bound:
            found.append(Bind(cache, cache))
    if spec.container.bind_hpcjax and spec.container.in_container:
        found.append(Bind(hpcjax_package_dir(spec), f"{HPCJAX_TARGET}/hpcjax"))
    return found


def python_path(spec) -> str:
    """PYTHONPATH inside the container: hpcjax's bound package first (and its exit guard's hook),
    then the user's own."""
    user = dict(spec.env).get("PYTHONPATH")
    first = [HPCJAX_TARGET] if spec.container.bind_hpcjax else []
    if first and exit_guard_on(dict(spec.env)):
        first.insert(0, f"{HPCJAX_TARGET}/hpcjax/{EXIT_HOOK_DIR}")
    return ":".join(first + ([user] if user else []))


def exit_hook_dir(spec) -> str:
    """The exit guard's sitecustomize directory as the compute nodes see it ('' when the job
    turned the guard off): first on the ranks' PYTHONPATH (hpcjax.rank.watch.exitguard)."""
    return f"{hpcjax_package_dir(spec)}/{EXIT_HOOK_DIR}" if exit_guard_on(dict(spec.env)) else ""


def passed_names(spec) -> tuple[str, ...]:
    """The variables a clean container must still see: the ranks' own and the job's --env."""
    return PASSED_NAMES + tuple(key for key, _ in spec.env)


def paths_to_check(spec) -> tuple[str | None, list[str]]:
    """What must exist on the submitting machine: the image file (None: a URI, a $VAR, no image)
    and the bind sources (one with a $VAR is the job's to expand)."""
    container = spec.container
    image = container.image if container.image and container.image_is_local_file else None
    return image, [shellword.expand(b.source, {}) for b in user_binds(container) if not shellword.variables(b.source)]


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
    present = {b.source for b in user_binds(container)}
    return dataclasses.replace(container, binds=container.binds + tuple(
        f"{p}:{p}" for p in dict.fromkeys(paths) if p not in present))
