"""The requirements filter for container recipes: JAX's own packages are dropped from a
user's requirements, so they cannot shadow the image's JAX, which matches its CUDA.

Dropped, in any spelling: jax, jaxlib, the CUDA/ROCm plugins and PJRT packages, libtpu;
pins, extras (`jax[cuda12]`), markers, `name @ URL`, wheel URLs, `-e ...#egg=jax`.
A line that ends with `# hpcjax: keep` stays. Everything else (comments, options such as
`-r` or `--index-url`, other packages) stays as written.
"""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

KEEP_MARK = "hpcjax: keep"
JAX_NAMES = re.compile(r"jax|jaxlib|libtpu(-nightly)?|jax-(cuda|rocm)\d*(-(plugin|pjrt))?|jax-tpu")
WHEEL = re.compile(r"(?:^|/)([A-Za-z0-9_.]+?)-\d[^/]*\.(?:whl|tar\.gz|zip)$")
EGG = re.compile(r"#egg=([A-Za-z0-9_.\-]+)")


def requirement_name(line: str) -> str | None:
    """The canonical project name a requirements line installs, or None (a comment, an
    option, a line pip would not read as a project)."""
    text = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
    if not text:
        return None
    if text.startswith(("-e ", "--editable ", "-e=")) or "://" in text.split("@")[0] or text.startswith("git+"):
        url = text.split(None, 1)[-1] if text.startswith("-") else text
        match = EGG.search(url) or WHEEL.search(url.split("#")[0].split("?")[0])
        return canonicalize_name(match.group(1)) if match else None
    if text.startswith("-"):
        return None  # -r, -c, --index-url, --find-links, ...
    try:
        return canonicalize_name(Requirement(text).name)
    except InvalidRequirement:
        match = WHEEL.search(text)  # a local wheel path
        return canonicalize_name(match.group(1)) if match else None


def is_jax_package(name: str | None) -> bool:
    return bool(name) and bool(JAX_NAMES.fullmatch(name))


def filter_requirements(text: str) -> tuple[list[str], list[str]]:
    """(the lines to install, the lines dropped because they would replace the image's JAX)."""
    kept, dropped = [], []
    for line in text.splitlines():
        if KEEP_MARK in line or not is_jax_package(requirement_name(line)):
            kept.append(line)
        else:
            dropped.append(line.strip())
    return kept, dropped
