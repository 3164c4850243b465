"""Container recipes: the ones in containers/ are what the generator writes (hpccm), every
recipe parses with a real Singularity-recipe parser (spython) or Dockerfile parser
(dockerfile-parse) and has the sections an image needs; `hpcjax container recipe|build`."""

import os
import stat

import pytest
from dockerfile_parse import DockerfileParser
from spython.main.parse.parsers import SingularityParser

from conftest import REPO, developer_script, run_hpcjax

container_examples = developer_script("container_examples")  # outside the package (issue 64)
EXAMPLES, example_recipes = container_examples.EXAMPLES, container_examples.example_recipes

CONTAINERS = REPO / "containers"


def parse_definition(path):
    [stage] = SingularityParser(str(path)).recipe.values()
    text = path.read_text()
    return stage, text


def assert_complete_definition(path, base):
    stage, text = parse_definition(path)
    assert stage.fromHeader == base
    assert any("pip install" in line and "hpcjax" in line for line in stage.install), stage.install
    assert "PYTHONUNBUFFERED=1" in stage.environ
    assert any(label.startswith("org.hpcjax.version ") for label in stage.labels)
    assert stage.test, "no %test section"
    assert "\n%test\n    cd /\n    hpcjax env\n    hpcjax check devices\n" in text
    assert "\n%help\n" in text and "hpcjax submit --image" in text


def test_the_recipes_in_containers_are_what_the_generator_writes():
    for name, text in example_recipes().items():
        assert (CONTAINERS / name).read_text() == text, f"containers/{name} is stale: {container_examples.REGENERATE}"


@pytest.mark.parametrize("name", [n for n in EXAMPLES if n.endswith(".def")])
def test_each_definition_file_parses_and_has_every_section(name):
    assert_complete_definition(CONTAINERS / name, EXAMPLES[name]["base"])


def test_the_dockerfile_parses():
    parser = DockerfileParser(path=str(CONTAINERS / "jax-ngc.Dockerfile"))
    instructions = [i["instruction"] for i in parser.structure]
    assert parser.baseimage == EXAMPLES["jax-ngc.Dockerfile"]["base"]
    assert {"FROM", "COPY", "RUN", "ENV", "LABEL"} <= set(instructions)
    assert parser.labels["org.hpcjax.version"] and parser.envs["PYTHONUNBUFFERED"] == "1"


def test_recipe_from_options_drops_jax_from_requirements_and_says_so(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("numpy<2\njax[cuda12]==0.4.30\noptax\njaxlib  # hpcjax: keep\n")
    out = tmp_path / "mine.def"
    result = run_hpcjax("container", "recipe", "--base", "nvcr.io/nvidia/jax:24.10-py3", "--requirements",
                        str(requirements), "--package", "flax", "--package", "jax-cuda12-plugin", "--apt",
                        "libibverbs1", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "dropped 'jax[cuda12]==0.4.30'" in result.stderr and "dropped 'jax-cuda12-plugin'" in result.stderr
    assert "jaxlib" not in result.stderr  # marked to keep
    assert_complete_definition(out, "nvcr.io/nvidia/jax:24.10-py3")
    stage, text = parse_definition(out)
    assert "printf '%s\\n' 'numpy<2' optax 'jaxlib  # hpcjax: keep' > /tmp/requirements.txt" in text
    assert "jax[cuda12]" not in text and "install --no-cache-dir flax" in text and "libibverbs1" in text
    docker = run_hpcjax("container", "recipe", "--format", "docker", "--jax", "cpu", "--base", "python:3.11-slim",
                        "--no-hpcjax")
    assert docker.returncode == 0, docker.stderr
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(docker.stdout)
    parser = DockerfileParser(path=str(dockerfile))
    assert parser.baseimage == "python:3.11-slim" and "pip install --no-cache-dir jax" in parser.content
    assert "hpcjax env" not in parser.content  # no hpcjax inside: it is bound in at launch


def test_bad_recipe_input_is_refused():
    result = run_hpcjax("container", "recipe", "--requirements", "/no/such.txt")
    assert result.returncode == 2 and "requirements file '/no/such.txt' does not exist" in result.stderr
    result = run_hpcjax("container", "recipe", "--base", "bad image")
    assert result.returncode == 2 and "is not an image name" in result.stderr


def test_build_runs_apptainer_or_says_it_is_missing(tmp_path):
    recipe = tmp_path / "jax.def"
    recipe.write_text((CONTAINERS / "jax-cpu.def").read_text())
    bare_path = {"PATH": "/usr/bin:/bin"}
    missing = run_hpcjax("container", "build", str(recipe), "-o", "jax.sif", env=bare_path, cwd=tmp_path)
    assert missing.returncode == 2 and "apptainer or singularity is not installed on this machine" in missing.stderr
    fake = tmp_path / "bin" / "apptainer"  # records its arguments: proves the command, not Apptainer
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/argv"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    built = run_hpcjax("container", "build", str(recipe), "-o", "jax.sif", "--fakeroot", cwd=tmp_path,
                       env={"PATH": f"{fake.parent}:{os.environ['PATH']}"})
    assert built.returncode == 0, built.stderr
    assert (fake.parent / "argv").read_text().split() == ["build", "--fakeroot", "jax.sif", str(recipe)]
    docker = run_hpcjax("container", "build", str(CONTAINERS / "jax-ngc.Dockerfile"), "-o", "x.sif", cwd=tmp_path)
    assert docker.returncode == 2 and "is not an Apptainer definition file" in docker.stderr
