"""Every command line hpcjax gives SLURM, built here and nowhere else (the batch script's own
lines, srun and `scontrol requeue`, are the template's: templates/sbatch.sh.j2). Each function
returns an argv; where it runs (this machine, or a login node over SSH) is its caller's host.
Job ids are given as hpcjax.values.jobid reads them: arrays' elements as A_i."""

from __future__ import annotations

from hpcjax.values import jobid

# squeue's fields with -r: one line per array element, named A_i. %S: a running job's start, a
# pending one's expected start where the scheduler has computed one (what `squeue --start` shows), else N/A.
QUEUE_FIELDS = "%i|%j|%T|%r|%N|%M|%S"
# sacct's fields of a job (and of its steps) as hpcjax reads them
ACCOUNTING_FIELDS = ("JobID", "JobName", "State", "ExitCode", "Elapsed", "NodeList", "NTasks", "Reason", "WorkDir")
# sacct's fields of each attempt of a job (--duplicates: a requeued job has one row per attempt)
ATTEMPT_FIELDS = ("JobID", "State", "Start", "End", "NodeList", "AllocTRES", "ExitCode")
SUMMARY_FORMAT = "%P %D nodes, %c CPUs, gres %G"
# sinfo's fields of each partition and node configuration (`hpcjax site`)
PARTITION_FORMAT = "%P|%a|%l|%D|%c|%m|%G"
# sinfo's fields of each node (once per partition): its GPUs and those its jobs use (`hpcjax free`)
NODE_GPUS_FORMAT = "NodeList:|,Partition:|,StateLong:|,Gres:|,GresUsed:|"
# sacctmgr's fields of the user's associations, and of each QOS's limits
ASSOC_FIELDS = ("Account", "Partition", "QOS", "DefaultQOS", "GrpTRES", "MaxTRES", "MaxWall")
QOS_FIELDS = ("Name", "MaxTRESPU", "MaxTRES", "MaxWall", "GrpTRES")


def sbatch(script: str) -> list[str]:
    """Submit a script file; its job id on stdout (`--parsable`: ID or ID;CLUSTER)."""
    return ["sbatch", "--parsable", script]


def queue(job_ids) -> list[str]:
    """What the controller knows now of these jobs (and every element of their arrays)."""
    return ["squeue", "-h", "-r", "-t", "all", "-j", ",".join(jobid.bases(job_ids)), "-o", QUEUE_FIELDS]


def queue_states(job_ids) -> list[str]:
    """The controller's `ID|STATE` of these jobs (or elements), those that ended within MinJobAge too: it
    knows an ending before accounting does (slurmdbd's record can lag seconds behind under load)."""
    return ["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-o", "%i|%T"]


def own_id(element: str) -> list[str]:
    """An array element's own job number (srun --jobid and its ranks' SLURM_JOB_ID know it by that)."""
    return ["squeue", "-h", "-j", element, "-o", "%A"]


def poll(job_ids) -> list[list[str]]:
    """The two queries one status poll of these jobs makes (slurm.status.Watcher.poll), side by side."""
    return [queue(job_ids), accounting(job_ids)]


def accounting(job_ids) -> list[str]:
    """Accounting's rows of these jobs, their array elements and their steps."""
    return ["sacct", "-j", ",".join(jobid.bases(job_ids)), "-P", "-n", "-o", ",".join(ACCOUNTING_FIELDS)]


def attempts(job_ids) -> list[str]:
    """Every attempt of these jobs (a requeued job's earlier ones too)."""
    return ["sacct", "-X", "--duplicates", "-P", "-n", "-j", ",".join(jobid.bases(job_ids)),
            "-o", ",".join(ATTEMPT_FIELDS)]


def states(job_ids) -> list[str]:
    """Each job's (or element's) last state, one `ID|STATE` line each."""
    return ["sacct", "-X", "-n", "-P", "-j", ",".join(job_ids), "-o", "JobID,State"]


def controller_job(job_id: str) -> list[str]:
    """The controller's one-line record of a job (when accounting cannot be asked)."""
    return ["scontrol", "show", "job", "-o", job_id]


def hostnames(nodelist: str) -> list[str]:
    return ["scontrol", "show", "hostnames", nodelist]


def config() -> list[str]:
    """The controller's configuration (MaxArraySize, MinJobAge, ...), `Name = value` lines."""
    return ["scontrol", "show", "config"]


def cancel(job_id: str) -> list[str]:
    return ["scancel", job_id]


def requeue(job_id: str) -> list[str]:
    return ["scontrol", "requeue", job_id]


def node_names(partition: str | None) -> list[str]:
    """The nodes a job could be given, one a line as NODE|PARTITION (SLURM's default partition marked
    with *): of its partition, else of every partition (the reader keeps the default's)."""
    return ["sinfo", "-h", "-N", "-o", "%N|%P"] + (["-p", partition] if partition else [])


