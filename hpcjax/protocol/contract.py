"""The contract between a job's script and its ranks, in one place.

The login side writes it (the rendered sbatch script, the local backend) and
the rank side and the job followers read it (the mapping, log readers, failure
reports). Every name both sides must agree on is spelled here and nowhere
else; the template receives these values from the renderer. Standard library
only: this module is imported in every room, including inside bare JAX images.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

# The layout, exported to every rank: N nodes, G GPUs per node, K GPUs per process.
NODES_ENV = "HPCJAX_NODES"
GPUS_PER_NODE_ENV = "HPCJAX_GPUS_PER_NODE"
GPUS_PER_PROCESS_ENV = "HPCJAX_GPUS_PER_PROCESS"
LAYOUT_ENV = (NODES_ENV, GPUS_PER_NODE_ENV, GPUS_PER_PROCESS_ENV)
# Set by the local backend: its ranks run on the CPU, and name the node they emulate.
PLATFORM_ENV = "HPCJAX_PLATFORM"
NODE_NAME_ENV = "HPCJAX_NODE_NAME"
# The job's log directory, absolute, as the batch script resolved it (containers bind it).
LOG_DIR_ENV = "HPCJAX_LOG_DIR"
# JAX's persistent compilation cache of any program using hpcjax's initialize.
COMPILE_CACHE_ENV = "HPCJAX_COMPILE_CACHE"

DEFAULT_OUTPUT_DIR = "hpcjax-logs"  # per-rank logs, relative to the job's working directory
DEFAULT_RUN_DIR = "hpcjax-run"  # checkpoints and metrics of `hpcjax train`

# Log names carry the job id and the rank (SLURM fills %j and %t) so the logs of a job can be found
# from its id alone. Not the host (%N): the machine's hostname need not be SLURM's node name.
BATCH_LOG = "%j-batch.log"
RANK_LOG = "%j-rank%t.log"
# An element of a job array is named <array job>_<index> (%A_%a), as squeue, sacct and
# scancel name it; its own %j is a number no caller knows. A job in a hold: JOB_KEY_ENV (1234.s2);
# the hold's queue of jobs: a directory beside the hold's logs (templates/hold-agent.sh.j2).
ARRAY_JOB_KEY, JOB_KEY_ENV, HOLD_QUEUE = "%A_%a", "HPCJAX_JOB_KEY", "%j-hold"

# The signal SLURM sends before preemption or the time limit (`#SBATCH --signal`). Not USR1: NCCL uses it.
WARNING_SIGNAL = "USR2"
WARNING_GRACE_S = 120
# SLURM sends it up to a minute earlier than asked (its check for the warning runs once a minute).
WARNING_EARLY_S, WARNING_MIN_S = 60, 10

# A rank that stopped on the warning (and saved) leaves this file: the batch script (which exports
# its path) knows the attempt was cut short rather than finished.
STOP_MARKER_ENV = "HPCJAX_STOP_MARKER"
STOP_MARKER = "%j-stopped"
# One JSON line per attempt of a job (requeues start new attempts), written by the
# batch script; the batch log gets ATTEMPT_LINE at the start of each attempt.
ATTEMPTS_LOG = "%j-attempts.jsonl"
ATTEMPT_LINE = "hpcjax: attempt"
# The hang watch (hpcjax.rank.watch.hangwatch): the first rank that sees no progress creates the
# marker; every rank then leaves its last step and stacks in its own file, which the failure
# analysis reads. The batch script removes the marker at the start of each attempt. An attempt
# with the marker was ended by the hang watch: its status is STUCK_EXIT_CODE, whichever rank's end
# was seen first (the others may abort as the hung rank's end tears down their collective).
HANG_MARKER = "%j-hang"
# The nodes of the rank(s) that held the others (hpcjax.protocol.hangblame), one line, comma-separated,
# empty when none stood out: the rank that created the marker writes it before it ends the job, and
# the batch script records it as the attempt's failed node.
HANG_NODES = "%j-hang-nodes"
# The preflight's step (--preflight): its ranks' output, rank 0's verdict (the figures as JSON;
# for the batch script, the one line and the failed nodes as two plain lines).
PREFLIGHT_LOG, PREFLIGHT_REPORT, PREFLIGHT_VERDICT = "%j-preflight.log", "%j-preflight.json", "%j-preflight.txt"
PREFLIGHT_EXIT = 75  # every rank's exit code when a node failed the preflight (sysexits' EX_TEMPFAIL)
PREFLIGHT_KEY, PREFLIGHT_BAD_KEY = "preflight", "preflight_bad"  # the attempt's fields: its line, the nodes it failed
RANK_HANG = "%j-rank%t.hang.json"
STUCK_EXIT_CODE = 124  # what `timeout` returns: the process ended itself for taking too long

# The words of a collective's error when another process of the job went away (gloo's, NCCL's):
# a consequence, never the cause. A rank that raised with them leaves the naming to the
# launcher (rank.start.runtime), and the failure analysis ranks them below the cause (follow.triage).
PEER_LOST = r"Connection (?:reset|closed) by peer|Broken pipe|remote process exited"

# The coordinator's port, derived per job AND step so two steps of one job never
# collide (JAX's own choice, job % 4096 + 61440, does). Below Linux's ephemeral
# range (32768+), where an outgoing connection could already hold the port.
# A requeued attempt moves ATTEMPT_STRIDE slots on (coprime with PORT_STEPS), so it never meets
# the previous attempt's coordinator, whose port may still be held on that node.
PORT_BASE, PORT_JOBS, PORT_STEPS, ATTEMPT_STRIDE = 10000, 1400, 16, 7
# The attempts log's line, key by key: (key, printf's conversion, the batch script's value). With
# --retry-failed, the last two too. Readers: follow.run (attempts), the script's own requeue logic.
FAILED_NODE_KEY, ERROR_KEY = "failed_node", "error"  # what the script's own requeue logic reads back
ATTEMPT_RECORD = (("attempt", "%d", "$hpcjax_attempt"), ("ended", "%s", "$hpcjax_ended"),
                  ("exit_code", "%d", "$hpcjax_rc"), ("nodes", "%s", "$SLURM_JOB_NODELIST"),
                  (FAILED_NODE_KEY, "%s", "$hpcjax_failed_node"), ("end", "%s", "$(date -Is)"),
                  (ERROR_KEY, "%s", "$hpcjax_error"), ("not_retried", "%s", "$hpcjax_not_retried"))
NO_RETRY_EXIT = 78  # a rank's exit code that means "a retry cannot fix this" (sysexits' EX_CONFIG)
RESTART_COUNT = "SLURM_RESTART_COUNT"  # SLURM's count of the job's requeues: the attempt - 1

# SLURM's words for a job that has ended (the local backend uses the same), and for one that has not.
FINISHED_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
                             "PREEMPTED", "BOOT_FAIL", "DEADLINE"})
JOB_STATES = FINISHED_STATES | {"PENDING", "RUNNING", "REQUEUED", "SUSPENDED", "CONFIGURING", "COMPLETING",
                                "RESIZING", "STOPPED", "SIGNALING", "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT",
                                "REVOKED", "UNKNOWN"}

# What `hpcjax check all` runs; the smoke verdict expects a report of each.
ALL_CHECKS = ("devices", "allreduce")


@dataclass(frozen=True, kw_only=True)
class Layout:
    """N nodes, G GPUs per node, K GPUs per process, and what follows from them: the one
    place the arithmetic lives (job.spec.Layout adds validation; the rank side and the
    job followers read a layout back from the environment or a job record)."""

    nodes: int = 1
    gpus_per_node: int = 1
    gpus_per_process: int = 1  # 1: one process per GPU; == gpus_per_node: one per node

    @property
    def tasks_per_node(self) -> int:
        return self.gpus_per_node // self.gpus_per_process

    @property
    def num_processes(self) -> int:
        return self.nodes * self.tasks_per_node

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def name(self) -> str:
        """The seed's naming: G<total gpus>N<nodes>p<processes>."""
        return f"G{self.total_gpus}N{self.nodes}p{self.num_processes}"

    @property
    def described(self) -> str:
        """The name with its meaning, for messages: G8N2p8 = 8 GPUs on 2 nodes, 8 processes."""
        return (f"{self.name} = {self.total_gpus} GPU(s) on {self.nodes} node(s), {self.num_processes} "
                f"process(es) of {self.gpus_per_process} GPU(s)")

    def node_of(self, rank: int) -> int:
        """The node index of a rank: srun and the local backend place ranks in blocks."""
        return rank // max(1, self.tasks_per_node)

    def env(self) -> dict[str, str]:
        """The variables that tell every rank the layout hpcjax rendered."""
        return {NODES_ENV: str(self.nodes), GPUS_PER_NODE_ENV: str(self.gpus_per_node),
                GPUS_PER_PROCESS_ENV: str(self.gpus_per_process)}

    def as_dict(self) -> dict[str, int]:
        return {"nodes": self.nodes, "gpus_per_node": self.gpus_per_node, "gpus_per_process": self.gpus_per_process}

    @classmethod
    def from_dict(cls, values: dict) -> "Layout":
        """A layout as a job record keeps it (missing keys: 1)."""
        return Layout(**{k: int(values.get(k, 1) or 1) for k in ("nodes", "gpus_per_node", "gpus_per_process")})

    @classmethod
    def from_env(cls, environ=os.environ) -> "Layout | None":
        """The layout the script exported, or None when a variable is missing or not a positive number."""
        values = [environ.get(name, "") for name in LAYOUT_ENV]
        if not all(v.isdigit() and int(v) > 0 for v in values):
            return None
        return Layout(nodes=int(values[0]), gpus_per_node=int(values[1]), gpus_per_process=int(values[2]))


