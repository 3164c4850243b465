"""From a laptop, over SSH, on the dev cluster (tests/sshd.py): real ssh and rsync to a real
sshd as the cluster user, whose jobs the dev cluster runs. The laptop's files are in pytest's
0700 directories, which the cluster user cannot read, and the laptop has no SLURM of its own
(SLURM_CONF points nowhere), so a job that relied on a shared filesystem or a local sbatch
would fail here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from conftest import SHARED_MACHINE, run_hpcjax


def laptop_repository(where, version: str):
    """A git repository on the laptop: a tracked job script, an untracked data file (shipped:
    not ignored), and an ignored one (not shipped)."""
    repo = where / "project"
    (repo / "data").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("scratch/\n")
    (repo / "scratch").mkdir()
    (repo / "scratch" / "big.bin").write_bytes(b"\0" * 1000)
    (repo / "data" / "words.txt").write_text("hello from the laptop\n")
    write_job(repo, version)
    subprocess.run(["git", "-C", str(repo), "add", "job.py", ".gitignore"], check=True)
    return repo


def write_job(repo, version: str) -> None:
    (repo / "job.py").write_text(
        "import os, hpcjax\n"
        f"print('version {version} rank', os.environ['SLURM_PROCID'], open('data/words.txt').read().strip(),\n"
        "      'scratch shipped' if os.path.exists('scratch') else 'scratch left behind', flush=True)\n"
        "print('hpcjax from', os.path.dirname(hpcjax.__file__), flush=True)\n"
        "import sys, jax, sitecustomize\n"  # `import jax` arms the exit guard: its hook is the shipped hpcjax's
        "from hpcjax.rank.watch import exitguard\n"
        "print('exit guard', exitguard.armed(), 'from', exitguard.__file__, 'site', sitecustomize.__file__, flush=True)\n"
        # the usual script's end (issue 48): a collective still in flight when the program returns
        "import numpy as np, jax.numpy as jnp\n"
        "from jax.experimental import multihost_utils\n"
        "from jax.sharding import Mesh, PartitionSpec as P\n"
        "jax.distributed.initialize()\n"
        "a = multihost_utils.host_local_array_to_global_array(np.ones((64, 256), np.float32),\n"
        "                                                     Mesh(np.array(jax.devices()), ('x',)), P('x'))\n"
        "print('shape', jnp.dot(a.T, a).shape, flush=True)\n")


def sent(stderr: str) -> tuple[int, int]:
    """(files, bytes) rsync sent, from submit's `shipped ...` line."""
    match = re.search(r"sent (\d+) file\(s\), (\d+) bytes", stderr)
    assert match, stderr
    return int(match[1]), int(match[2])