def summary() -> list[str]:
    """The partitions, one line each, for a hint: `gpu 2 nodes, 8 CPUs, gres gpu:4`."""
    return ["sinfo", "-h", "-o", SUMMARY_FORMAT]


def on_each_node(job: str, nodes: int, environment: str, argv: list[str], overlap: bool = True) -> list[str]:
    """`argv` once on every node of a running job, beside its steps (it does not wait for the
    job's resources): how `hpcjax stacks` reads the ranks where they run. `overlap`: the cluster
    takes --overlap (20.11 on; before it, every step shared its job's resources). It asks for no
    GPU (--gres=none): on 20.11 an overlapping step shares CPUs only, and one that takes the job's
    GPUs, as a step does by default, waits behind the ranks' step (measured on the 20.11 dev cluster)."""
    return ["srun", *(["--overlap"] if overlap else []), f"--jobid={job}", f"--nodes={nodes}", f"--ntasks={nodes}",
            "--ntasks-per-node=1", "--gres=none", "--quiet", f"--export=ALL,{environment}", *argv]


def step_on_node(job: str, node: str, argv: list[str], overlap: bool = True) -> list[str]:
    """`argv` as one task on one node of a running job (a hold's first node), beside whatever runs
    in it, sharing its resources: `hpcjax shell` and `hpcjax jupyter`."""
    return ["srun", f"--jobid={job}", *(["--overlap"] if overlap else []), "--nodes=1", "--ntasks=1",
            f"--nodelist={node}", "--quiet", *argv]


def partitions() -> list[str]:
    """Each partition and node configuration: name (* the default), state, time limit, nodes, CPUs, memory, GRES."""
    return ["sinfo", "-h", "-o", PARTITION_FORMAT]


def associations(user: str) -> list[str]:
    """The user's associations (account, partition, QOS and limits); accounting must answer."""
    return ["sacctmgr", "-n", "-P", "show", "assoc", f"user={user}", "format=" + ",".join(ASSOC_FIELDS)]


def everyones_associations() -> list[str]:
    """Every association the user may read (a site with PrivateData=users shows only theirs), the user
    first: how a submission learns the user's without knowing their name on the cluster."""
    return ["sacctmgr", "-n", "-P", "show", "assoc", "format=" + ",".join(("User",) + ASSOC_FIELDS)]


def qos_limits() -> list[str]:
    return ["sacctmgr", "-n", "-P", "show", "qos", "format=" + ",".join(QOS_FIELDS)]


def default_account(user: str) -> list[str]:
    return ["sacctmgr", "-n", "-P", "show", "user", user, "format=DefaultAccount"]


def everyones_default_accounts() -> list[str]:
    """User|DefaultAccount of every user the caller may read: the account a job without --account is
    billed to, learnt without knowing the user's name on the cluster."""
    return ["sacctmgr", "-n", "-P", "show", "user", "format=User,DefaultAccount"]


def test_only_without(partition: str | None, time: str | None, account: str | None) -> list[str]:
    """sbatch's verdict on a one-second job that leaves out --time or --account (None): whether the
    site (its submit filter, its enforcement) refuses a job without it. Nothing is submitted."""
    return ["sbatch", "--test-only", "--wrap=true", *([f"--partition={partition}"] if partition else []),
            *([f"--time={time}"] if time else []), *([f"--account={account}"] if account else [])]


def test_only() -> list[str]:
    """sbatch's verdict on a script given on stdin, and its estimate of the start; nothing is submitted."""
    return ["sbatch", "--test-only"]


def node_gpus(partition: str | None) -> list[str]:
    return ["sinfo", "-h", "-N", "-O", NODE_GPUS_FORMAT] + ([f"--partition={partition}"] if partition else [])


def start_estimate(nodes: int, gpus_per_node: int, time: str, partition: str | None) -> list[str]:
    """SLURM's estimate of when such a job would start; nothing is submitted (`sbatch --test-only`)."""
    return ["sbatch", "--test-only", f"--nodes={nodes}", f"--gpus-per-node={gpus_per_node}", f"--time={time}",
            *([f"--partition={partition}"] if partition else []), "--wrap=true"]


def srun_help() -> list[str]:
    """srun's options, the site's SPANK plugins' included (pyxis adds --container-image)."""
    return ["srun", "--help"]


def probe_node(partition: str | None, gpus: bool, script: str) -> list[str]:
    """`script` in a login shell on one compute node, in a short step of its own (`hpcjax site`)."""
    return ["srun", "--nodes=1", "--ntasks=1", "--time=00:02:00", "--job-name=hpcjax-site",
            *([f"--partition={partition}"] if partition else []), *(["--gpus-per-node=1"] if gpus else []),
            "--quiet", "bash", "-lc", script]


def version() -> list[str]:
    """The cluster's release: `slurm 22.05.8`."""
    return ["scontrol", "--version"]
