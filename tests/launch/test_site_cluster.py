"""`hpcjax site` on the dev cluster (issue 45): here on its login node and from a laptop over SSH
(the tests' own sshd on 127.0.0.1), one compute node probed in a real step. What this cluster has
is asserted as it is: SLURM 22.05, one default partition of 2 nodes with 4 untyped GPUs each,
Charliecloud's ch-run on the nodes, no module command, no nvidia-smi. Typed GPUs, several
partitions and QOS limits are read from text in SLURM's formats (tests/cli/test_site.py)."""

from __future__ import annotations

import json

from conftest import run_hpcjax


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