def test_submit_from_a_laptop_ships_the_tree_runs_its_snapshot_and_follows_it(laptop, ssh_cluster):
    profiles = ssh_cluster.profiles(laptop / "profiles.toml")
    repo = laptop_repository(laptop, "1")
    where = ["--profile", "devcluster", "--profile-file", str(profiles)]
    first = run_hpcjax("submit", *where, "--nodes", "2", "--wait", "--", "python3", "job.py", cwd=repo, timeout=600)
    assert first.returncode == 0, first.stderr
    job = first.stdout.strip()
    assert sent(first.stderr)[0] == 3, first.stderr  # job.py, .gitignore, data/words.txt
    logs = run_hpcjax("logs", job, cwd=repo)  # the laptop's record knows the cluster
    assert logs.returncode == 0, logs.stderr
    for rank, node in ((0, "node1"), (1, "node2")):
        assert f"[rank {rank} {node}] version 1 rank {rank} hello from the laptop scratch left behind" in logs.stdout
    shipped = re.findall(r"hpcjax from (\S+)", logs.stdout)
    assert shipped and all(p.startswith("/home/") and "/hpcjax-tests/" in p for p in shipped), logs.stdout
    guards = re.findall(r"exit guard True from (\S+) site (\S+)", logs.stdout)
    assert sorted(guard for guard, _ in guards) == sorted(f"{p}/rank/watch/exitguard.py" for p in shipped), logs.stdout
    assert all(site == "/usr/lib/python3.11/sitecustomize.py" for _, site in guards)  # the cluster's own, chained
    assert logs.stdout.count("shape (256, 256)") == 2, logs.stdout
    elapsed = json.loads(run_hpcjax("status", job, "--json", cwd=repo).stdout)["elapsed"]
    assert elapsed < "00:01:00", elapsed  # a stalled exit alone is ~155 s (tests/rank/test_exitguard_cluster.py)

    # One changed file: only it is sent. The job waits 5 s in the queue; the laptop's copy is
    # edited meanwhile, and the job runs what was submitted.
    write_job(repo, "2")
    second = run_hpcjax("submit", *where, "--nodes", "2", "--sbatch=--begin=now+5", "--", "python3", "job.py",
                        cwd=repo)
    assert second.returncode == 0, second.stderr
    files, size = sent(second.stderr)
    assert files == 1 and size < 1000, second.stderr
    write_job(repo, "3")
    job = second.stdout.strip()
    followed = run_hpcjax("logs", job, "--follow", cwd=laptop, timeout=600)
    assert followed.returncode == 0, followed.stderr
    assert f"job {job} ended COMPLETED" in followed.stderr
    for rank, node in ((0, "node1"), (1, "node2")):
        assert f"[rank {rank} {node}] version 2 rank {rank}" in followed.stdout, followed.stdout
    assert "version 3" not in followed.stdout

    status = run_hpcjax("status", job, "--json", cwd=laptop)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["state"] == "COMPLETED"

    # the laptop's catalog of runs: both jobs, on the cluster, their attempts from the cluster's sacct
    listed = run_hpcjax("runs", "--json", cwd=laptop)
    assert listed.returncode == 0, listed.stderr
    rows = {r["job_id"]: r for r in json.loads(listed.stdout)}
    assert rows[job]["state"] == rows[first.stdout.strip()]["state"] == "COMPLETED"
    assert rows[job]["cluster"] and rows[job]["key"] == f"{job}@{rows[job]['key'].split('@')[1]}"
    assert rows[job]["attempts"][0]["nodelist"] == "node[1-2]" and rows[job]["gpu_hours"] >= 0


def test_cancel_and_a_second_laptop_attach_through_the_record_on_the_cluster(laptop, ssh_cluster, monkeypatch):
    profiles = ssh_cluster.profiles(laptop / "profiles.toml")
    submitted = run_hpcjax("submit", "--cluster", "devcluster", "--profile-file", str(profiles),
                           "--", "sleep", "300", cwd=laptop)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    # Another laptop: no local record; --cluster finds the job's record on the cluster.
    monkeypatch.setenv("HPCJAX_HOME", str(laptop / "other-laptop"))
    cancelled = run_hpcjax("cancel", job, "--cluster", "devcluster", "--profile-file", str(profiles), cwd=laptop)
    assert cancelled.returncode == 0, cancelled.stderr
    status = run_hpcjax("status", job, "--json", "--cluster", "devcluster", "--profile-file", str(profiles),
                        cwd=laptop)
    assert json.loads(status.stdout)["state"] == "CANCELLED", status.stdout


