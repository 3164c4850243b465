"""The table of container runtimes: one class per runtime, read by the spec, the renderer,
the CLI help and the rank side. A runtime defined here, in a test, works everywhere without
an edit to any other module."""

import subprocess

import pytest

from hpcjax.cli import build_parser
from hpcjax.containers import table
from hpcjax.containers.table import Launch, Runtime, register
from hpcjax.values.errors import SpecError
from hpcjax.slurm.script import render_sbatch
from hpcjax.job.spec import Container, JobSpec, Layout
from hpcjax.rank.start.runtime import container_name


class Podman(Runtime):
    """A made-up runtime for the test: `podman-hpc run --rm IMAGE CMD`."""

    name = "podman-hpc"
    program = "podman-hpc"
    inside_marks = ("PODMAN_HPC_INSIDE",)
    has_cleanenv = False

    def check(self, container):
        super().check(container)
        if not container.image.startswith("registry/"):
            raise SpecError(f"podman-hpc wants a registry/ image, not {container.image!r}", "e.g. registry/jax")

    def image_is_local_file(self, image):
        return False  # a registry name, not a path on this machine

    def launch(self, spec, image_word):
        return Launch(words=f"podman-hpc run --rm {image_word}", prepare=("podman-hpc migrate \"$PWD\"",),
                      program=self.program)


@pytest.fixture
def podman():
    register(Podman)
    yield
    table.unregister(Podman.name)


def test_a_runtime_defined_in_a_test_renders_validates_and_is_listed(podman):
    spec = JobSpec(command=("python3", "t.py"), layout=Layout(nodes=2, gpus_per_node=4),
                   container=Container(runtime="podman-hpc", image="registry/jax"))
    text = render_sbatch(spec)
    assert "command -v podman-hpc >/dev/null" in text  # the script checks the node has it
    assert 'podman-hpc migrate "$PWD"' in text
    assert "podman-hpc run --rm registry/jax \\\n  python3 t.py" in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    with pytest.raises(SpecError, match="registry/ image"):  # its own rule
        Container(runtime="podman-hpc", image="jax.sif")
    with pytest.raises(SpecError, match="no clean environment"):  # a shared rule, from its attributes
        Container(runtime="podman-hpc", image="registry/jax", cleanenv=True)
    submit_help = build_parser()._subparsers._group_actions[0].choices["submit"].format_help()
    assert "podman-hpc," in "".join(submit_help.split())  # the --runtime help lists it (wrapped anywhere)
    assert container_name({"PODMAN_HPC_INSIDE": "1"}) == "podman-hpc"  # a rank knows it runs inside


def test_an_unknown_runtime_lists_every_known_one():
    with pytest.raises(SpecError) as error:
        Container(runtime="docker", image="x")
    assert error.value.hint == "valid runtimes: apptainer, singularity, charliecloud, pyxis, none"


@pytest.mark.parametrize("marks, expected", [({"APPTAINER_CONTAINER": "/x.sif", "SINGULARITY_CONTAINER": "/x.sif"},
                                               "apptainer"),
                                              ({"SINGULARITY_CONTAINER": "/x.sif"}, "singularity"),
                                              ({"CH_RUNNING": "Weird Al Yankovic"}, "charliecloud"),
                                              ({"ENROOT_ROOTFS": "/x"}, "pyxis"), ({}, None)])
def test_a_rank_names_its_container_from_the_runtime_that_marks_it(marks, expected):
    assert container_name(marks) == expected
