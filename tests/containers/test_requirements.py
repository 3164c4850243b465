"""The requirements filter: real-world spellings of JAX's packages are dropped (they would
replace the image's JAX, matched to its CUDA), everything else stays as written."""

import pytest

from hpcjax.containers.requirements import filter_requirements, requirement_name

DROPPED = [
    "jax",
    "JAX==0.4.30",
    "jax[cuda12]>=0.4.26",
    "jax[cuda12_pip]==0.4.23",
    "jaxlib==0.4.30+cuda12.cudnn89",
    "jax_cuda12_plugin==0.4.30",
    "jax-cuda12-pjrt==0.4.30",
    "jax-cuda12-plugin[with_cuda]>=0.4.35",
    "jax-rocm60-plugin",
    "libtpu-nightly",
    "libtpu==0.0.2",
    'jax>=0.4.1; python_version >= "3.10"',
    "jaxlib @ https://storage.googleapis.com/jax-releases/cuda12/jaxlib-0.4.30+cuda12.cudnn89-cp311-cp311-manylinux2014_x86_64.whl",
    "https://storage.googleapis.com/jax-releases/cuda12/jaxlib-0.4.30+cuda12.cudnn89-cp311-cp311-manylinux2014_x86_64.whl",
    "-e git+https://github.com/jax-ml/jax.git@main#egg=jax",
    "git+https://github.com/jax-ml/jax.git#egg=jax",
    "JaxLib==0.4.30",
    "jax  # the accelerator build comes from the image",
]
KEPT = [
    "optax==0.2.3",
    "flax>=0.8",
    "jaxtyping==0.2.34",      # starts with jax, is not JAX
    "jax-smi",                # a tool, not JAX itself
    "jaxopt",
    "orbax-checkpoint",
    "numpy<2",
    "# jax==0.4.30 is in the image",
    "-r more.txt",
    "--find-links https://storage.googleapis.com/jax-releases/jax_cuda_releases.html",
    "jax==0.4.30  # hpcjax: keep",
    "chex @ git+https://github.com/google-deepmind/chex.git",
]


@pytest.mark.parametrize("line", DROPPED)
def test_jax_packages_are_dropped_in_any_spelling(line):
    kept, dropped = filter_requirements(line)
    assert (kept, dropped) == ([], [line.strip()])


@pytest.mark.parametrize("line", KEPT)
def test_everything_else_stays_as_written(line):
    kept, dropped = filter_requirements(line)
    assert (kept, dropped) == ([line], [])


def test_a_whole_file_keeps_its_order_and_says_what_it_dropped():
    text = "numpy<2\njax[cuda12]==0.4.30\noptax\njaxlib\n"
    assert filter_requirements(text) == (["numpy<2", "optax"], ["jax[cuda12]==0.4.30", "jaxlib"])
    assert requirement_name("Flax_Extra.Pkg>=1") == "flax-extra-pkg"
