"""The recipes kept in containers/ at the top of the repository, generated from hpcjax's own recipe
writer. A developer's tool, not part of the package (issue 64): users write theirs with
`hpcjax container`.

Regenerate them with:  python scripts/container_examples.py containers
A test fails, naming this command, when they are stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hpcjax.containers.recipes import DEFAULT_BASE, recipe

REGENERATE = "python scripts/container_examples.py containers"
# built from the checkout's root: `apptainer build x.sif containers/X`
EXAMPLES = {
    "jax-ngc.def": dict(base=DEFAULT_BASE, jax="none"),
    "jax-cuda.def": dict(base="nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04", jax="cuda12",
                         apt=("python3", "python3-pip")),
    "jax-cpu.def": dict(base="python:3.11-slim", jax="cpu"),
    "jax-ngc.Dockerfile": dict(base=DEFAULT_BASE, jax="none", fmt="docker"),
}


def example_recipes() -> dict[str, str]:
    return {name: recipe(source=".", **options)[0] for name, options in EXAMPLES.items()}


if __name__ == "__main__":
    for name, text in example_recipes().items():
        (Path(sys.argv[1]) / name).write_text(text)
        print(f"{sys.argv[1]}/{name}")
