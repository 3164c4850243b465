"""Container launch lines for every runtime, rendered (no container runs here; the real
Charliecloud jobs are in test_containers_cluster.py): what each runtime is given, what a
clean environment keeps, and the checks made before anything is submitted."""

import shutil
import subprocess

import pytest

from hpcjax.values.errors import LayoutError, SpecError
from hpcjax.containers.binds import hpcjax_package_dir
from hpcjax.slurm.script import render_sbatch
from hpcjax.job.spec import Container, JobSpec, Layout
from hpcjax.rank.start import runtime
from hpcjax.rank.start.mapping import resolve

HOSTILE = "/data/it's $(touch pwned) `x` \"q\""


def spec(container, **fields):
    return JobSpec(command=("python3", "train.py"), layout=Layout(nodes=2, gpus_per_node=4), container=container,
                   **fields)


def launch_line(text):
    start = text.index("srun --kill-on-bad-exit")
    return text[start:text.index("|| hpcjax_rc=$?", start)]


def shellcheck_clean(text):
    result = subprocess.run(["shellcheck", "-s", "bash", "-"], input=text, capture_output=True, text=True)
    assert result.returncode == 0 and not result.stdout, result.stdout


@pytest.fixture
def image_dir(tmp_path):
    (tmp_path / "img" / "etc").mkdir(parents=True)
    return str(tmp_path / "img")


@pytest.mark.tools  # shellcheck of every runtime's script: 2.1 s
def test_every_runtime_with_hostile_binds_and_values_is_shellcheck_clean(image_dir, tmp_path):
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck is not installed; the test command installs it")
    sif = tmp_path / "jax.sif"
    sif.touch()
    env = {"XLA_FLAGS": "--x='1 2' $(id)", "LD_LIBRARY_PATH": "/opt/$lib path"}
    for container in (Container(runtime="apptainer", image=str(sif), binds=(f"{HOSTILE}:/d",), cleanenv=True),
                      Container(runtime="singularity", image="$JAX_IMAGE", binds=(HOSTILE,)),
                      Container(runtime="charliecloud", image=image_dir, binds=(f"{HOSTILE}:/in side",), cleanenv=True),
                      Container(runtime="charliecloud", image="$CH_IMAGE", bind_hpcjax=False),
                      Container(runtime="pyxis", image="nvcr.io#nvidia/jax:24.04-py3", binds=("/sha red:/s",))):
        text = render_sbatch(spec(container, env=env))
        shellcheck_clean(text)
        assert "pwned" not in subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True).stderr


def test_apptainer_binds_hpcjax_logs_and_passes_what_ranks_need_under_cleanenv(tmp_path):
    sif = tmp_path / "jax.sif"
    sif.touch()
    text = render_sbatch(spec(Container(runtime="apptainer", image=str(sif), flags=("--cleanenv",)),
                              env={"MY_VAR": "1", "LD_LIBRARY_PATH": "/opt/lib"}))
    line = launch_line(text)
    assert f'apptainer exec --nv --cleanenv --bind "$HPCJAX_LOG_DIR" --bind {hpcjax_package_dir()}:/opt/hpcjax/lib/hpcjax' in line
    assert "export APPTAINERENV_PYTHONPATH=/opt/hpcjax/lib/hpcjax/rank/watch/exithook:/opt/hpcjax/lib\n" in text
    assert "export APPTAINERENV_LD_LIBRARY_PATH=/opt/lib\n" in text  # Apptainer never passes the host's
    assert 'case $v in SLURM_*|SLURMD_NODENAME|JAX_*|XLA_*|NCCL_*|CUDA_VISIBLE_DEVICES|HPCJAX_*' in line
    assert '|MY_VAR|LD_LIBRARY_PATH) export "APPTAINERENV_$v=${!v}"' in line
    assert "command -v apptainer >/dev/null ||" in text


def test_singularity_gets_both_prefixes_and_no_hpcjax_bind_when_the_image_ships_it():
    text = render_sbatch(spec(Container(runtime="singularity", image="$JAX_IMAGE", bind_hpcjax=False)))
    assert "/opt/hpcjax/lib" not in text and "PYTHONPATH" not in text
    assert 'export SINGULARITYENV_JAX_COORDINATOR_ADDRESS="$JAX_COORDINATOR_ADDRESS"' in launch_line(text)


def test_charliecloud_prepares_the_image_and_cleans_the_environment_before_ch_run(image_dir):
    text = render_sbatch(spec(Container(runtime="charliecloud", image=image_dir, binds=("/shared/run:/run-dir",),
                                        cleanenv=True)))
    assert 'export USER="${USER:-$(id -un)}"' in text
    assert '"$hpcjax_image"/run-dir "$hpcjax_image"/opt/hpcjax/lib/hpcjax' in text
    assert 'touch "$hpcjax_image/etc/hosts"' in text
    line = launch_line(text)
    assert (f'ch-run -b "$PWD" -c "$PWD" -b "$HPCJAX_LOG_DIR" -b /shared/run:/run-dir '
            f"-b {hpcjax_package_dir()}:/opt/hpcjax/lib/hpcjax --set-env=PYTHONPATH=/opt/hpcjax/lib/hpcjax/rank/watch/exithook:/opt/hpcjax/lib "
            '"$hpcjax_image" --') in line
    assert '|PATH|USER|HOME|LANG|TERM) hpcjax_keep+=("$v=${!v}")' in line and 'exec env -i "${hpcjax_keep[@]}"' in line