def derived_port(job: int, step: int, restarts: int = 0) -> int:
    """The coordinator's port of a job's step in its attempt (restarts: SLURM_RESTART_COUNT)."""
    return PORT_BASE + PORT_STEPS * (job % PORT_JOBS) + (step + ATTEMPT_STRIDE * restarts) % PORT_STEPS


def derived_port_shell(job: str = "SLURM_JOB_ID", step: str = "SLURM_STEP_ID") -> str:
    """The same rule as bash arithmetic over a task's variables, for the rendered script."""
    return (f"$(({PORT_BASE} + {PORT_STEPS} * ({job} % {PORT_JOBS}) + ({step} + {ATTEMPT_STRIDE} * "
            f"${{{RESTART_COUNT}:-0}}) % {PORT_STEPS}))")


def attempt_printf(retry_failed: bool, preflight: bool = False) -> str:
    """The batch script's printf of its attempt's line (ATTEMPT_RECORD), one JSON object."""
    fields = (ATTEMPT_RECORD if retry_failed else ATTEMPT_RECORD[:-2]) + (
        ((PREFLIGHT_KEY, "%s", "$hpcjax_preflight"), (PREFLIGHT_BAD_KEY, "%s", "${hpcjax_preflight_bad:-}"))
        if preflight else ())
    text = ", ".join(f'"{key}": ' + (conversion if conversion == "%d" else f'"{conversion}"')
                     for key, conversion, _ in fields)
    return f"printf '{{{text}}}\\n' " + " ".join(f'"{value}"' for _, _, value in fields)


