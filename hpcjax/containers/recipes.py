"""Container recipes from options, as an Apptainer definition file or a Dockerfile (for
pyxis/enroot sites), through NVIDIA's HPC Container Maker (hpccm), which writes both
formats from one description. hpccm has no %help primitive: that section is appended
to the Apptainer file here.

    text, dropped = recipe(base="nvcr.io/nvidia/jax:24.04-py3", fmt="apptainer",
                           packages=["flax"], requirements=open("requirements.txt").read())
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from hpcjax import __version__
from hpcjax.values.errors import UsageError
from hpcjax.containers.requirements import filter_requirements, is_jax_package, requirement_name

FORMATS = ("apptainer", "docker")
# What installs JAX itself, for a base image that has none (a CUDA base, a plain Python).
JAX_INSTALLS = {"none": None, "cuda12": "jax[cuda12]", "cpu": "jax"}
DEFAULT_BASE = "nvcr.io/nvidia/jax:24.04-py3"  # NVIDIA's JAX image: JAX matched to its CUDA
SOURCE_IN_IMAGE = "/opt/hpcjax-src"


def hpcjax_source() -> Path | None:
    """The checkout hpcjax runs from (a recipe copies it in), or None for an installed wheel."""
    root = Path(__file__).resolve().parent.parent.parent
    return root if (root / "pyproject.toml").is_file() and (root / "hpcjax").is_dir() else None


def recipe(*, base: str = DEFAULT_BASE, fmt: str = "apptainer", jax: str = "none", packages=(),
           requirements: str | None = None, with_hpcjax: bool = True, apt=(),
           source: str | None = None) -> tuple[str, list[str]]:
    """The recipe text, and the requirement lines dropped as JAX's own packages. `source`:
    where %files finds the hpcjax checkout (default: this checkout's absolute path)."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown recipe format {fmt!r}", f"valid formats: {', '.join(FORMATS)}")
    if jax not in JAX_INSTALLS:
        raise UsageError(f"unknown JAX install {jax!r}",
                         "none (the base image has JAX, e.g. NVIDIA's), cuda12 (JAX's CUDA 12 wheels) or cpu")
    if not base or any(c.isspace() for c in base):
        raise UsageError(f"base image {base!r} is not an image name", f"e.g. --base {DEFAULT_BASE}")
    for package in packages:
        check_pip_package(package)
    for package in apt:
        check_apt_package(package)
    dropped = [p for p in packages if is_jax_package(requirement_name(p))]
    kept_packages = [p for p in packages if p not in dropped]
    kept_requirements, dropped_lines = filter_requirements(requirements or "")
    dropped += dropped_lines
    import hpccm
    from hpccm.primitives import baseimage, copy, environment, label, shell

    hpccm.config.set_container_format("singularity" if fmt == "apptainer" else "docker")
    hpccm.config.set_singularity_version("3.5")
    stage = hpccm.Stage()
    stage += baseimage(image=base, _distro="ubuntu22", _docker_env=True)
    post = []
    if apt:
        post += ["apt-get update", "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
                 + " ".join(map(shlex.quote, apt)), "rm -rf /var/lib/apt/lists/*"]
    if JAX_INSTALLS[jax]:
        post.append(f"python3 -m pip install --no-cache-dir {shlex.quote(JAX_INSTALLS[jax])}")
    requirement_lines = [line for line in kept_requirements if line.strip() and not line.lstrip().startswith("#")]
    if requirement_lines:
        post.append("printf '%s\\n' " + " ".join(map(shlex.quote, requirement_lines)) + " > /tmp/requirements.txt")
        post.append("python3 -m pip install --no-cache-dir -r /tmp/requirements.txt")
    if kept_packages:
        post.append("python3 -m pip install --no-cache-dir " + " ".join(map(shlex.quote, kept_packages)))
    checkout = hpcjax_source() if with_hpcjax else None
    source = source or (str(checkout) if checkout else None)
    if with_hpcjax:
        if source:
            # Apptainer reads %files from the host as given; Docker copies from the build context.
            stage += copy(src=source if fmt == "apptainer" else ".", dest=SOURCE_IN_IMAGE)
            post.append(f"python3 -m pip install --no-cache-dir {SOURCE_IN_IMAGE}")
        else:
            post.append(f"python3 -m pip install --no-cache-dir hpcjax=={__version__}")
    if post:
        stage += shell(commands=post)
    stage += environment(variables={"PYTHONUNBUFFERED": "1"}, _export=True)
    stage += label(metadata={"org.hpcjax.version": __version__, "org.hpcjax.base": base,
                             "org.hpcjax.jax": jax})
    if with_hpcjax:  # the image checks itself: JAX imports, sees its devices, hpcjax maps them
        stage += shell(commands=["hpcjax env", "hpcjax check devices"], _test=True)
    text = str(stage).rstrip() + "\n"
    if fmt == "docker":
        build = f"docker build -f THIS_FILE {source}" if source else "docker build -f THIS_FILE ."
        text = f"# Written by hpcjax {__version__} (hpcjax container recipe). Build: {build}\n" + text
    if fmt == "apptainer":
        text += help_section(base, jax, with_hpcjax, source is not None)
    return text, dropped


# A Debian package, optionally with an architecture and a version: libnccl2, gcc:amd64, curl=7.88.1-10.
APT_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+(?::[a-z0-9-]+)?(?:=[A-Za-z0-9.+~:-]+)?")


def check_pip_package(text: object) -> None:
    """One pip requirement (PEP 508: flax, flax==0.8.*, flax[all]>=0.8): never an option (--index-url)
    nor a second line of the recipe."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(text)
        ok = isinstance(text, str) and text == text.strip() and "\n" not in text and not text.startswith("-")
    except (InvalidRequirement, TypeError):
        ok = False
    if not ok:
        raise UsageError(f"--package {text!r} is not one pip requirement",
                         "give a package as pip names it, one per --package: --package flax, --package 'optax>=0.2'")


def check_apt_package(text: object) -> None:
    if not isinstance(text, str) or not APT_PACKAGE.fullmatch(text):
        raise UsageError(f"--apt {text!r} is not a Debian package name",
                         "give one package per --apt, as apt-get names it: --apt libibverbs1, --apt curl=7.88.1-10")


def help_section(base: str, jax: str, with_hpcjax: bool, from_checkout: bool) -> str:
    lines = [f"JAX image for hpcjax {__version__}, from {base} (JAX: {'from the base image' if jax == 'none' else jax}).",
             "Run a job:  hpcjax submit --image IMAGE.sif --nodes N --gpus-per-node G -- python train.py",
             "Check it:   apptainer test IMAGE.sif   (hpcjax env; hpcjax check devices)" if with_hpcjax else
             "hpcjax is not inside: hpcjax binds its own rank side at launch."]
    if from_checkout:
        lines.append("Built with the hpcjax checkout copied in (%files): apptainer build IMAGE.sif RECIPE")
    return "\n%help\n" + "".join(f"    {line}\n" for line in lines)
