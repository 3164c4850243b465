"""What the SLURM controller and accounting know about jobs: state (squeue, sacct), the
hosts of a job's ranks, cancel; on one host (this machine, or a login node over SSH).

Every SLURM command goes through `Slurm.run`, so a missing installation or a refused
request becomes one clear error. Jobs being followed are asked about together: one
`squeue` and one `sacct` per poll answer for every job (the watcher), however many
jobs a process follows (a map of 100 elements costs what one job costs).
"""

from __future__ import annotations

import re
import time

from hpcjax.values.errors import HpcjaxError, SlurmNotFound
from hpcjax.hosts import this_machine
from hpcjax.hosts.here import NOT_FOUND
from hpcjax.slurm import commands, conf, versions
from hpcjax.slurm.status import JobStatus, Watcher
from hpcjax.values import jobid
from hpcjax.values.nodelist import HostlistError, expand_hostlist
from hpcjax.values.voice import say

# Read-only queries that may be retried: a controller busy with a burst of RPCs
# sometimes fails one with no message; following a job must not end on that.
QUERIES = {"squeue", "sacct", "sinfo", "scontrol"}
QUERY_TRIES, QUERY_BACKOFF_S = 4, 0.5
# Answers that will not change on a retry.
FINAL_ERRORS = ("Invalid job id", "Invalid user", "Unknown", "accounting storage is disabled")
# squeue's refusal of one id of a list it cannot read as a job number (0, 4294967294 and up: a
# local backend's id or a typo that reached a SLURM query); it then answers for none of them.
REFUSED_ID = re.compile(r"Invalid job id: (\S+)")
# After accounting failed (slurmdbd down, or no accounting at all), ask the controller
# alone for this long before trying accounting again: each try costs its retries.
ACCOUNTING_RETRY_S = 60.0
# A hint's sinfo is asked once and briefly: with the controller down sinfo itself waits ~40 s,
# and a refusal must not wait that long for a hint.
HINT_TIMEOUT_S = 5.0
# sbatch's refusals, and what the user can do about each (the first that matches).
REFUSALS = (
    # A site's submit filter (job_submit.lua, cli_filter) refuses with its own words, then this.
    (r"Unspecified error", "the site's own submit rules refused the job, in their words above: give what they ask "
                           "(a profile can hold it; `hpcjax site` writes what the site refuses a job without)"),
    (r"invalid partition", "--partition names no partition here: `sinfo -s` lists them (or drop it for the "
                           "cluster's default)"),
    (r"invalid account|account/partition combination", "--account is not yours here (or not on that partition): "
                                                        "`sacctmgr show assoc user=$USER format=account,partition`"),
    (r"invalid qos", "--qos is not one you may use: `sacctmgr show assoc user=$USER format=qos` lists yours"),
    (r"time limit", "--time is over the partition's limit: `sinfo -o '%P %l'` shows each partition's"),
    (r"feature|constraint", "--constraint names no feature of any node: `sinfo -o '%N %f'` lists them"),
    (r"gres|generic resource|gpu", "more GPUs per node than any node has: `sinfo -o '%P %D %G'` shows each "
                                   "partition's (--gpus-per-node)"),
    (r"CPU count|cpus? per", "each node runs --gpus-per-node / --gpus-per-process tasks of --cpus-per-task CPUs: "
                             "more CPUs than a node has; `sinfo -o '%P %c %G'` shows what the nodes have"),
    (r"memory|mem", "--mem is more than a node has: `sinfo -o '%P %m'` shows each partition's memory (MB)"),
    (r"node count|node configuration|nodes? .*not available|too many nodes",
     "more nodes (or CPUs per task) than the partition has: `sinfo -o '%P %D %c'`"),
    (r"policy|limit", "the request is over a limit of your account or QOS: `sacctmgr show assoc user=$USER` "
                      "and `sacctmgr show qos` show them"),
)


def check_job_id(job_id: str) -> str:
    return jobid.check(job_id)