def test_pyxis_puts_the_image_on_the_srun_line():
    line = launch_line(render_sbatch(spec(Container(runtime="pyxis", image="nvcr.io#nvidia/jax:24.04-py3",
                                                    binds=("/shared:/shared",)))))
    assert "--container-image='nvcr.io#nvidia/jax:24.04-py3'" in line and '--container-workdir="$PWD"' in line
    assert f'--container-mounts="$PWD:$PWD,$HPCJAX_LOG_DIR:$HPCJAX_LOG_DIR",/shared:/shared,{hpcjax_package_dir()}:/opt/hpcjax/lib/hpcjax' in line
    assert "--container-env=PYTHONPATH" in line and "exec --nv" not in line


def test_bad_container_input_is_refused_with_what_would_be_valid(tmp_path, image_dir):
    with pytest.raises(SpecError, match="unknown container runtime 'docker'") as raised:
        Container(runtime="docker", image="x")
    assert "charliecloud, pyxis" in raised.value.hint
    # A missing image file is the submitting machine's to find (here, or the login node's).
    from hpcjax.containers.binds import check_before_submit
    from hpcjax.job.spec import JobSpec

    with pytest.raises(SpecError, match="image '/no/such.sif' does not exist"):
        check_before_submit(JobSpec(command=("x",), container=Container(runtime="apptainer", image="/no/such.sif")))
    with pytest.raises(SpecError, match="Charliecloud runs an unpacked image"):
        Container(runtime="charliecloud", image="docker://nvcr.io/nvidia/jax:24.04-py3")
    with pytest.raises(SpecError, match="pyxis has no clean environment"):
        Container(runtime="pyxis", image="nvcr.io#nvidia/jax", cleanenv=True)
    with pytest.raises(SpecError, match="pyxis's --container-mounts splits on"):
        Container(runtime="pyxis", image="nvcr.io#nvidia/jax", binds=("/a,b:/c",))
    assert Container(runtime="apptainer", image=str(tmp_path / "img"), flags=("-e",)).cleanenv


def test_a_gpu_node_whose_jax_has_no_cuda_plugin_is_refused(monkeypatch):
    denv = resolve({"HPCJAX_GPUS_PER_PROCESS": "1"}, gpu_available=False)
    real_exists = runtime.os.path.exists
    monkeypatch.setattr(runtime.os.path, "exists", lambda p: p == "/dev/nvidiactl" or real_exists(p))
    monkeypatch.setattr(runtime, "has_cuda_plugin", lambda: False)
    with pytest.raises(LayoutError, match="has NVIDIA GPUs .* no CUDA plugin .*inside the charliecloud container"):
        runtime.check_gpu_usable(denv, {"CH_RUNNING": "Weird Al Yankovic"})
    runtime.check_gpu_usable(denv, {"HPCJAX_PLATFORM": "cpu"})  # the CPU on purpose
    monkeypatch.setattr(runtime, "has_cuda_plugin", lambda: True)
    runtime.check_gpu_usable(denv, {})


def test_a_missing_bind_source_is_refused_before_submission(tmp_path, hpcjax_home):
    from hpcjax import launch
    from hpcjax.values.errors import UsageError

    sif = tmp_path / "jax.sif"
    sif.touch()
    job = spec(Container(runtime="apptainer", image=str(sif), binds=(f"{tmp_path}/gone:/data",)),
               output_dir=str(tmp_path / "logs"))
    with pytest.raises(UsageError, match="bind source '.*/gone' does not exist on this machine") as raised:
        launch.submit(job, "slurm")
    assert "$SCRATCH" in raised.value.hint
    assert not (tmp_path / "logs").exists()  # nothing written, nothing submitted
    later = spec(Container(runtime="apptainer", image=str(sif), binds=("$SCRATCH/data:/data",)))
    from hpcjax.containers.binds import check_before_submit
    check_before_submit(later)  # the job expands it


def test_a_compile_cache_named_by_env_is_bound_in_place(tmp_path):
    cache = tmp_path / "xla cache"
    cache.mkdir()
    sif = tmp_path / "jax.sif"
    sif.touch()
    line = launch_line(render_sbatch(spec(Container(runtime="apptainer", image=str(sif)),
                                          env={"HPCJAX_COMPILE_CACHE": str(cache)})))
    assert f"--bind '{cache}:{cache}'" in line
