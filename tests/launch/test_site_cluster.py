"""`hpcjax site` on the dev cluster (issue 45): here on its login node and from a laptop over SSH
(the tests' own sshd on 127.0.0.1), one compute node probed in a real step. What this cluster has
is asserted as it is: SLURM 22.05, a default partition of 2 nodes with 4 untyped GPUs each and a
partition a100 of one node with 2 GPUs typed a100 and an hour's limit, the QOS gpu2 (2 GPUs per user,
2 hours) of the account physics, Charliecloud's ch-run on the nodes, no module command, no
nvidia-smi. SLURM does not enforce the QOS here (no AccountingStorageEnforce): a job over its limit
runs, and hpcjax says so (tests/releases/test_strict_site.py, with the strict site that refuses it).
More shapes of sites are read from text in tests/cli/test_site.py."""

from __future__ import annotations

import json
import os

from conftest import SHARED_MACHINE_PROFILE, run_hpcjax


def test_site_learns_the_dev_cluster_and_writes_a_profile_a_job_can_use(tmp_path, slurm_cluster, hpcjax_home):
    profiles = tmp_path / "profiles.toml"
    done = run_hpcjax("site", "--profile-file", str(profiles), cwd=tmp_path, timeout=660)  # its step may queue
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "SLURM 22.05.8 (hpcjaxdev), select/cons_tres, GRES types gpu, MPI default none"
    assert "partition gpu (default): 2 nodes, 2 x gpu:4, time limit infinite, up" in done.stdout
    node = next(line for line in done.stdout.splitlines() if line.startswith("node "))
    assert node.startswith(("node node1: charliecloud 0.", "node node2: charliecloud 0.")) and node.endswith(
        "no module command"), node
    assert "probing one node of partition gpu in a 2-minute step (srun, 1 GPU)" in done.stderr
    text = profiles.read_text()
    assert '\npartition = "gpu"  # sinfo: SLURM\'s default partition' in text
    assert "\ngpus_per_node = 4  # sinfo: every GPU node of gpu has that many (untyped)" in text
    assert '\nruntime = "charliecloud"  # the node: charliecloud is its only container runtime' in text
    shown = json.loads(run_hpcjax("profile", "show", "hpcjaxdev", "--json", "--profile-file", str(profiles),
                                  cwd=tmp_path).stdout)
    assert {k: shown["values"][k] for k in ("partition", "gpus_per_node", "runtime")} == \
        {"partition": "gpu", "gpus_per_node": 4, "runtime": "charliecloud"}
    # The profile works: a job rendered with it asks for what the site has.
    script = run_hpcjax("render", "--profile", "hpcjaxdev", "--profile-file", str(profiles), "--image", "/img",
                        "--", "true", cwd=tmp_path)
    assert script.returncode == 0, script.stderr
    assert "#SBATCH --partition=gpu" in script.stdout and "#SBATCH --gpus-per-node=4" in script.stdout
    assert "ch-run" in script.stdout
    # Refused before anything is written (found in a trial): a name that is no TOML key, a directory.
    for argv, said in ((["--name", ""], "profile name ''"), (["--profile-file", str(tmp_path)], "is not a file")):
        refused = run_hpcjax("site", "--no-node", *(["--profile-file", str(profiles)] if "--profile-file" not in argv
                                                    else []), *argv, cwd=tmp_path)
        assert refused.returncode == 2 and said in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    # Again: the name is taken, nothing is written.
    again = run_hpcjax("site", "--no-node", "--profile-file", str(profiles), cwd=tmp_path)
    assert again.returncode == 2 and "profile 'hpcjaxdev' is already in" in again.stderr, again.stderr
    assert profiles.read_text() == text


def test_site_reads_the_cluster_from_a_laptop_over_ssh(laptop, ssh_cluster):
    profiles = ssh_cluster.profiles(laptop / "profiles.toml")
    # The check's preflight below: the ratio held low (conftest.SHARED_MACHINE_ENV; CI 41 failed node2
    # at 0.31x the median, a neighbour's load).
    profiles.write_text(profiles.read_text() + SHARED_MACHINE_PROFILE + "\n")
    before = profiles.read_text()
    done = run_hpcjax("site", "--cluster", "devcluster", "--name", "dev-site", "--profile-file", str(profiles),
                      cwd=laptop, timeout=660)  # its step may queue behind other tests' jobs
    assert done.returncode == 0, done.stderr
    assert "partition gpu (default): 2 nodes, 2 x gpu:4" in done.stdout
    assert any(line.startswith("node node") for line in done.stdout.splitlines()), done.stdout
    assert f"reading {ssh_cluster.user}'s accounts" in done.stderr  # the cluster's user, not this machine's
    text = profiles.read_text()
    assert text.startswith(before) and '\nextends = "devcluster"  # the profile this was read through' in text
    shown = json.loads(run_hpcjax("profile", "show", "dev-site", "--json", "--profile-file", str(profiles),
                                  cwd=laptop).stdout)
    assert shown["values"]["host"] == json.loads(run_hpcjax("profile", "show", "devcluster", "--json",
                                                            "--profile-file", str(profiles), cwd=laptop).stdout
                                                 )["values"]["host"]
    assert shown["values"]["partition"] == "gpu"
    # The acceptance check from the laptop, with the profile site wrote (bare: the cluster user's Python):
    # every job, and its status, logs, stacks and cancel, reach the cluster through the profile.
    no_image = run_hpcjax("site", "--check", "--profile", "dev-site", "--profile-file", str(profiles), cwd=laptop)
    assert no_image.returncode == 2 and "the check's jobs run in charliecloud, and no image is given" in \
        no_image.stderr, no_image.stderr  # site wrote the node's runtime, and no image (it cannot know yours)
    # Half of each node (2 GPUs): the whole node's smokes are test_acceptance_cluster's; here what is
    # proved is that every job reaches the cluster through the profile.
    checked = run_hpcjax("site", "--check", "--profile", "dev-site", "--profile-file", str(profiles), "--runtime",
                         "none", "--gpus-per-node", "2", "--json", cwd=laptop, timeout=1200)
    assert checked.returncode == 0, checked.stderr
    verdicts = {r["check"]: r["verdict"] for r in json.loads(checked.stdout)["results"]}
    assert verdicts == {"smoke, one process per GPU": "passed", "smoke, one process per node": "passed",
                        "container": "skipped", "preflight": "passed", "an unmodified script's exit": "passed",
                        "logs, stacks, cancel": "passed"}, checked.stderr


