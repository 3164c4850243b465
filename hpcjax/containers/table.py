"""A container runtime, as one class: how a rank enters its container, and the table of
every runtime hpcjax knows.

Each runtime lives in one module of `hpcjax/containers/runtimes/` and registers itself
(`@register`); the spec (validation), the renderer (the launch words, srun options and
preparation lines), the CLI help and the rank side (which container am I in) all read
this table. Adding a runtime is one file there, plus its tests.

Standard library only: the rank side reads the table inside any JAX image.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass

from hpcjax.values import shellword, validate
from hpcjax.containers.binds import parse_bind
from hpcjax.values.errors import SpecError

DEFAULT_WITH_IMAGE = "apptainer"  # the runtime an --image alone implies
BARE = "none"  # the runtime of a job without a container


@dataclass(frozen=True)
class Launch:
    """What the rendered script needs to start every rank in the container."""

    words: str = ""  # shell text between the coordinator wrapper and the command ('' for none/pyxis)
    srun_options: str = ""  # extra srun options (pyxis), each starting with a space
    prepare: tuple[str, ...] = ()  # script lines before srun
    cleanenv_prefixes: tuple[str, ...] = ()  # variables exported under these prefixes reach the container
    keep_only: tuple[str, ...] = ()  # non-empty: the wrapper cleans the environment to these names
    program: str = ""  # the command every node must have (the script checks it before srun)


class Runtime:
    """The rules of one runtime. Subclasses set the class attributes and `launch`; the
    checks here are the ones every runtime with an image shares."""

    name = ""  # --runtime NAME
    order = 50  # place in listings (help, errors)
    program = ""  # the command the nodes must have ('' when srun itself runs the container)
    inside_marks: tuple[str, ...] = ()  # variables the runtime sets inside its containers
    cleanenv_prefixes: tuple[str, ...] = ()  # Apptainer's APPTAINERENV_: copies under these reach a clean container
    has_cleanenv = True  # whether the runtime can start with a clean environment
    bare = False  # True only for the runtime of no container
    image_help = "an image"  # what --image names for this runtime, for messages

    def normalize(self, container) -> dict:
        """Fields of the Container to replace (a runtime's own spelling of an option)."""
        return {}

    def check(self, container) -> None:
        """Raise SpecError for what this runtime cannot run."""
        if container.image is None:
            raise SpecError(f"runtime {self.name!r} needs an image",
                            f"give the container image ({self.image_help}): --image ...")
        if container.cleanenv and not self.has_cleanenv:
            raise SpecError(f"{self.name} has no clean environment: it passes the job's environment into the "
                            "container", f"drop --cleanenv with --runtime {self.name}")
        validate.require_text("image", container.image, error=SpecError)
        for bind in container.binds:
            validate.require_text("bind", bind, error=SpecError)
            self.check_bind(parse_bind(bind))
        for flag in container.flags:
            validate.require_text("container flag", flag, error=SpecError)
        # Whether an image file exists is the submitting machine's question (this one, or the
        # login node over SSH): binds.paths_to_check, and the backend's probe (launch.refusals) ask it.

    def check_bind(self, bind) -> None:
        """Raise SpecError for a bind (binds.Bind, parsed and checked already) this runtime cannot make."""

    def image_is_local_file(self, image: str | None) -> bool:
        """Whether the image is a path of the submitting machine's (checked before submission)."""
        return bool(image) and "://" not in image and image_env_var(image) is None

    def launch(self, spec, image_word: str) -> Launch:
        raise NotImplementedError

    @staticmethod
    def quoted_flags(container) -> str:
        return "".join(f" {shellword.literal(f)}" for f in container.flags)


def image_env_var(image: str | None) -> str | None:
    """NAME for an image given as "$NAME" or "${NAME}": read from the job's environment when
    it runs (site modules such as `module load jax/23.10-sif` export JAX_IMAGE)."""
    import re

    match = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", image or "")
    return match.group(1) if match else None


# --- the table -------------------------------------------------------------------------
_table: dict[str, Runtime] = {}
_discovered = False


def register(cls: type[Runtime]) -> type[Runtime]:
    """Class decorator: put a runtime in the table under its name."""
    _table[cls.name] = cls()
    return cls


def unregister(name: str) -> None:
    _table.pop(name, None)


def _discover() -> None:
    """Import every module of hpcjax/containers/runtimes/: each registers its runtimes."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    import hpcjax.containers.runtimes as runtimes

    for info in pkgutil.iter_modules(runtimes.__path__):
        importlib.import_module(f"{runtimes.__name__}.{info.name}")


def all_runtimes() -> list[Runtime]:
    _discover()
    return sorted(_table.values(), key=lambda r: (r.order, r.name))


def names() -> tuple[str, ...]:
    return tuple(r.name for r in all_runtimes())


def get(name: str) -> Runtime:
    _discover()
    if name not in _table:
        raise SpecError(f"unknown container runtime {name!r}", f"valid runtimes: {', '.join(names())}")
    return _table[name]


def inside(environ) -> str | None:
    """The runtime whose container this process runs in, from the variables it sets; None bare."""
    return next((r.name for r in all_runtimes() for mark in r.inside_marks if environ.get(mark)), None)
