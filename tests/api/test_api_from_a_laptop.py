"""The Python API from a laptop, over SSH, on the dev cluster (tests/sshd.py): the same real
ssh, sshd, rsync and SLURM as tests/hosts/test_remote_cluster.py. The cluster user's Python
has JAX but neither hpcjax nor submitit nor cloudpickle, and cannot read the laptop's files:
the call, the caller's module, hpcjax and the data all travel over SSH, and the results,
reports and checkpoints come back through it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

import hpcjax
from hpcjax.values.errors import UsageError
from api_cases import EXAMPLE, REMOTE_EXAMPLE, by_hand_losses

USER_MODULE = '''\
import os


def list_data(path, suffix):
    import jax

    return (type(path).__name__, path, sorted(os.listdir(path)), suffix, jax.process_count())


def square_or_fail(x):
    import jax

    if x == 3:
        raise RuntimeError("three is not welcome")
    return x * x + jax.process_count()


def halving_loop(config):
    import jax
    import hpcjax

    value = config["start"]
    for epoch in range(3):
        value = value / 2
        hpcjax.report({"epoch": epoch, "value": value, "ranks": jax.process_count(),
                       "job": os.environ.get("HPCJAX_JOB_KEY", "")})
'''


@pytest.fixture
def project(laptop, monkeypatch):
    """A user's project on the laptop: a git repository with their module, and a data directory
    git ignores (it is not part of the code snapshot; Data uploads it). The test runs in it, as
    `python run.py` would, with the module importable by its name."""
    repo = laptop / "project"
    (repo / "data").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("data/\n")
    name = f"usermod_{os.getpid()}_{laptop.name[-6:].replace('-', '_')}"
    (repo / f"{name}.py").write_text(USER_MODULE)
    (repo / "data" / "part 1.txt").write_text("x" * 5000)
    monkeypatch.chdir(repo)
    monkeypatch.syspath_prepend(str(repo))
    return repo, __import__(name)


def test_remote_functions_run_from_a_laptop_with_data_uploaded_once_and_errors_named(
        project, ssh_cluster, laptop, capfd):
    repo, module = project
    profiles = ssh_cluster.profiles(laptop / "profiles.toml")
    options = dict(nodes=2, gpus_per_node=1, time="00:05:00", cluster="devcluster", profile_file=str(profiles))
    listed = hpcjax.remote(**options)(module.list_data)

    call = listed.submit(hpcjax.Data("./data"), suffix="!")
    kind, path, names, suffix, ranks = call.result()
    assert (kind, names, suffix, ranks) == ("str", ["part 1.txt"], "!", 2)
    home = ssh_cluster.ssh(f"cd {ssh_cluster.remote_dir} && pwd -P").stdout.strip()
    assert re.fullmatch(re.escape(home) + r"/data/[0-9a-f]{16}/data", path), path
    said = capfd.readouterr().err
    assert re.search(r"uploaded \S+/project/data to hpcjax-test-cluster:", said), said
    assert call.state() == "COMPLETED"

    # The same data again: nothing is sent; a path already on the cluster is used in place.
    there = f"{home}/in-place"
    assert ssh_cluster.ssh(f"mkdir -p {there} && touch {there}/a {there}/b").returncode == 0
    again = listed(hpcjax.Data("./data"), suffix="?")
    assert again[1] == path and again[3] == "?"
    in_place = listed(hpcjax.Data(f"cluster:{there}"), suffix="")
    assert in_place[1:3] == (there, ["a", "b"])
    said = capfd.readouterr().err
    assert "is on hpcjax-test-cluster already" in said and "nothing sent" in said, said

    # A map: one job array there; the failing element's error comes back with the remote
    # traceback and the original exception.
    calls = hpcjax.remote(**options)(module.square_or_fail).map([1, 3])
    assert calls[0].result() == 3
    error = calls[1].exception()
    assert isinstance(error, hpcjax.RemoteError) and error.host in ("node1", "node2")
    assert "three is not welcome" in str(error) and "square_or_fail" in error.remote_traceback
    assert isinstance(error.__cause__, RuntimeError)

    # A cluster path that is not there: refused before anything is submitted.
    with pytest.raises(UsageError, match="not on hpcjax-test-cluster: /no/such/data"):
        listed.submit(hpcjax.Data("cluster:/no/such/data"), suffix="")


def run_example(example, laptop, ssh_cluster) -> subprocess.CompletedProcess:
    """A seed example run unmodified from the laptop: $HPCJAX_CLUSTER names the profile."""
    profiles = ssh_cluster.profiles(laptop / "profiles.toml")
    work = laptop / "work"
    work.mkdir(exist_ok=True)
    env = {**os.environ, "HPCJAX_CLUSTER": "devcluster", "HPCJAX_PROFILES": str(profiles)}
    return subprocess.run([sys.executable, str(example)], capture_output=True, text=True, cwd=work, env=env,
                          timeout=900)


def test_seed_003_example_runs_unmodified_from_a_laptop(laptop, ssh_cluster):
    done = run_example(REMOTE_EXAMPLE, laptop, ssh_cluster)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "1000.0"
    losses = [float(line.split("final loss ")[1].split()[0]) for line in lines[1:]]
    assert len(losses) == 3 and all(0 < loss < 0.1 for loss in losses), lines
    assert "on hpcjax-test-cluster" in done.stderr


def test_seed_000_trainer_runs_unmodified_from_a_laptop_and_reads_its_reports_back(laptop, ssh_cluster):
    done = run_example(EXAMPLE, laptop, ssh_cluster)
    assert done.returncode == 0, done.stderr[-3000:]
    reports = ssh_cluster.ssh(f"cat {ssh_cluster.remote_dir}/hpcjax-results/train_func-*/reports.jsonl")
    history = [json.loads(line)["metrics"] for line in reports.stdout.splitlines() if '"metrics"' in line]
    assert [m["epoch"] for m in history] == list(range(100))
    hand = by_hand_losses()
    assert [m["loss"] for m in history] == hand
    # result.metrics on the laptop came through the SSH connection: the same last loss.
    assert f"Training finished. Final loss: {hand[-1]:.4f}" in done.stdout
    assert "COMPLETED" in done.stderr and "G8N2p8" in done.stderr
    assert not (laptop / "work" / "hpcjax-results").exists()  # nothing of the run was written here


def test_a_trainer_and_a_remote_map_run_in_a_hold_from_a_laptop(project, ssh_cluster, laptop):
    """One hold on the cluster, held from the laptop; a @remote map (one job per element, queued in
    order) and a Trainer run in it as its jobs HOLD.s1, HOLD.s2, HOLD.s3; the hold outlives them;
    `shell` runs a command on its first node through the same connection."""
    repo, module = project
    profiles = ssh_cluster.profiles(laptop / "profiles.toml")
    name = f"lap{os.getpid()}"
    where = ["--cluster", "devcluster", "--profile-file", str(profiles)]
    done = subprocess.run([sys.executable, "-m", "hpcjax", "hold", "--name", name, "--nodes", "2", "--gpus-per-node",
                           "1", "--time", "00:05:00", *where], capture_output=True, text=True, cwd=repo, timeout=300)
    assert done.returncode == 0, done.stderr
    held = done.stdout.strip()
    try:
        options = dict(nodes=2, gpus_per_node=1, on=name, cluster="devcluster", profile_file=str(profiles))
        calls = hpcjax.remote(**options)(module.square_or_fail).map([1, 2])
        assert [c.result() for c in calls] == [3, 6]
        assert [c.job_id for c in calls] == [f"{held}.s1", f"{held}.s2"]
        trainer = hpcjax.Trainer(module.halving_loop, train_loop_config={"start": 8.0},
                                 scaling_config=hpcjax.ScalingConfig(**options),
                                 run_config=hpcjax.RunConfig(name=f"inhold-{name}"))
        result = trainer.fit()
        assert result.metrics["value"] == 1.0 and result.metrics["ranks"] == 2
        assert result.metrics["job"] == f"{held}.s3"
        listed = subprocess.run([sys.executable, "-m", "hpcjax", "holds", "--json", *where], capture_output=True,
                                text=True, cwd=repo, timeout=120)
        assert [(h["name"], h["state"]) for h in json.loads(listed.stdout)] == [(name, "RUNNING")]
        shell = subprocess.run([sys.executable, "-m", "hpcjax", "shell", "--on", name, *where, "--", "bash", "-c",
                                "echo $SLURMD_NODENAME $SLURM_JOB_ID; exit 5"], capture_output=True, text=True,
                               cwd=repo, timeout=120)
        assert shell.returncode == 5 and shell.stdout == f"node1 {held}\n", (shell.stdout, shell.stderr)
        # Issue 63: without the cluster, the hold verbs said "no holds up" and hinted a second hold of the name
        made = f"--cluster devcluster --profile-file {profiles}"
        listed = subprocess.run([sys.executable, "-m", "hpcjax", "holds"], capture_output=True, text=True, cwd=repo,
                                timeout=120)
        assert listed.returncode == 0 and f"holds made on other clusters (`hpcjax holds` with the flag lists them): " \
            f"{name} ({made})" in listed.stderr, listed.stderr
        for verb in (["release", name], ["shell", "--on", name, "--", "true"]):
            lost = subprocess.run([sys.executable, "-m", "hpcjax", *verb], capture_output=True, text=True, cwd=repo,
                                  timeout=120)
            assert lost.returncode == 2 and lost.stderr.startswith(f"error: no hold named {name!r} on this machine: "
                                                                   f"the hold {name} hpcjax made is on "), lost.stderr
            assert f"hint: name its cluster as when it was made: {made}" in lost.stderr, lost.stderr
        assert_jupyter_through_the_tunnel(name, held, where, repo, ssh_cluster)
    finally:
        subprocess.run([sys.executable, "-m", "hpcjax", "release", name, *where], capture_output=True, cwd=repo,
                       timeout=120)


def assert_jupyter_through_the_tunnel(name: str, held: str, where: list[str], repo, ssh_cluster) -> None:
    """`hpcjax jupyter --on` from the laptop: a real jupyter-server in the cluster user's Python (put there
    as a user would; hpcjax installs nothing) runs as a step of the hold; the address printed is the
    laptop's end of the tunnel (--local-port: the laptop and the cluster are one machine here, so the
    node's port is taken on the laptop's side too, as a user's own Jupyter would take 8888) and answers
    at once; Ctrl-C stops the server on the node, not only the laptop's ssh, and the hold stays.
    The port asked for is taken on the node (issue 63: Jupyter moved to the next one, and the tunnel
    went to the one asked for: no address, nothing said, for 40 s): the tunnel goes where it listens."""
    import signal
    import socket
    import urllib.request

    from sshd import free_port

    port, local = free_port(), free_port()
    taken = socket.socket()  # the nodes' names are this machine's loopback address
    taken.bind(("127.0.0.1", port))
    taken.listen()
    jupyter = subprocess.Popen([sys.executable, "-m", "hpcjax", "jupyter", "--on", name, "--port", str(port),
                                "--local-port", str(local), *where], cwd=repo, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        url = jupyter.stdout.readline().strip()
        assert url.startswith(f"http://127.0.0.1:{local}/") and "token=" in url, (url, jupyter.stderr.read())
        token = url.split("token=")[1].split("&")[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{local}/api/status?token={token}", timeout=30) as answer:
            assert answer.status == 200 and "started" in json.loads(answer.read())
        assert steps_of(held, ssh_cluster) != []
    finally:
        jupyter.send_signal(signal.SIGINT)
        _, err = jupyter.communicate(timeout=60)
        taken.close()
    assert jupyter.returncode == 0 and "Jupyter stopped; the hold keeps running" in err, err
    assert f"port {port} is taken on node1: Jupyter listens on " in err, err
    deadline = time.monotonic() + 60
    while steps_of(held, ssh_cluster):  # the server's step ends: nothing is left serving on the node
        assert time.monotonic() < deadline, steps_of(held, ssh_cluster)
        time.sleep(1)
    assert ssh_cluster.ssh(f"squeue -h -j {held} -o %T").stdout.strip() == "RUNNING"


def steps_of(job: str, ssh_cluster) -> list[str]:
    said = ssh_cluster.ssh(f"squeue -h -s -j {job} -o %i").stdout.split()
    return [step for step in said if not step.endswith((".batch", ".extern"))]


def test_an_hpcjaxignore_that_excepts_is_refused_before_anything_is_sent(project, ssh_cluster, laptop):
    """The API's entry to the .hpcjaxignore rule (the CLI's: tests/cli/test_bad_input_three.py): a
    reachable cluster, a `!` line, and nothing of the project reaches the cluster."""
    repo, module = project
    (repo / ".hpcjaxignore").write_text("data/\n!data/part 1.txt\n")
    profiles = ssh_cluster.profiles(laptop / "profiles.toml")
    squared = hpcjax.remote(cluster="devcluster", profile_file=str(profiles), time="00:05:00")(module.square_or_fail)
    with pytest.raises(UsageError, match=r"\.hpcjaxignore:2: '!data/part 1.txt'"):
        squared.submit(2)
    from hpcjax.hosts.ship import project_name

    snapshots = ssh_cluster.ssh(f"ls {ssh_cluster.remote_dir}/code 2>/dev/null || true")  # the worker's other tests' too
    assert project_name(repo) not in snapshots.stdout.split(), snapshots.stdout