def test_a_typed_partition_learnt_by_site_runs_jobs_and_what_it_cannot_run_is_refused_first(
        tmp_path, slurm_cluster, hpcjax_home):
    """The a100 partition: `site --partition a100` writes gpu_type; a job, a smoke of both layouts and a
    hold with its job run there with typed GPUs (an untyped srun step in a typed job was refused by
    SLURM: "Invalid GRES specification"); a GPU type, a node size, a time or a QOS it cannot have is
    refused before sbatch, naming what the site has, and nothing is submitted."""
    profiles = tmp_path / "profiles.toml"
    learnt = run_hpcjax("site", "--partition", "a100", "--name", "typed", "--no-node", "--profile-file",
                        str(profiles), cwd=tmp_path)
    assert learnt.returncode == 0, learnt.stderr
    assert "partition a100: 1 nodes, 1 x gpu:a100:2, time limit 1:00:00, up" in learnt.stdout
    text = profiles.read_text()
    assert '\ngpu_type = "a100"  # sinfo: a100\'s GPUs are typed a100' in text and "\ngpus_per_node = 2" in text
    assert "# qos gpu2: sacctmgr: limits MaxTRESPU gres/gpu=2, MaxWall 02:00:00" in text
    typed = ["--profile", "typed", "--profile-file", str(profiles)]
    done = run_hpcjax("submit", *typed, "--time", "5", "--wait", "--", "bash", "-c", "echo on $SLURMD_NODENAME",
                      cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    assert run_hpcjax("logs", job, cwd=tmp_path).stdout == "[rank 0 node3] on node3\n[rank 1 node3] on node3\n"
    for per_process in ("1", "2"):
        smoke = run_hpcjax("smoke", *typed, "--time", "5", "--gpus-per-process", per_process, cwd=tmp_path, timeout=300)
        assert smoke.returncode == 0 and f"{2 // int(per_process)} of {2 // int(per_process)} ranks passed" in \
            smoke.stdout + smoke.stderr, smoke.stdout + smoke.stderr
    name = f"t{os.getpid()}"
    held = run_hpcjax("hold", "--name", name, *typed, "--time", "5", cwd=tmp_path, timeout=300)
    assert held.returncode == 0, held.stderr
    try:
        inside = run_hpcjax("submit", "--on", name, "--wait", "--", "true", cwd=tmp_path, timeout=300)
        assert inside.returncode == 0, inside.stderr  # an untyped job, its steps typed as the hold's GPUs
        other = run_hpcjax("submit", "--on", name, "--gpu-type", "h100", "--", "true", cwd=tmp_path)
        assert other.returncode == 2 and f"hold {name} has a100 GPUs" in other.stderr, other.stderr
    finally:
        run_hpcjax("release", name, cwd=tmp_path)
    marker = f"refused-{os.getpid()}"
    for argv, said in (
            (["--gpu-type", "h100"], "partition a100 of this machine has no GPU of that type; it has 1 node(s) of "
                                     "gpu:a100:2"),
            (["--gpu-type", "a100", "--partition", "gpu"], "partition gpu of this machine has no GPU of that type"),
            (["--gpus-per-node", "4"], "partition a100 of this machine has 0 such node(s) (at most 2 a100 GPUs"),
            (["--time", "2:00:00"], "--time 02:00:00 is over partition a100's limit of 01:00:00"),
            (["--partition", "a10"], "--partition 'a10': this machine has no partition a10; it has gpu (default), "
                                     "a100")):
        refused = run_hpcjax("submit", *typed, *argv, "-J", marker, "--", "true",
                             cwd=tmp_path)
        assert refused.returncode == 2 and said in refused.stderr and "\n\nhint: " in refused.stderr, refused.stderr
    assert jobs_named(marker) == ""  # nothing reached SLURM


def jobs_named(name: str) -> str:
    import subprocess

    return subprocess.run(["squeue", "-h", "-t", "all", "-n", name, "-o", "%i"], capture_output=True, text=True).stdout + \
        subprocess.run(["sacct", "-X", "-n", "-o", "JobID", "--name", name, "-S", "now-1hour"], capture_output=True,
                       text=True).stdout.strip()
