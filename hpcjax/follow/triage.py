"""Failure triage: a failed job's logs sorted into the causes people hit, each with
the line that shows it and what to do.

The patterns are the words the tools really print (JAX and XLA, the coordination
service, NCCL and gloo, SLURM's slurmstepd, the kernel's OOM killer, Python);
tests/launch/test_triage.py feeds real texts of each. The first cause in CAUSES that
matches wins for a line, and causes are reported in the order of CAUSES, most
specific first: "rank 3 stopped sending heartbeats" explains the other ranks'
aborts, not the other way round.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from hpcjax.protocol.contract import PEER_LOST


@dataclass(frozen=True)
class Cause:
    name: str
    pattern: re.Pattern
    hint: str


def _cause(name: str, pattern: str, hint: str) -> Cause:
    return Cause(name, re.compile(pattern, re.IGNORECASE), hint)


HANG_HINT = ("the ranks were alive but stopped making progress: the stacks show where each waited "
             "(`hpcjax stacks JOBID` shows them while a job runs). The hang watch's timeout adapts to the "
             "steps; its knobs are HPCJAX_HANG_FLOOR, HPCJAX_HANG_CEILING and HPCJAX_HANG_FACTOR (docs/failures.md)")

CAUSES = (
    _cause("hang", r"hpcjax: process \d+ on \S+: no progress for \d+ s", HANG_HINT),
    _cause("frozen rank", r"stopped sending heartbeats|heartbeat timeout",
           "a rank stopped answering (stopped with SIGSTOP, swapping, or its node lost): see its log and the "
           "node's state; the bound is HPCJAX_HEARTBEAT_TIMEOUT (default 30 s)"),
    _cause("coordinator unreachable",
           r"does not resolve here|cannot reach the coordinator|failed to connect to all addresses|"
           r"Name or service not known|DNS resolution failed",
           "every rank must resolve and reach the batch node's name and port: check /etc/hosts or DNS on the "
           "nodes (inside a container, its /etc/hosts), and that no firewall blocks the port"),
    # getaddrinfo's -2 (EAI_NONAME) for the node's own name, which Gloo resolves to bind its sockets
    # (reproduced on the dev cluster with a rank whose hostname resolves nowhere: tests/launch/test_triage_cluster.py)
    _cause("this node's name does not resolve", r"gloo/transport/tcp/device\.cc:\d+\] rv == 0\. -2 vs 0",
           "Gloo (JAX's CPU collectives) resolves the node's own hostname to bind its sockets, and that name "
           "resolves nowhere on the node: add it to /etc/hosts or DNS there (in a container, to the image's "
           "/etc/hosts); `getent hosts $(hostname)` on the node must answer"),
    _cause("rank missing at start", r"did not arrive within|Barrier timed out|"
           r"DEADLINE_EXCEEDED.*(?:[Rr]egister|connect)|did not release the roll call",
           "a rank never started or started too late: look at its log; raise HPCJAX_INIT_TIMEOUT if the "
           "ranks start slowly (container pull, imports from a shared filesystem)"),
    _cause("invalid CUDA device ordinal", r"invalid device ordinal|CUDA_ERROR_INVALID_DEVICE",
           "a rank asked for a GPU it cannot see: check JAX_LOCAL_DEVICE_IDS and --gpus-per-task "
           "(`hpcjax env` on a rank shows both)"),
    _cause("out of device memory", r"RESOURCE_EXHAUSTED:?\s*Out of memory|out of memory (?:while|allocating)|"
           r"CUDA_ERROR_OUT_OF_MEMORY|Allocator .* ran out of memory",
           "the model or batch does not fit the GPU: a smaller --batch-size with --accum-steps, fsdp or "
           "tensor sharding, or XLA_PYTHON_CLIENT_MEM_FRACTION"),
    _cause("out of host memory", r"oom[-_]kill|Out of memory: Killed process|"
           r"Exceeded job memory limit|MemoryError|tasks? [\d,\-]+: Out Of Memory",
           "the node's memory ran out: ask for more with --mem, or load less data per rank"),
    _cause("collective error", r"NCCL (?:error|WARN)|NCCL operation \w+\(.*\) failed|nccl\w*Error|"
           r"\[enforce fail at .*gloo|Gloo.*(?:error|closed)|" + PEER_LOST,
           "a collective failed between ranks: often a consequence of another rank's failure (see the other "
           "causes); otherwise the network between nodes (NCCL_DEBUG=INFO, NCCL_SOCKET_IFNAME)"),
    _cause("time limit", r"DUE TO TIME LIMIT", "raise --time, or checkpoint and use --requeue N"),
    _cause("warning signal not handled", r"User defined signal 2|Killed by signal SIGUSR2",
           "SLURM sends USR2 120 s before the time limit (and at preemption) so a run can save; this "
           "program does not catch it and died. Catch SIGUSR2 (hpcjax train and hpcjax.train do), or "
           "raise --time"),
    _cause("preemption", r"DUE TO PREEMPTION", "use --requeue N so the job comes back and resumes"),
    _cause("node failure", r"DUE TO NODE FAIL|NODE_FAIL",
           "a node was lost; --requeue N --retry-failed runs the job again and leaves a node out after two "
           "failures"),
    # the dynamic loader's words, for the interpreter itself or an extension module (found on a release's
    # root whose Python could not load libffi.so.8, issue 62); before "python exception": an ImportError
    # that names a missing .so is this cause
    _cause("a shared library did not load", r"error while loading shared libraries|cannot open shared object file",
           "the node lacks a library the program's Python or one of its modules links to: install it on the "
           "nodes (or in the image), or put its folder in LD_LIBRARY_PATH; `ldd $(command -v python3)` on a "
           "node names what is missing"),
    _cause("python exception", r"^\w+(?:\.\w+)*(?:Error|Exception|Interrupt|Exit)\b:?|^error: .+",
           "the program raised: the traceback is in the rank's log"),
    _cause("killed by a signal", r"Killed by signal|tasks? [\d,\-]+: (?:Killed|Terminated)|Segmentation fault|"
           r"Bus error|Aborted",
           "the process was killed: by srun after another rank failed, by the kernel (out of memory), or "
           "crashed; see the rank's log"),
)

# Any cause at all, in one pattern: a long log is searched a chunk at a time, not line by line.
ANY_CAUSE = re.compile("|".join(f"(?:{c.pattern.pattern})" for c in CAUSES), re.IGNORECASE | re.MULTILINE)

SILENT_TASKS = re.compile(r"stopped sending heartbeats\):?\s*\n?\s*([\d,\s]+)")


@dataclass(frozen=True)
class Finding:
    cause: str
    evidence: str  # the line that shows it, with where it was found
    hint: str

    def describe(self) -> str:
        return f"likely cause: {self.cause}\n  evidence: {self.evidence}\n  hint: {self.hint}"

    def as_dict(self) -> dict:
        return asdict(self)


def classify(text: str, where: str = "") -> list[Finding]:
    """Every cause the text shows, once each, in CAUSES order, with its first line as evidence."""
    first: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        for cause in CAUSES:
            if cause.name not in first and cause.pattern.search(line):
                first[cause.name] = f"{where}: {line[:300]}" if where else line[:300]
                break
    return [Finding(c.name, first[c.name], c.hint) for c in CAUSES if c.name in first]


def first_cause(text: str) -> str:
    """The first line of `text` that shows a known cause ('' when none does)."""
    for match in ANY_CAUSE.finditer(text):
        start, end = text.rfind("\n", 0, match.start()) + 1, text.find("\n", match.end())
        line = text[start:end if end >= 0 else len(text)].strip()
        if classify(line):  # the line as classify reads it (stripped) agrees
            return line
    return ""


def triage(texts: dict[str, str]) -> list[Finding]:
    """Findings over several logs ({where: text}), each cause once, most specific first."""
    found: dict[str, Finding] = {}
    for where, text in texts.items():
        for finding in classify(text, where):
            found.setdefault(finding.cause, finding)
    order = [c.name for c in CAUSES]
    return sorted(found.values(), key=lambda f: order.index(f.cause))


def silent_ranks(text: str) -> list[int]:
    """The ranks JAX's coordination service says stopped sending heartbeats (task = rank)."""
    ranks: set[int] = set()
    for match in SILENT_TASKS.finditer(text):
        ranks.update(int(n) for n in re.findall(r"\d+", match.group(1)))
    return sorted(ranks)
