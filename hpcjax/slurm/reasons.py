"""Why a job is pending, in words: SLURM's reason codes (squeue's %r, the "JOB REASON CODES" of its
man page) read as what holds the job back and what the user can change, and which of them mean
the job can never start as asked. The one owner of SLURM's pending reasons."""

from __future__ import annotations

import re

# code: (what holds the job, what to change; "" where waiting is all there is to do)
REASONS = {
    "None": ("the scheduler has not looked at it yet", ""),
    "Priority": ("jobs of higher priority are ahead of it",
                 "wait; a shorter --time lets the backfill scheduler start it in a gap sooner"),
    "Resources": ("it waits for the nodes and GPUs it asked for to be free",
                  "fewer nodes or GPUs, a shorter --time (backfill fits short jobs into gaps), or another "
                  "partition: `hpcjax free` shows where GPUs are free"),
    "Dependency": ("it waits for the job it runs after (--after)", ""),
    "DependencyNeverSatisfied": ("the job it runs after ended in a way its --after does not accept: it can "
                                 "never start", "cancel it, and submit again after a job that can end as asked"),
    "BeginTime": ("its start time (--begin) has not come", ""),
    "JobArrayTaskLimit": ("the sweep's --max-parallel elements are running", ""),
    "JobHeldUser": ("you held it (scontrol hold)", "scontrol release JOBID"),
    "JobHeldAdmin": ("an administrator held it: it cannot start until they release it", "ask the site's support why"),
    "Reservation": ("it waits for its reservation to start", ""),
    "ReqNodeNotAvail": ("a node it needs is down, drained or reserved",
                        "leave that node out (--exclude) or ask for fewer nodes; `sinfo -R` says why nodes are out"),
    "NodeDown": ("a node it needs is down", "leave that node out (--exclude); `sinfo -R` says why it is down"),
    "PartitionDown": ("its partition is down", "another partition (--partition); `sinfo -s` lists them"),
    "PartitionInactive": ("its partition is inactive", "another partition (--partition); `sinfo -s` lists them"),
    "PartitionConfig": ("it asks for more than its partition is configured for: it can never start",
                        "ask for what the partition has (`sinfo -o '%P %D %c %G %l'`), or another partition"),
    "PartitionNodeLimit": ("it asks for more nodes than its partition allows: it can never start",
                           "fewer --nodes, or another partition"),
    "PartitionTimeLimit": ("its --time is over its partition's limit: it can never start",
                           "a --time within the partition's (`sinfo -o '%P %l'`), or another partition"),
    "BadConstraints": ("no node has the features it asks for (--constraint): it can never start",
                       "`sinfo -o '%N %f'` lists the nodes' features"),
    "InvalidAccount": ("its account is not valid: it can never start",
                       "`sacctmgr show assoc user=$USER format=account` lists yours (--account)"),
    "InvalidQOS": ("its QOS is not valid: it can never start",
                   "`sacctmgr show assoc user=$USER format=qos` lists yours (--qos)"),
    "AccountNotAllowed": ("its account may not use this partition: it can never start",
                          "another --account or --partition"),
    "QOSNotAllowed": ("its QOS may not use this partition: it can never start", "another --qos or --partition"),
    "Licenses": ("it waits for licenses (--licenses)", ""),
    "launch failed requeued held": ("its launch failed and SLURM held it", "scontrol release JOBID, or ask support"),
    "Prolog": ("the node's prolog is running", ""),
    "Cleaning": ("the node is cleaning up after an earlier job", ""),
    "BurstBufferStageIn": ("its burst buffer is being staged in", ""),
}

# Limits of a QOS or an association (account), families of codes: QOSMaxGRESPerUser, AssocGrpGRES, ...
LIMIT = re.compile(r"(?P<whose>QOS|Assoc)(?P<kind>Grp|Max)(?P<what>[A-Za-z]*?)(?P<per>PerUser|PerJob|PerAccount|"
                   r"PerNode|Limit|RunMinutes|Minutes)?(?:Limit)?$")
WHAT = {"GRES": "GPUs (GRES)", "Cpu": "CPUs", "CPU": "CPUs", "Node": "nodes", "Mem": "memory", "Jobs": "jobs",
        "Submit": "submitted jobs", "Wall": "run time", "WallDuration": "run time", "Billing": "billing units",
        "Energy": "energy", "": "resources"}
LESS = {"Wall": "ask for a shorter --time", "WallDuration": "ask for a shorter --time", "Jobs": "run fewer jobs at once",
        "Submit": "submit fewer jobs at once", "Mem": "ask for less memory (--mem)", "Energy": "use less energy"}
PER = {"PerUser": "per user", "PerJob": "per job", "PerAccount": "per account", "PerNode": "per node",
       "RunMinutes": "in running jobs' minutes", "Minutes": "in minutes used"}

# Codes that mean the job can never start as asked: waiting is pointless (hpcjax cancels it).
NEVER_STARTS = frozenset(code for code, (words, _) in REASONS.items() if "it can never start" in words) | {"JobHeldAdmin"}


def never_starts(reason: str) -> bool:
    """Whether waiting is pointless: a code above that says so, a node it needs that is not there to be
    had (ReqNodeNotAvail: hpcjax has always cancelled these rather than wait on a drained node), or a
    per-job limit the job itself is over (QOSMaxGRESPerJob, ...), which no other job's end frees."""
    limit = LIMIT.match(reason or "")
    return reason in NEVER_STARTS or (reason or "").startswith("ReqNodeNotAvail") or \
        bool(limit and limit["per"] == "PerJob")


def explain(reason: str) -> tuple[str, str]:
    """(what holds the job back, what to change) for SLURM's code; a code unknown here is given as
    SLURM said it (squeue's man page lists them), never guessed."""
    code = (reason or "None").strip()
    base = code.split(",")[0].strip()  # "ReqNodeNotAvail, UnavailableNodes:node3"
    if base in REASONS:
        return REASONS[base]
    limit = LIMIT.match(base)
    if limit and (limit["what"] in WHAT):
        whose = "your QOS's" if limit["whose"] == "QOS" else "your account's"
        group = " (all its jobs together)" if limit["kind"] == "Grp" else ""
        per = f" {PER[limit['per']]}" if limit["per"] in PER else ""
        what = WHAT[limit["what"]]
        less = LESS.get(limit["what"], f"ask for fewer {what}")
        shown = "`sacctmgr show qos` and `sacctmgr show assoc user=$USER` show the limits"
        if limit["per"] == "PerJob":
            return f"it asks for more {what} than {whose} limit per job: it can never start", f"{less}; {shown}"
        return f"{whose} limit of {what}{per}{group} is reached", f"wait for running jobs to end, or {less}; {shown}"
    if " " in base:  # not a code: hpcjax's own words (a job queued in a hold says where it waits)
        return code, ""
    return f"SLURM's reason {code} (see `man squeue`, JOB REASON CODES)", ""


def in_words(reason: str) -> str:
    """`it waits for the nodes and GPUs it asked for to be free (Resources)`: SLURM's code kept, to look up."""
    words, _ = explain(reason)
    code = (reason or "None").strip()
    return words if words.startswith("SLURM's reason") or words == code else f"{words} ({code})"