class Slurm:
    """SLURM as seen from one host."""

    def __init__(self, host) -> None:
        self.host = host
        self.accounting_down_until = 0.0
        self.told_no_accounting = False
        self.watcher = Watcher(self)
        self._version: tuple | None = None  # (release,) once asked; (None,) when SLURM did not say

    def run(self, argv: list[str]) -> str:
        if not self.host.remote:  # a login node's SLURM_CONF is its own shell's
            conf.check_conf()
        tries = QUERY_TRIES if argv[0] in QUERIES else 1
        for attempt in range(tries):
            proc = self.host.run(argv)
            said = proc.stderr.strip() or proc.stdout.strip()
            if proc.returncode == 0:
                return proc.stdout
            if proc.returncode == NOT_FOUND and "not found" in said:
                raise SlurmNotFound(f"`{argv[0]}` is not on the PATH of {self.host.name}: SLURM is not installed there",
                                    "run this where SLURM is (the cluster's login node, or --cluster to reach it "
                                    "over SSH), or use the local backend")
            if any(word in said for word in FINAL_ERRORS) or attempt + 1 == tries:
                break
            time.sleep(QUERY_BACKOFF_S * 2 ** attempt)
        raise HpcjaxError(f"`{' '.join(argv)}` failed: {said or f'exit code {proc.returncode}, no message'}",
                          "check that the job id is right and that SLURM is reachable")

    # --- the two queries the watcher batches ---------------------------------------------
    def queue_lines(self, job_ids: list[str]) -> dict[str, list[str]]:
        """squeue's fields by job id (array elements as A_i) for every job the controller
        still remembers; forgotten jobs (MinJobAge) are simply absent."""
        asking = list(job_ids)
        while True:
            if not asking:
                return {}
            try:
                text = self.run(commands.queue(asking))
                break
            except SlurmNotFound:
                raise
            except HpcjaxError as err:
                refused = REFUSED_ID.search(err.message)
                others = [j for j in asking if not refused or jobid.base(j) != refused.group(1)]
                if len(others) < len(asking):  # one id it cannot read refuses the whole query: ask for the others
                    asking = others
                    continue
                if "Invalid job id" in err.message and not refused:  # said of a single job it does not know
                    return {}
                raise
        lines = {}
        for line in text.splitlines():
            fields = line.split("|")
            if len(fields) == commands.QUEUE_FIELDS.count("|") + 1:
                lines[fields[0]] = fields[1:]
        return lines

    def accounting_rows(self, job_ids: list[str]) -> list[dict] | None:
        """sacct's rows (jobs, array elements, steps) for these jobs, or None when accounting
        cannot be asked (said once)."""
        if time.monotonic() < self.accounting_down_until:
            return None
        try:
            text = self.run(commands.accounting(job_ids))
        except SlurmNotFound:
            raise
        except HpcjaxError as err:
            self.accounting_down_until = time.monotonic() + ACCOUNTING_RETRY_S
            if not self.told_no_accounting:
                self.told_no_accounting = True
                said = err.message.strip().splitlines()[-1].split("error: ")[-1]  # sacct's last word
                say(f"warning: SLURM accounting is unavailable ({said}); following the job through the "
                    "controller (squeue, scontrol), which forgets a job MinJobAge after it ends: finished jobs "
                    "older than that cannot be looked up, and steps are not listed")
            return None
        return [dict(zip(commands.ACCOUNTING_FIELDS, line.split("|"))) for line in text.splitlines() if line]

    def controller_row(self, job_id: str) -> dict:
        """What the controller knows of the job (`scontrol show job`), in sacct's field names."""
        try:
            text = self.run(commands.controller_job(job_id))
        except HpcjaxError as err:
            if "Invalid job id" in err.message:
                return {}
            raise
        fields = dict(re.findall(r"(\w+)=(\S*)", text))
        return {"JobID": job_id, "JobName": fields.get("JobName", ""), "State": fields.get("JobState", ""),
                "ExitCode": fields.get("ExitCode", ""), "Elapsed": fields.get("RunTime", ""),
                "NodeList": fields.get("NodeList", ""), "Reason": fields.get("Reason", ""),
                "WorkDir": fields.get("WorkDir", "")}

    # --- what the rest of hpcjax asks ----------------------------------------------------
    def job_status(self, job_id: str) -> JobStatus:
        """The job's state: the controller's word while it remembers the job (it is current;
        accounting lags a moment behind), accounting's for older jobs, and accounting's exit
        code, elapsed time, working directory and steps. Without accounting, the controller's
        alone. Answered from the watcher's last poll of every followed job when it is fresh."""
        return self.watcher.status(check_job_id(job_id))

    def cancel_job(self, job_id: str) -> JobStatus:
        """scancel, refusing a job SLURM does not know (scancel itself only warns) or one
        that has already ended; the status it had."""
        status = self.watcher.status(check_job_id(job_id), fresh=True)  # raises for a job SLURM does not know
        if status.finished:
            raise HpcjaxError(f"job {job_id} has already ended ({status.state}); nothing to cancel",
                              f"see `hpcjax status {job_id}`")
        self.run(commands.cancel(job_id))
        return status

    def hosts_of_ranks(self, status: JobStatus, num_ranks: int) -> dict[int, str]:
        """Rank -> node for the job's first step: srun places ranks block-wise, nodes in order."""
        step = next((s for s in status.steps if s["JobID"] == f"{status.job_id}.0"), None)
        # Without accounting there are no steps: hpcjax's one step spans the job's nodes.
        nodelist = step["NodeList"] if step else status.nodelist
        if not nodelist or nodelist in ("None assigned", "(null)") or not num_ranks:
            return {}
        hosts = self.hostnames(nodelist)
        per_node = -(-num_ranks // len(hosts))
        return {rank: hosts[min(rank // per_node, len(hosts) - 1)] for rank in range(num_ranks)}

    def own_id(self, job_id: str) -> str:
        """A job's own number: an array element's (A_i) is another number, which srun --jobid and the
        element's ranks (SLURM_JOB_ID) know it by."""
        if "_" not in job_id:
            return job_id
        found = self.run(commands.own_id(job_id)).split()
        return found[0] if found else job_id

    def refusal_hint(self, said: str) -> str:
        """What to do about sbatch's refusal, by what it said (each refusal its own hint), with what
        the cluster has when the request was about its nodes."""
        hint = next((h for pattern, h in REFUSALS if re.search(pattern, said, re.IGNORECASE)), "")
        if hint and not re.search(r"CPU|gres|gpu|memory|mem|node", said, re.IGNORECASE):
            return hint
        summary = self.summary()
        has = f"the cluster has: {summary}" if summary else "check the layout against `sinfo -o '%P %D %c %G'`"
        return f"{has}; {hint}" if hint else has

    def hostnames(self, nodelist: str) -> list[str]:
        """A node list's hosts: hpcjax's own expander (nodelist), scontrol's for a form it does not read."""
        try:
            return expand_hostlist(nodelist)
        except HostlistError:
            return self.run(commands.hostnames(nodelist)).split()

    def version(self) -> tuple[int, int] | None:
        """The cluster's release (`scontrol --version`), asked once; None when it does not say. A
        release older than the one hpcjax is written for is said, once."""
        if self._version is None:
            try:
                self._version = (versions.parse(self.run(commands.version())),)
            except SlurmNotFound:
                raise
            except HpcjaxError:
                self._version = (None,)
            if versions.too_old(self._version[0]):
                say(f"hpcjax: {versions.too_old(self._version[0])}")
        return self._version[0]

    def has(self, command: str, option: str) -> bool:
        """Whether this cluster's SLURM takes the option (hpcjax.slurm.versions)."""
        return versions.has(self.version(), command, option)

    def summary(self) -> str:
        """The partitions, for a hint: "gpu 2 nodes, 8 CPUs, gres gpu:4"."""
        try:
            proc = self.host.run(commands.summary(), timeout=HINT_TIMEOUT_S)
        except Exception:  # a summary for a hint must never hide the real error (timeouts included)
            return ""
        text = proc.stdout if proc.returncode == 0 else ""
        return "; ".join(line.strip() for line in text.splitlines() if line.strip())


_by_host: dict[str, Slurm] = {}


def slurm_on(host=None) -> Slurm:
    """The one Slurm of a host (this machine by default), so every Run of a process shares
    its watcher."""
    host = host or this_machine()
    if host.key not in _by_host:
        _by_host[host.key] = Slurm(host)
    return _by_host[host.key]


def run_slurm(argv: list[str]) -> str:
    """A SLURM command on this machine."""
    return slurm_on().run(argv)


def job_status(job_id: str) -> JobStatus:
    return slurm_on().job_status(job_id)


def config_values(text: str) -> dict[str, str]:
    """`scontrol show config`'s `Name = value` lines as a dict."""
    return dict(re.findall(r"^(\w+)\s*=\s*(.*?)\s*$", text, re.MULTILINE))
