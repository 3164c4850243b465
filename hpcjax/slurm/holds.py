"""Held allocations, the login side: a hold is a SLURM job whose batch script is an agent
(templates/hold-agent.sh.j2) that runs, one at a time, the jobs queued in its log directory
(`--on NAME`); this module finds a hold by name, queues a job in it, reads a queued job's state
and withdraws or stops one. Every operation is one shell on the host that reaches the cluster
(this machine, or the login node over the one SSH connection). The follower of a job in a hold
is hpcjax.slurm.inhold; the verbs are hpcjax.cli.holds.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from hpcjax.protocol import contract
from hpcjax.values import jobid
from hpcjax.catalog import db, records
from hpcjax.hosts.cluster import THIS_MACHINE
from hpcjax.values.errors import UsageError

KIND = "hold"  # a hold's catalog row; the jobs run in it are kind "step"
DIGITS = 6  # a queued job's file names: its number, zero-padded, so the agent's glob sorts them in order


@dataclass(frozen=True)
class Hold:
    name: str
    job_id: str
    log_dir: str
    layout: contract.Layout
    record_key: str
    cluster: dict | None  # the record's cluster (None: this machine's SLURM)
    gpu_type: str | None = None  # its GPUs' type, where it asked for typed ones (--gpu-type)

    @property
    def spool(self) -> str:
        return f"{self.log_dir}/{contract.HOLD_QUEUE.replace('%j', self.job_id)}"

    def fits(self, layout: contract.Layout) -> str | None:
        """Why a job of `layout` cannot run in this hold, or None."""
        if layout.nodes > self.layout.nodes or layout.gpus_per_node > self.layout.gpus_per_node:
            return (f"the job asks for {layout.nodes} node(s) x {layout.gpus_per_node} GPU(s); hold {self.name} "
                    f"(job {self.job_id}) has {self.layout.nodes} node(s) x {self.layout.gpus_per_node} GPU(s)")
        return None


def destination(cluster) -> str:
    """The catalog's name of where a hold is: a cluster reached over SSH, or "" for this machine's."""
    return cluster.destination or ""


def holds(cluster=THIS_MACHINE, where: str | None = None, open_only: bool = False) -> list[Hold]:
    """The holds this machine's catalog knows on `cluster` (a Cluster), or `where` (a catalog's
    cluster name), newest first; the finished ones too (`status` asks SLURM)
    unless `open_only` (those the catalog has not seen end)."""
    from contextlib import closing

    with closing(db.connect()) as conn:
        keys = db.keys_of_kind(conn, KIND, destination(cluster) if where is None else where, open_only=open_only)
    found = []
    for key in keys:
        record = records.load(key) or {}
        if record.get("hold_name"):
            found.append(Hold(record["hold_name"], str(record.get("job_id") or records.job_id_of(key)),
                              record.get("output_dir", ""), contract.Layout.from_dict(record.get("layout") or {}),
                              key, record.get("cluster"), (record.get("options") or {}).get("gpu_type")))
    return found


def find(name: str, cluster=THIS_MACHINE) -> Hold:
    """The newest hold of that name on `cluster`; UsageError naming the holds that are up there."""
    import shlex

    known = holds(cluster)
    for hold in known:
        if hold.name == name:
            return hold
    where = destination(cluster)
    there = [hold for hold in elsewhere(cluster) if hold.name == name]
    if there:  # made with --profile or --cluster, asked for without: the user's hold is not lost
        made = (there[0].cluster or {}).get("destination") or "this machine"
        raise UsageError(f"no hold named {name!r} on {where or 'this machine'}: the hold {name} hpcjax made is on "
                         f"{made}", f"name its cluster as when it was made: {reach_flag(there[0])}")
    names = ", ".join(sorted({h.name for h in known if not ended(h, cluster)})) or "none"
    raise UsageError(f"no hold named {name!r}" + (f" on {where}" if where else ""),
                     f"holds up here: {names}; start one with `hpcjax hold --name {shlex.quote(name)} --nodes N "
                     "--gpus-per-node G`")


def elsewhere(cluster=THIS_MACHINE) -> list[Hold]:
    """The holds on every cluster but `cluster` the catalog has not seen end (each Hold's .cluster
    says where): not asked of SLURM there, which may be over SSH."""
    from contextlib import closing

    with closing(db.connect()) as conn:
        others = [name for name in db.clusters_of_kind(conn, KIND) if name != destination(cluster)]
    return [hold for name in others for hold in holds(where=name, open_only=True)]


def reach_flag(hold: Hold) -> str:
    """How a verb names the hold's cluster: the profile it was made with, else its destination."""
    import shlex

    known = hold.cluster or {}
    if not known.get("destination"):
        return "leave --cluster out (and a profile that names a host)"
    if known.get("profile"):  # --cluster takes a profile that names a host, in every verb
        return f"--cluster {shlex.quote(known['profile'])}" + (
            f" --profile-file {shlex.quote(known['profile_file'])}" if known.get("profile_file") else "")
    return f"--cluster {shlex.quote(str(known.get('destination') or ''))}"


@contextmanager
def naming(name: str, cluster=THIS_MACHINE):
    """Held while a hold of that name is looked for and made: a second `hpcjax hold --name X` on this
    machine at the same time waits, then finds the first (a lock file beside the job records)."""
    import fcntl

    key = f"{destination(cluster) or 'here'}:{name}".encode().hex()[:200]
    try:
        where = records.home() / "holds"
        where.mkdir(parents=True, exist_ok=True)
        lock = open(where / f"{key}.lock", "w")
    except OSError:  # no records here at all: the submission's own check refuses it, saying why
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def status(hold: Hold, cluster=THIS_MACHINE):
    """SLURM's JobStatus of the hold's job, or None when SLURM no longer knows it (long over)."""
    from hpcjax.values.errors import HpcjaxError
    from hpcjax.slurm import controller

    try:
        return controller.slurm_on(cluster.host()).job_status(hold.job_id)
    except HpcjaxError:
        return None