def test_a_hostile_record_on_the_cluster_never_runs_a_command_on_the_laptop(laptop, ssh_cluster, monkeypatch):
    """Issue 34: `status JOBID --cluster NAME` on a fresh laptop read the job's record from the
    cluster's remote_dir/records/ and used the ssh options in it: anyone who can write there ran a
    command on every laptop that looked. A record names a cluster, never how to reach it."""
    profiles = ssh_cluster.profiles(laptop / "profiles.toml")
    where = ["--cluster", "devcluster", "--profile-file", str(profiles)]
    done = run_hpcjax("submit", *where, "--wait", "--", "true", cwd=laptop, timeout=600)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    marker = laptop / "pwned"
    hostile = {"destination": "hpcjax-test-cluster", "remote_dir": ssh_cluster.remote_dir, "python": "/tmp/evil",
               "ssh_options": ["-oProxyCommand=touch " + str(marker)]}
    home = ssh_cluster.ssh(f"cd {ssh_cluster.remote_dir} && pwd -P").stdout.strip()
    path = f"{home}/records/{job}.json"
    record = json.loads(ssh_cluster.ssh(f"cat {path}").stdout)
    record["cluster"] = hostile
    planted = ssh_cluster.ssh(f"cat > {path} <<'EOF'\n{json.dumps(record)}\nEOF")
    assert planted.returncode == 0, planted.stderr
    monkeypatch.setenv("HPCJAX_HOME", str(laptop / "fresh-laptop"))  # no record of its own
    for verb in (["status", job], ["logs", job], ["fetch", job, "--to", str(laptop / "back")]):
        looked = run_hpcjax(*verb, *where, cwd=laptop)
        assert looked.returncode == 0, (verb, looked.stderr)
    assert not marker.exists()
    assert "COMPLETED" in run_hpcjax("status", job, *where, cwd=laptop).stdout


def test_smoke_on_two_nodes_from_a_laptop(laptop, ssh_cluster):
    """2 x 2 (the 2 x 4 layout, every GPU of the dev cluster, is proven on it in
    tests/rank/test_runtime_cluster.py and in a container: here its job queued 62 s for the
    whole cluster to drain, CI 38, and held back every job queued after it)."""
    profiles = ssh_cluster.profiles(laptop / "profiles.toml")
    done = run_hpcjax("smoke", "--cluster", "devcluster", "--profile-file", str(profiles), "--nodes", "2",
                      "--gpus-per-node", "2", "--json", cwd=laptop, timeout=600)
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["ok"] and len(verdict["ranks"]) == 4
    assert {r["node"] for r in verdict["ranks"]} == {"node1", "node2"}
    assert "/code/" not in done.stderr  # the checks need no working tree: only hpcjax is shipped


def test_a_preflight_from_a_laptop_runs_with_the_clusters_python(laptop, ssh_cluster):
    """--preflight over SSH: the step runs hpcjax (shipped) with the cluster's Python, not the laptop's."""
    profiles = ssh_cluster.profiles(laptop / "profiles.toml")
    done = run_hpcjax("submit", "--cluster", "devcluster", "--profile-file", str(profiles), "--nodes", "2",
                      "--gpus-per-node", "2", "--preflight", *SHARED_MACHINE,  # other jobs share
                      "--wait", "--", "python3", "-c", "print('ran')",
                      cwd=laptop, timeout=600)
    assert done.returncode == 0, done.stderr
    status = json.loads(run_hpcjax("status", done.stdout.strip(), "--json", cwd=laptop).stdout)
    assert status["attempts"][0]["preflight"].startswith("preflight: 2 node(s), 4 device(s), passed"), status