def attempt_number_shell() -> str:
    """This attempt's number in the batch script: SLURM's count of its requeues, plus one."""
    return f"$(( ${{{RESTART_COUNT}:-0}} + 1 ))"


def jax_local_device_ids(gpus_per_process: int) -> str:
    """JAX_LOCAL_DEVICE_IDS for a task bound to its own K GPUs: CUDA numbers them 0..K-1."""
    return ",".join(str(i) for i in range(gpus_per_process))


def coordinator_wrapper(prefixes: tuple[str, ...] = (), passed: tuple[str, ...] = (),
                        keep_only: tuple[str, ...] = ()) -> str:
    """A bash program run by every task before the user's: it exports the coordinator JAX
    reads ($0 is the host, the port comes from the job and step ids; a value the user set
    wins) and keeps a proxy from carrying the connection to it, then execs the command,
    which keeps the task's pid, signals and exit code. For a container that starts with a
    clean environment: the variables named by `passed` (shell patterns) are copied under
    `prefixes` (Apptainer's --cleanenv keeps those), or, with `keep_only`, the environment
    is cleaned to those names before the runtime starts (Charliecloud)."""
    port = derived_port_shell()
    text = ('export JAX_COORDINATOR_ADDRESS="${JAX_COORDINATOR_ADDRESS:-$0:${JAX_COORDINATOR_PORT:-'
            + port + '}}"; if [ -n "${http_proxy}${https_proxy}${HTTP_PROXY}${HTTPS_PROXY}" ]; then '
            'export no_proxy="$0,${no_proxy}" NO_PROXY="$0,${NO_PROXY}"; fi')
    names = ["JAX_COORDINATOR_ADDRESS", "no_proxy", "NO_PROXY"]
    if prefixes and passed:
        copies = " ".join(f'"{p}$v=${{!v}}"' for p in prefixes)
        text += f'; for v in $(compgen -e); do case $v in {"|".join(passed)}) export {copies};; esac; done'
    elif prefixes:
        text += "; export" + "".join(f' {p}{n}="${n}"' for p in prefixes for n in names)
    if keep_only:
        return (text + "; hpcjax_keep=(); for v in $(compgen -e); do case $v in "
                + "|".join(keep_only) + ') hpcjax_keep+=("$v=${!v}");; esac; done; exec env -i "${hpcjax_keep[@]}" "$@"')
    return text + '; exec "$@"'