def ended(hold: Hold, cluster=THIS_MACHINE) -> bool:
    found = status(hold, cluster)
    return found is None or found.finished


def still_listed(hold: Hold, cluster=THIS_MACHINE) -> str:
    """The controller's state of the hold's job while it still holds its nodes (COMPLETING too: SLURM
    is stopping what runs in it, a job that saves on SIGTERM has KillWait seconds, and cleaning up);
    "" once it has ended or is forgotten (accounting may say CANCELLED before this does)."""
    from hpcjax.protocol.contract import FINISHED_STATES
    from hpcjax.slurm import controller

    fields = controller.slurm_on(cluster.host()).queue_lines([hold.job_id]).get(hold.job_id)
    state = fields[1].split()[0] if fields and fields[1] else ""
    return "" if state in FINISHED_STATES else state


QUEUE = r'''set -e
spool=$1; dir=$2; head=$3; tail=$4; hold=$5
mkdir -p "$spool" "$(dirname "$head$hold")"  # the job's log directory: sbatch's would be made before it
chmod 700 "$spool"  # the hold's agent runs what is queued here: this user's alone
last=$(cd "$spool" && ls | sed -n 's/^\([0-9]\{%(digits)d\}\)\.sh$/\1/p' | sort | tail -n 1)
n=$((10#${last:-0} + 1))
while :; do
  f=$(printf '%%0%(digits)dd' "$n")
  if (set -C; : > "$spool/$f.sh") 2>/dev/null; then break; fi
  n=$((n + 1))
done
cat > "$spool/$f.sh"
printf '%%s\n%%s\n' "$dir" "$head$hold.s$n$tail" > "$spool/$f.request.part"
mv "$spool/$f.request.part" "$spool/$f.request"
ahead=$(cd "$spool" && for r in *.running *.request; do [ -e "$r" ] || continue; b=${r%%.*}; [ "$b" = "$f" ] || [ -e "$b.rc" ] || [ -e "$b.ended" ] || echo "$hold.s$((10#$b))"; done)
echo "$n"
echo $ahead
''' % {"digits": DIGITS}


def queue(host, hold: Hold, script: str, workdir: str, log_dir: str) -> tuple[str, list[str]]:
    """Queue a job's script in the hold: (its id, the ids of the jobs ahead of it)."""
    head, tail = str(contract.batch_log_path(log_dir, "%j")).split("%j")
    done = host.run(["bash", "-c", QUEUE, "bash", hold.spool, workdir, head, tail, hold.job_id], input=script)
    lines = done.stdout.splitlines()
    if done.returncode != 0 or not lines or not lines[0].isdigit():
        raise UsageError(f"could not queue the job in hold {hold.name} (job {hold.job_id}): "
                         f"{(done.stderr or done.stdout).strip()[-300:]}",
                         f"the hold's queue is {hold.spool}: it must be writable from here and from the hold's nodes")
    return jobid.in_hold(hold.job_id, lines[0]), (lines[1].split() if len(lines) > 1 else [])


def file_stem(job_key: str) -> str:
    return str(jobid.place_in_hold(job_key)).zfill(DIGITS)


STATE = r'''cd "$1" 2>/dev/null || exit 0
for s in request running rc cancel ended withdrawn; do [ -e "$2.$s" ] && echo "$s"; done
[ -e "$2.rc" ] && echo "rc=$(cat "$2.rc")"
[ -e "$2.ended" ] && echo "why=$(head -n 1 "$2.ended")"
exit 0
'''


def state_of(host, spool: str, job_key: str) -> dict:
    """What the hold's queue says of a job: its files (request, running, rc, cancel, ended,
    withdrawn), its exit code, why the hold ended while it ran."""
    out = host.run(["bash", "-c", STATE, "bash", spool, file_stem(job_key)]).stdout
    found: dict = {"files": set()}
    for line in out.splitlines():
        name, sep, value = line.partition("=")
        if sep:
            found[name] = value
        else:
            found["files"].add(line.strip())
    return found


CANCEL = r'''cd "$1" || exit 1
if mv "$2.request" "$2.withdrawn" 2>/dev/null; then echo 143 > "$2.rc"; echo withdrawn
else : > "$2.cancel"; echo stopping; fi
'''


def cancel(host, spool: str, job_key: str) -> str:
    """Withdraw a queued job, or ask the agent to stop a running one: "withdrawn" or "stopping"."""
    return host.run(["bash", "-c", CANCEL, "bash", spool, file_stem(job_key)]).stdout.strip()


SUMMARY = r'''cd "$1" 2>/dev/null || exit 0
for r in *.running; do [ -e "$r" ] || continue; b=${r%.running}; [ -e "$b.rc" ] || [ -e "$b.ended" ] || echo "running $((10#$b))"; done
for r in *.request; do [ -e "$r" ] && echo queued; done
exit 0
'''


def queue_summary(host, hold: Hold) -> tuple[str, int]:
    """(the job running in the hold, or "", how many wait behind it)."""
    lines = host.run(["bash", "-c", SUMMARY, "bash", hold.spool]).stdout.split("\n")
    running = next((jobid.in_hold(hold.job_id, line.split()[1]) for line in lines if line.startswith("running ")), "")
    return running, sum(1 for line in lines if line == "queued")