def jobs_named(ssh_cluster, name: str) -> str:
    """What the cluster has of jobs with this name (queued, running or finished)."""
    done = ssh_cluster.ssh(f"sacct -X -n -P -S now-1hour --name {name} -o JobID; squeue -h -n {name} -o %i")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("fault, said, hint", [
    ("unknown host", "cannot connect to bad-cluster: the host is unknown", "check the name"),
    ("refused", "cannot connect to bad-cluster: the connection was refused", "check the port"),
    ("refused key", "cannot connect to bad-cluster: authentication failed", "the key (IdentityFile)"),
    ("no sbatch", "`sbatch` is not on the PATH of bad-cluster in a login shell", "a site module"),
    ("remote_dir not writable", "the remote directory /proc/hpcjax is not usable on bad-cluster",
     "set remote_dir in the profile"),
])
def test_a_cluster_that_cannot_take_the_job_says_why_within_seconds_and_nothing_is_submitted(
        laptop, ssh_cluster, fault, said, hint):
    alias = {"unknown host": dict(hostname="no-such-login.invalid"), "refused": dict(port=sshd_free_port()),
             "refused key": dict(key=ssh_cluster.new_key(f"stranger-{time.monotonic_ns()}")),
             "no sbatch": dict(no_slurm=True), "remote_dir not writable": {}}[fault]
    host = f"bad-{fault.replace(' ', '-')}-{time.monotonic_ns()}"  # ssh takes a name's first Host block
    ssh_cluster.add_alias(host, **alias)
    profiles = ssh_cluster.profiles(laptop / "profiles.toml", host=host)
    if fault == "remote_dir not writable":
        profiles.write_text(profiles.read_text().replace(ssh_cluster.remote_dir, "/proc/hpcjax"))
    name = f"fault-{fault.replace(' ', '-')}-{laptop.name[-12:]}"
    started = time.monotonic()
    done = run_hpcjax("submit", "--profile", "devcluster", "--profile-file", str(profiles), "--job-name", name,
                      "--", "python3", "-c", "print(1)", cwd=laptop)
    elapsed = time.monotonic() - started
    assert done.returncode != 0 and done.stdout == "", done
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"error: {said.replace('bad-cluster', host)}"), done.stderr
    assert sum(line.startswith("error:") for line in lines) == 1 and hint in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert elapsed < 10, f"{fault}: {elapsed:.1f} s"  # the bound, far above what it takes
    assert jobs_named(ssh_cluster, name) == ""


def sshd_free_port() -> int:
    from sshd import free_port

    return free_port()


