"""Every rank in a REAL container on the dev cluster: Charliecloud (ch-run) running an image
that holds JAX and NumPy but not hpcjax (containers/charliecloud-image.sh); hpcjax binds
its rank side in at launch. Apptainer is exercised through tests/standins/apptainer, a
STAND-IN that checks the exec grammar, applies --cleanenv/--env semantics and then runs
the command in the same real Charliecloud image: it proves hpcjax's side, not Apptainer."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, run_hpcjax
from support import MODEL, records

pytestmark = pytest.mark.cluster


def ch_env():
    return {**os.environ, "USER": os.environ.get("USER") or "root"}


def test_the_image_lacks_hpcjax_so_the_bound_one_runs(charliecloud_image):
    inside = subprocess.run(["ch-run", charliecloud_image, "--", "python3", "-c", "import jax, numpy, hpcjax"],
                            capture_output=True, text=True, env=ch_env())
    assert inside.returncode != 0 and "No module named 'hpcjax'" in inside.stderr


@pytest.mark.parametrize("layout", [("4", "1"), ("4", "4")], ids=["G8N2p8", "G8N2p2"])
def test_check_all_in_charliecloud_on_two_nodes(layout, charliecloud_image, shared_storage, slurm_cluster,
                                                hpcjax_home):
    gpus, per_process = layout
    result = run_hpcjax("smoke", "--nodes", "2", "--gpus-per-node", gpus, "--gpus-per-process", per_process,
                        "--runtime", "charliecloud", "--image", charliecloud_image, "--cleanenv", "--json",
                        cwd=shared_storage, timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    verdict = json.loads(result.stdout)
    assert verdict["ok"], verdict
    logs = sorted((shared_storage / "hpcjax-logs").glob("*-rank*.log"))
    assert len(logs) == 8 // int(per_process)
    for log in logs:
        text = log.read_text()
        assert "in a charliecloud container" in text and "allreduce: ok" in text, text


def test_training_in_charliecloud_checkpoints_into_a_bound_run_dir_and_resumes(charliecloud_image, shared_storage,
                                                                               slurm_cluster, hpcjax_home):
    run_dir = shared_storage / "run"
    run_dir.mkdir()
    box = ["--runtime", "charliecloud", "--image", charliecloud_image, "--bind", str(run_dir)]
    train = ["python3", "-m", "hpcjax", "train", "--strategy", "fsdp", "--checkpoint-every", "4",
             "--run-dir", str(run_dir), *MODEL]
    first = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", *box, "--wait", "--", *train,
                       "--steps", "8", cwd=shared_storage, timeout=600)
    assert first.returncode == 0, first.stderr
    second = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", *box, "--wait", "--", *train,
                        "--steps", "12", cwd=shared_storage, timeout=600)
    assert second.returncode == 0, second.stderr
    assert sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit()) == [4, 8, 12]
    steps = [r["step"] for r in records(run_dir) if "loss" in r]
    assert steps == list(range(12))  # the second job went on from step 8, once each
    log = run_hpcjax("logs", second.stdout.strip(), "--rank", "0", cwd=shared_storage).stdout
    assert "in a charliecloud container" in log and "resum" in log.lower()


def env_json_by_rank(job_dir, job):
    found = {}
    for log in job_dir.glob(f"{job}-rank*.log"):
        text = log.read_text()
        found[int(log.name.split("rank")[1].split(".")[0])] = json.loads(text[text.index("{"):text.rindex("}") + 1])
    return found


def test_apptainer_standin_with_cleanenv_sees_the_same_mapping_as_a_bare_rank(charliecloud_image, shared_storage,
                                                                              slurm_cluster, hpcjax_home):
    sif = shared_storage / "jax.sif"
    sif.write_text(charliecloud_image)  # the stand-in runs the real Charliecloud image named in it
    env = {"PATH": f"{REPO / 'tests' / 'standins'}:{os.environ['PATH']}", "USER": "root"}
    mapped = {}
    for name, box, python in (("bare", [], sys.executable),  # the image's python3 inside the container
                              ("apptainer", ["--runtime", "apptainer", "--image", str(sif), "--cleanenv"], "python3")):
        result = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", *box, "--wait", "--", python, "-m",
                            "hpcjax", "env", "--json", cwd=shared_storage, env=env, timeout=300)
        assert result.returncode == 0, result.stderr
        mapped[name] = env_json_by_rank(shared_storage / "hpcjax-logs", result.stdout.strip())
    assert sorted(mapped["bare"]) == sorted(mapped["apptainer"]) == [0, 1, 2, 3]
    keys = ("coordinator_host", "num_processes", "process_id", "local_device_ids", "devices_per_process",
            "platform", "launcher")
    for rank in range(4):
        bare, boxed = mapped["bare"][rank], mapped["apptainer"][rank]
        assert {k: bare[k] for k in keys} == {k: boxed[k] for k in keys}, (rank, bare, boxed)
        assert boxed["container"] == "apptainer" and bare["container"] is None
        assert boxed["plain_jax_differs"] == [] and boxed["problem"] is None


def test_a_remote_function_runs_in_a_stock_image_with_its_data_bound(charliecloud_image, shared_storage,
                                                                     slurm_cluster, hpcjax_home):
    """The Python API in an image without hpcjax or submitit: hpcjax is bound in, the worker's
    own dependencies come from copies beside the call, the Data path is bound in place."""
    import hpcjax

    def in_the_container(path):  # defined here: pickled by value, as a script's function is
        import os

        import jax

        return (os.environ.get("CH_RUNNING") is not None, jax.process_count(), sorted(os.listdir(path)))

    data = shared_storage / "data set"
    data.mkdir()
    (data / "a.txt").write_text("x")
    remote = hpcjax.remote(nodes=2, gpus_per_node=1, runtime="charliecloud", image=charliecloud_image,
                           backend="slurm", storage_path=str(shared_storage / "calls"))(in_the_container)
    assert remote(hpcjax.Data(data)) == (True, 2, ["a.txt"])


def test_variables_in_binds_and_env_expand_on_the_compute_node(charliecloud_image, shared_storage, slurm_cluster,
                                                              hpcjax_home):
    """`--bind '$SLURM_SUBMIT_DIR/data set:/data'` (a variable SLURM sets only inside the job) and
    `--env 'PATH=$SLURM_SUBMIT_DIR/bin:$PATH'` in a real Charliecloud job: the bind reaches /data,
    the program is found on the extended PATH, the node's own PATH follows it; a literal
    `$(...)` in another value stays literal."""
    (shared_storage / "data set").mkdir()
    (shared_storage / "data set" / "a.txt").write_text("x")
    (shared_storage / "bin").mkdir()
    hello = shared_storage / "bin" / "hpcjax-hello"
    hello.write_text('#!/bin/sh\necho "data: $(ls /data)"\necho "path: $PATH"\necho "literal: $LITERAL"\n')
    hello.chmod(0o755)
    env = {"SLURM_SUBMIT_DIR": ""}  # not this process's: only the job's
    result = run_hpcjax("submit", "--nodes", "1", "--gpus-per-node", "1", "--runtime", "charliecloud",
                        "--image", charliecloud_image, "--bind", "$SLURM_SUBMIT_DIR/data set:/data",
                        "--env", "PATH=$SLURM_SUBMIT_DIR/bin:$PATH", "--env", "LITERAL=$(touch pwned)",
                        "--wait", "--", "hpcjax-hello", cwd=shared_storage, env={**ch_env(), **env}, timeout=300)
    assert result.returncode == 0, result.stderr
    [log] = (shared_storage / "hpcjax-logs").glob("*-rank0.log")
    text = log.read_text()
    assert "data: a.txt" in text, text
    path = next(line for line in text.splitlines() if line.startswith("path: "))
    assert path.startswith(f"path: {shared_storage}/bin:") and "/usr/bin" in path, path
    assert "literal: $(touch pwned)" in text and not (shared_storage / "pwned").exists()


def test_the_exit_guard_works_inside_the_container(charliecloud_image, shared_storage, slurm_cluster, hpcjax_home):
    """The usual script's shape (its last collective in flight when it returns: issue 48), unmodified,
    2 nodes x 4 ranks per node in a real Charliecloud container under --cleanenv: the bound copy of
    the guard's hook is first on the container's PYTHONPATH, chained to the image's own
    sitecustomize, and arms the guard at `import jax` in every rank; the job is COMPLETED well
    before the ~155 s a stalled exit takes (tests/rank/test_exitguard_cluster.py has the figures)."""
    for name in ("exit_stall_program.py", "program_ends.py"):
        (shared_storage / name).write_text((REPO / "tests" / "data" / name).read_text())
    result = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "4", "--runtime", "charliecloud",
                        "--image", charliecloud_image, "--cleanenv", "--time", "00:05:00",
                        "--wait", "--", "python3", "exit_stall_program.py", cwd=shared_storage, env=ch_env(), timeout=300)
    assert result.returncode == 0, result.stderr
    logs = [log.read_text() for log in (shared_storage / "hpcjax-logs").glob("*-rank*.log")]
    assert len(logs) == 8 and all("shape (256, 256), guard armed: True" in text for text in logs), logs
    elapsed = json.loads(run_hpcjax("status", result.stdout.strip(), "--json", cwd=shared_storage).stdout)["elapsed"]
    hours, minutes, seconds = (int(part) for part in elapsed.split(":"))
    assert hours * 3600 + minutes * 60 + seconds < 60, elapsed  # a stalled exit alone is ~155 s