def batch_log_pattern(directory: str, array: bool = False) -> str:
    """The batch log as sbatch's --output takes it (SLURM fills %j, or %A_%a in an array)."""
    return f"{directory}/{BATCH_LOG}".replace("%j", ARRAY_JOB_KEY if array else "%j")


def rank_log_pattern(directory: str, array: bool = False) -> str:
    """A rank's log as srun's --output takes it (SLURM fills %j and %t; %A_%a in an array)."""
    return f"{directory}/{RANK_LOG}".replace("%j", ARRAY_JOB_KEY if array else "%j")


def job_key_shell(array: bool = False, in_hold: bool = False) -> str:
    """The job's name in the file names, as the batch script spells it."""
    if in_hold:
        return f"${{{JOB_KEY_ENV}}}"
    return "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}" if array else "${SLURM_JOB_ID}"


def batch_log_path(directory: str | Path, job_id: str) -> Path:
    return Path(directory) / BATCH_LOG.replace("%j", str(job_id))


def rank_log_path(directory: str | Path, job_id: str, rank: int) -> Path:
    return Path(directory) / RANK_LOG.replace("%j", str(job_id)).replace("%t", str(rank))


def hang_marker_path(directory: str | Path, job_id: str) -> Path:
    return Path(directory) / HANG_MARKER.replace("%j", str(job_id))


def rank_hang_path(directory: str | Path, job_id: str, rank: int) -> Path:
    return Path(directory) / RANK_HANG.replace("%j", str(job_id)).replace("%t", str(rank))


def job_key(environ=os.environ) -> str:
    """A rank's job as its log names spell it: <array job>_<index> for an array element."""
    if environ.get(JOB_KEY_ENV):
        return environ[JOB_KEY_ENV]
    if environ.get("SLURM_ARRAY_JOB_ID") and environ.get("SLURM_ARRAY_TASK_ID"):
        return f"{environ['SLURM_ARRAY_JOB_ID']}_{environ['SLURM_ARRAY_TASK_ID']}"
    return environ.get("SLURM_JOB_ID", "")


def preflight_paths(directory: str | Path, job_id: str) -> tuple[Path, Path]:  # (report, verdict lines)
    return tuple(Path(directory) / name.replace("%j", str(job_id)) for name in (PREFLIGHT_REPORT, PREFLIGHT_VERDICT))


def attempts_log_path(directory: str | Path, job_id: str) -> Path:
    return Path(directory) / ATTEMPTS_LOG.replace("%j", str(job_id))


def rank_of_log(name: str, job_id: str) -> int | None:
    """The rank a log file name belongs to, or None if it is not a rank log of job_id."""
    pattern = re.escape(RANK_LOG).replace("%j", re.escape(str(job_id))).replace("%t", r"(\d+)")
    match = re.fullmatch(pattern, name)
    return int(match.group(1)) if match else None