def test_a_dropped_connection_while_waiting_is_said_ridden_out_and_the_true_outcome_reported(laptop, ssh_cluster):
    """sshd (and every connection it serves, the shared one too) stops while `submit --wait`
    follows a job, and starts again 8 s later: the wait says so, reconnects, and ends with
    the job's own outcome (it exited 3 after 20 s, unaware of the laptop)."""
    profiles = ssh_cluster.profiles(laptop / "profiles.toml")
    waiting = subprocess.Popen([sys.executable, "-m", "hpcjax", "submit", "--profile", "devcluster", "--profile-file",
                                str(profiles), "--wait", "--", "bash", "-c", "sleep 20; echo done waiting; exit 3"],
                               cwd=laptop, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = []
    try:
        for line in waiting.stderr:
            said.append(line)
            if "RUNNING" in line:
                break
        ssh_cluster.stop()
        time.sleep(8)
        ssh_cluster.start()
        out, rest = waiting.communicate(timeout=300)
    finally:
        waiting.kill()
        ssh_cluster.start() if ssh_cluster.process is None else None
    stderr = "".join(said) + rest
    assert waiting.returncode == 3, stderr
    assert "the job goes on without us" in stderr and "connected again to hpcjax-test-cluster" in stderr, stderr
    assert re.search(r"rank 0 on node[12] failed: Exited with exit code 3", stderr), stderr  # node2 when node1 is busy


def test_a_training_run_on_the_cluster_is_fetched_back_and_its_report_built_on_the_laptop(laptop, ssh_cluster):
    """`hpcjax train` 2x2 over SSH checkpoints twice; `fetch JOBID` brings back the job's logs and
    its run directory with only the latest checkpoint and no compile cache; a second fetch
    sends nothing new; `report JOBID` builds the page here."""
    from support import MODEL

    profiles = ssh_cluster.profiles(laptop / "profiles.toml")
    where = ["--cluster", "devcluster", "--profile-file", str(profiles)]
    trained = run_hpcjax("submit", *where, "--nodes", "2", "--gpus-per-node", "2", "--wait", "--",
                         "python3", "-m", "hpcjax", "train", "--strategy", "fsdp", "--steps", "6",
                         "--checkpoint-every", "3", "--compile-cache", "auto", "--run-dir", "runs/first", *MODEL,
                         cwd=laptop, timeout=600)
    assert trained.returncode == 0, trained.stderr
    job = trained.stdout.strip()
    fetched = run_hpcjax("fetch", job, "--to", str(laptop / "back"), cwd=laptop)
    assert fetched.returncode == 0, fetched.stderr
    run = laptop / "back" / "first"
    assert fetched.stdout.strip() == str(run)
    assert sorted(p.name for p in (run / "checkpoints").iterdir() if p.name.isdigit()) == ["6"]
    assert not (run / "compile-cache").exists()
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()
             if "loss" in json.loads(line)]
    assert steps == list(range(6)), steps  # step indices 0..5; the checkpoint after the last is 6
    logs = sorted(p.name for p in (laptop / "back" / "logs").iterdir())
    assert len([n for n in logs if "rank" in n or n.endswith(".log")]) >= 4, logs
    again = run_hpcjax("fetch", job, "--to", str(laptop / "back"), cwd=laptop)
    assert "run directory" in again.stderr and " 0 file(s)" in again.stderr, again.stderr
    report = run_hpcjax("report", job, "--to", str(laptop / "for-report"), cwd=laptop)
    assert report.returncode == 0, report.stderr
    page = laptop / "for-report" / "first" / "report.html"
    assert report.stdout.strip() == str(page) and "loss" in page.read_text()

    # Issue 34: a relative --run-dir lived in each submission's snapshot, so nothing resumed, and
    # what fetch brought back into the working directory was shipped again with the next job. The
    # run relaunched with two more steps resumes (one job: a relaunch of the same 6 steps that
    # found nothing to train was a third 2 x 2 job, ~70 s of CI).
    longer = run_hpcjax("relaunch", job, "--wait", "--", "python3", "-m", "hpcjax", "train", "--strategy", "fsdp",
                        "--steps", "8", "--checkpoint-every", "3", "--compile-cache", "auto", "--run-dir",
                        "runs/first", *MODEL, cwd=laptop, timeout=600)
    assert longer.returncode == 0, longer.stderr
    said = run_hpcjax("logs", longer.stdout.strip(), "--rank", "0", cwd=laptop).stdout
    assert "resumed from the checkpoint of step 6" in said, said
    snapshot = re.search(r"shipped \S+ to \S+:(\S+) \(", longer.stderr)[1]
    assert ssh_cluster.ssh(f"test -d {snapshot} && ! test -e {snapshot}/back && test -L {snapshot}/runs/first"
                           ).returncode == 0, snapshot
    fetched = run_hpcjax("fetch", longer.stdout.strip(), "--to", str(laptop / "back"), cwd=laptop)
    assert fetched.returncode == 0, fetched.stderr
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()
             if "loss" in json.loads(line)]
    assert steps == list(range(8)), steps


