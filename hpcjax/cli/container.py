"""`hpcjax container recipe|build`: a container recipe from options (an Apptainer
definition file, or a Dockerfile for pyxis/enroot sites), and an image built from one."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path
from hpcjax.values.voice import say
from hpcjax.cli.verbs import HELP


def cmd_recipe(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.values.errors import UsageError
    from hpcjax.containers.recipes import recipe

    from hpcjax.cli.outputs import output_file, write_atomically
    from hpcjax.values.validate import read_text

    output = output_file(args.output) if args.output is not None else None
    requirements = None
    if args.requirements:
        path = Path(args.requirements)
        if not path.exists():  # (a directory, one that cannot be read: read_text says which)
            raise UsageError(f"requirements file {args.requirements!r} does not exist",
                             "give the path of a pip requirements file: --requirements requirements.txt")
        requirements = read_text(path, "requirements file")
    text, dropped = recipe(base=args.base, fmt=args.format, jax=args.jax, packages=args.package or [],
                           requirements=requirements, with_hpcjax=args.with_hpcjax, apt=args.apt or [])
    for line in dropped:
        say(f"dropped {line!r}: JAX's own package; the image's JAX (matched to its CUDA) stays "
            "(end the line with `# hpcjax: keep` to install it anyway)")
    if output is not None:
        write_atomically(output, text, mode=0o644)
        say(f"wrote {args.output} ({args.format})")
    else:
        sys.stdout.write(text)
    return 0


BUILDERS = ("apptainer", "singularity")


def cmd_build(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.values.errors import UsageError

    recipe_path = Path(args.recipe)
    if not recipe_path.is_file():
        raise UsageError(f"recipe {args.recipe!r} does not exist", "write one: hpcjax container recipe -o jax.def")
    if not recipe_path.read_text().lstrip().lower().startswith(("bootstrap:", "#")) or \
            "\nFROM " in "\n" + recipe_path.read_text():
        raise UsageError(f"{args.recipe} is not an Apptainer definition file",
                         "a Dockerfile is built with `docker build` (or `enroot import` for pyxis sites)")
    builders = [args.runtime] if args.runtime else list(BUILDERS)
    builder = next((b for b in builders if shutil.which(b)), None)
    if builder is None:
        raise UsageError(f"{' or '.join(builders)} is not installed on this machine",
                         "build where Apptainer is (often a login or build node: `module load apptainer`), "
                         "or with --fakeroot on a workstation; then copy the .sif to shared storage")
    argv = [builder, "build", *(["--fakeroot"] if args.fakeroot else []), args.output, str(recipe_path)]
    say(f"running: {' '.join(argv)}")
    return subprocess.run(argv).returncode


def add_container_verb(sub) -> None:
    from hpcjax.cli.parsing import Parser

    from_here = "default: hpcjax from this checkout (copied in) or from PyPI"
    box = sub.add_parser("container", help=HELP["container"])
    actions = box.add_subparsers(dest="action", required=True, parser_class=Parser)
    recipe = actions.add_parser("recipe", help="write a recipe (Apptainer .def or Dockerfile) on stdout or -o")
    recipe.add_argument("--base", default="nvcr.io/nvidia/jax:24.04-py3",
                        help="base image (default: NVIDIA's JAX image, JAX matched to its CUDA)")
    recipe.add_argument("--jax", default="none", choices=("none", "cuda12", "cpu"),
                        help="install JAX: none (the base has it), cuda12 (JAX's CUDA 12 wheels), cpu")
    recipe.add_argument("--package", action="append", metavar="PKG", help="a pip package to add (repeatable)")
    recipe.add_argument("--requirements", metavar="FILE",
                        help="pip requirements; JAX's own packages are dropped (and said so)")
    recipe.add_argument("--apt", action="append", metavar="PKG", help="a system package to add (repeatable)")
    recipe.add_argument("--format", default="apptainer", choices=("apptainer", "docker"),
                        help="apptainer (a definition file) or docker (a Dockerfile, for pyxis/enroot)")
    recipe.add_argument("--no-hpcjax", dest="with_hpcjax", action="store_false",
                        help=f"leave hpcjax out (it is bound in at launch); {from_here}")
    recipe.add_argument("-o", "--output", metavar="FILE", help="write the recipe to FILE instead of stdout")
    recipe.set_defaults(run=cmd_recipe, takes_command=False)
    build = actions.add_parser("build", help="apptainer build IMAGE RECIPE (or singularity)")
    build.add_argument("recipe", help="an Apptainer definition file (hpcjax container recipe -o jax.def)")
    build.add_argument("-o", "--output", required=True, metavar="IMAGE.sif", help="the image file to build")
    build.add_argument("--runtime", choices=BUILDERS, help="default: apptainer, else singularity")
    build.add_argument("--fakeroot", action="store_true", help="build without root (apptainer build --fakeroot)")
    build.set_defaults(run=cmd_build, takes_command=False)