def test_tunnel_forwards_a_port_of_the_jobs_node_to_the_laptop(laptop, ssh_cluster):
    """A job serves HTTP on its node; `hpcjax tunnel JOBID PORT` prints a local URL that
    reaches it through the shared connection, and closes when the job ends."""
    import urllib.request

    from sshd import free_port

    profiles = ssh_cluster.profiles(laptop / "profiles.toml")
    where = ["--cluster", "devcluster", "--profile-file", str(profiles)]
    (laptop / "site").mkdir()
    (laptop / "site" / "hello.txt").write_text("served from the node\n")
    port, local = free_port(), free_port()
    served = run_hpcjax("submit", *where, "--", "python3", "-m", "http.server", str(port), cwd=laptop / "site")
    assert served.returncode == 0, served.stderr
    job = served.stdout.strip()
    tunnel = None
    try:
        deadline = time.monotonic() + 300
        while json.loads(run_hpcjax("status", job, "--json", cwd=laptop).stdout)["state"] != "RUNNING":
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(1)
        tunnel = subprocess.Popen([sys.executable, "-m", "hpcjax", "tunnel", job, str(port), "--local-port",
                                   str(local)], cwd=laptop, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        url = tunnel.stdout.readline().strip()
        assert url == f"http://127.0.0.1:{local}/", (url, tunnel.stderr.read() if tunnel.poll() is not None else "")
        body = ""
        for _ in range(60):  # the server may still be starting on the node
            try:
                body = urllib.request.urlopen(url + "hello.txt", timeout=5).read().decode()
                break
            except OSError:
                time.sleep(1)
        assert body == "served from the node\n"
        # hpcjax stacks from the laptop reaches the node through the login node; py-spy missing
        # there (HPCJAX_PY_SPY naming nothing, sent with the login) must be said, not crash
        looked = run_hpcjax("stacks", job, cwd=laptop, env={"HPCJAX_PY_SPY": "/nonexistent/py-spy"})
        # the node SLURM chose (node1 when idle, node2 when another test's job holds node1)
        assert looked.returncode == 1 and re.search(r"py-spy is not installed on node[12]\b",
                                                    looked.stdout + looked.stderr), looked.stdout + looked.stderr
        assert "hint: pip install py-spy" in looked.stdout + looked.stderr
    finally:
        run_hpcjax("cancel", job, cwd=laptop)
    _, said = tunnel.communicate(timeout=120)
    assert f"job {job} ended: tunnel closed" in said, said
    again = run_hpcjax("tunnel", job, str(port), cwd=laptop)  # issue 63: it said "wait for it" of an ended job
    assert again.returncode == 1 and again.stderr.startswith(f"error: job {job} has ended (CANCELLED): no node to "
                                                             "forward to"), again.stderr
    assert "wait for it" not in again.stderr
    assert_closed_on_sigterm(laptop, where, ssh_cluster)


def assert_closed_on_sigterm(laptop, where, ssh_cluster) -> None:
    """`kill` of a tunnel (SIGTERM) closes the forward too: it was left forwarding (issue 34)."""
    import socket

    from sshd import free_port

    port, local = free_port(), free_port()
    served = run_hpcjax("submit", *where, "--", "python3", "-m", "http.server", str(port), cwd=laptop / "site")
    job = served.stdout.strip()
    try:
        deadline = time.monotonic() + 300
        while json.loads(run_hpcjax("status", job, "--json", cwd=laptop).stdout)["state"] != "RUNNING":
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(1)
        tunnel = subprocess.Popen([sys.executable, "-m", "hpcjax", "tunnel", job, str(port), "--local-port",
                                   str(local)], cwd=laptop, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert tunnel.stdout.readline().strip() == f"http://127.0.0.1:{local}/"
        socket.create_connection(("127.0.0.1", local), timeout=5).close()  # forwarding
        tunnel.terminate()
        _, said = tunnel.communicate(timeout=60)
        assert "tunnel closed; the job keeps running" in said, said
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", local), timeout=5).close()
    finally:
        run_hpcjax("cancel", job, cwd=laptop)


def test_upload_sends_data_once_links_it_where_the_job_looks_and_render_shows_the_clusters_paths(
        laptop, ssh_cluster):
    """--upload ./data: data git ignores (so not in the code snapshot) reaches the job at the same
    relative path; the same data again sends nothing; a name the shipped tree already uses, and
    --upload without a cluster, are refused before anything is sent. render --cluster writes the
    script with the cluster's paths."""
    profiles = ssh_cluster.profiles(laptop / "profiles.toml")
    repo = laptop_repository(laptop, "1")
    (repo / ".gitignore").write_text("scratch/\ndata/\n")
    (repo / "data" / "more.bin").write_bytes(b"\1" * 3000)
    where = ["--cluster", "devcluster", "--profile-file", str(profiles)]
    first = run_hpcjax("submit", *where, "--upload", "./data", "--wait", "--", "python3", "job.py", cwd=repo,
                       timeout=600)
    assert first.returncode == 0, first.stderr
    assert re.search(r"uploaded \S+/project/data to hpcjax-test-cluster:\S+/data/[0-9a-f]{16}/data "
                     r"\(2 files", first.stderr), first.stderr
    assert sent(first.stderr)[0] == 2, first.stderr  # job.py, .gitignore: the data went as an upload
    logs = run_hpcjax("logs", first.stdout.strip(), cwd=repo)
    # on either node: the shared dev cluster may have node1 busy with another test's job
    assert re.search(r"\[rank 0 node[12]\] version 1 rank 0 hello from the laptop", logs.stdout), logs.stdout

    again = run_hpcjax("submit", *where, "--upload", "data:inputs/data", "--wait", "--", "python3", "-c",
                       "print(open('inputs/data/words.txt').read().strip())", cwd=repo, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "is on hpcjax-test-cluster already" in again.stderr and "nothing sent" in again.stderr, again.stderr
    logs = run_hpcjax("logs", again.stdout.strip(), cwd=repo)
    assert re.search(r"\[rank 0 node[12]\] hello from the laptop", logs.stdout), logs.stdout
    # Two directories of the same files, both uploaded: each name reaches its copy (the second was
    # left a dangling link when they shared one stored copy).
    import shutil

    shutil.copytree(repo / "data", repo / "twin")
    (repo / ".gitignore").write_text("scratch/\ndata/\ntwin/\n")
    twins = run_hpcjax("submit", *where, "--upload", "./data", "--upload", "./twin", "--wait", "--", "python3",
                       "-c", "print(open('data/words.txt').read().strip(), open('twin/words.txt').read().strip())",
                       cwd=repo, timeout=600)
    assert twins.returncode == 0, twins.stderr
    logs = run_hpcjax("logs", twins.stdout.strip(), cwd=repo)
    assert re.search(r"\] hello from the laptop hello from the laptop", logs.stdout), logs.stdout

    name = f"taken-{laptop.name[-12:]}"
    for bad, said in ((["--upload", "./data:job.py"], "job.py is part of the shipped working tree"),
                      (["--upload", "./nothing-here"], "./nothing-here does not exist on this machine"),
                      (["--upload", "./data:../up"], "'../up' is not a relative path the job can be given")):
        refused = run_hpcjax("submit", *where, *bad, "--job-name", name, "--", "true", cwd=repo)
        assert refused.returncode != 0 and said in refused.stderr and "hint:" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
    here = run_hpcjax("submit", "--backend", "local", "--upload", "./data", "--", "true", cwd=repo)
    assert here.returncode != 0 and "--upload ships a local directory to a cluster" in here.stderr, here.stderr
    assert jobs_named(ssh_cluster, name) == ""

    home = ssh_cluster.ssh(f"cd {ssh_cluster.remote_dir} && pwd -P").stdout.strip()
    rendered = run_hpcjax("render", *where, "--", "python3", "job.py", cwd=repo)
    assert rendered.returncode == 0, rendered.stderr
    assert re.search(rf"PYTHONPATH={re.escape(home)}/hpcjax/[0-9.]+-[0-9a-f]{{12}}\b", rendered.stdout), \
        rendered.stdout
    assert f"#SBATCH --output={home}/" in rendered.stdout or f"{home}/logs" in rendered.stdout, rendered.stdout
    assert str(laptop) not in rendered.stdout  # nothing of the laptop's paths
    # An image is the cluster's path: checked there, not here.
    assert ssh_cluster.ssh(f"mkdir -p {home}/images/jax").returncode == 0
    image = ["--runtime", "charliecloud", "--image"]
    there = run_hpcjax("render", *where, *image, f"{home}/images/jax", "--", "python3", "job.py", cwd=repo)
    assert there.returncode == 0 and f"{home}/images/jax" in there.stdout, there.stderr
    missing = run_hpcjax("render", *where, *image, f"{home}/images/none", "--", "python3", "job.py", cwd=repo)
    assert missing.returncode == 2, missing.stderr
    assert f"image '{home}/images/none' does not exist on hpcjax-test-cluster" in missing.stderr
