"""The job spec: frozen, keyword-only dataclasses that validate themselves.

A spec describes one SLURM job: the GPU layout, the resources, the container and the command. Every
bad value raises SpecError naming the value, what would be valid, and a hint. No SLURM, no JAX here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from hpcjax.protocol import contract, envnames
from hpcjax.containers import table as runtime_table
from hpcjax.values.errors import SpecError
from hpcjax.job import extras
from hpcjax.job.after import check_after
from hpcjax.job.envvars import check_env_pair, check_timeouts
from hpcjax.job.walltime import format_walltime, parse_walltime
from hpcjax.values.validate import require_int, require_text, require_utf8

MEMORY = re.compile(r"\d+[KMGT]?")
# Bounds past which a count is a typo: the largest clusters have ~10,000 nodes; sbatch misreads counts past 2**31.
MAX_NODES, MAX_GPUS_PER_NODE = 65536, 1024
MAX_JOB_NAME = 255  # bytes: slurmdbd's job_name column is a TINYTEXT



def _require_int(name: str, value: object, minimum: int, hint: str) -> None:
    require_int(name, value, minimum, hint, error=SpecError)


def _require_text(name: str, value: object, *, spaces: bool = True) -> None:
    require_text(name, value, spaces=spaces, error=SpecError)


@dataclass(frozen=True, kw_only=True)
class Layout(contract.Layout):
    """N nodes, G GPUs per node, K GPUs per process (docs/architecture.md, layout vocabulary):
    the contract's arithmetic, validated."""

    def __post_init__(self) -> None:
        _require_int("nodes", self.nodes, 1, "ask for at least one node: --nodes 1")
        _require_int("gpus_per_node", self.gpus_per_node, 1,
                     "ask for the GPUs of each node: --gpus-per-node 4")
        _require_int("gpus_per_process", self.gpus_per_process, 1,
                     "1 runs one process per GPU; --gpus-per-node runs one process per node")
        for name, flag, value, most in (("nodes", "--nodes", self.nodes, MAX_NODES),
                                        ("gpus_per_node", "--gpus-per-node", self.gpus_per_node, MAX_GPUS_PER_NODE)):
            if value > most:
                raise SpecError(f"{name}={value} is more than any SLURM cluster has (at most {most})",
                                f"check {flag}: it counts {'nodes' if name == 'nodes' else 'the GPUs of one node'}, "
                                "not GPUs in total", field=name)
        if self.gpus_per_node % self.gpus_per_process:
            divisors = [k for k in range(1, self.gpus_per_node + 1) if self.gpus_per_node % k == 0]
            raise SpecError(
                f"gpus_per_process={self.gpus_per_process} does not divide "
                f"gpus_per_node={self.gpus_per_node}",
                f"every process owns the same number of GPUs of one node; valid values: "
                f"{', '.join(map(str, divisors))}", field=("gpus_per_process", "gpus_per_node"))


@dataclass(frozen=True, kw_only=True)
class Container:
    """How every rank is launched: in a container or bare. Each runtime's rules and launch
    words are its class in hpcjax/containers/runtimes/."""

    runtime: str = runtime_table.BARE  # one of runtime_table.names(): apptainer, singularity, charliecloud, ...
    image: str | None = None  # a .sif path, a URI, a Charliecloud directory, a pyxis image, or $VAR
    binds: tuple[str, ...] = ()  # SRC[:DST[:OPTS]]; the source must exist when the job is submitted
    flags: tuple[str, ...] = ()  # extra arguments to the runtime (`<rt> exec`, ch-run, srun for pyxis)
    cleanenv: bool = False  # start the container with a clean environment; hpcjax passes what ranks need
    bind_hpcjax: bool = True  # bind hpcjax's rank side into the image (off for images that ship hpcjax)

    def __post_init__(self) -> None:
        runtime = runtime_table.get(self.runtime)  # an unknown name lists the valid ones
        object.__setattr__(self, "binds", tuple(self.binds))
        object.__setattr__(self, "flags", tuple(self.flags))
        for name, value in runtime.normalize(self).items():
            object.__setattr__(self, name, value)
        runtime.check(self)

    @property
    def runtime_rules(self) -> runtime_table.Runtime:
        return runtime_table.get(self.runtime)

    @property
    def in_container(self) -> bool:
        return not self.runtime_rules.bare

    @property
    def image_env_var(self) -> str | None:
        return runtime_table.image_env_var(self.image)

    @property
    def image_is_local_file(self) -> bool:
        return self.runtime_rules.image_is_local_file(self.image)


# A GRES type as SLURM names one in gres.conf (a100, h100_80gb, rtx-6000): nothing sbatch would split.
GPU_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """Everything needed to render one sbatch script."""

    command: tuple[str, ...]  # argv of the program every rank runs
    layout: Layout = field(default_factory=Layout)
    container: Container = field(default_factory=Container)
    time: str = "01:00:00"  # walltime, any form SLURM accepts; stored normalized
    job_name: str = "hpcjax"
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None  # SLURM feature expression, e.g. "a100&ib"
    gpu_type: str | None = None  # a typed GRES's type, e.g. a100: --gpus-per-node=a100:4
    cpus_per_task: int | None = None
    mem: str | None = None  # per node, SLURM units: 64G, 500M, 0 = all of it
    exclusive: bool = False
    output_dir: str = contract.DEFAULT_OUTPUT_DIR  # where the per-rank logs go (shared storage)
    modules: tuple[str, ...] = ()  # `module load` arguments, in order
    env: tuple[tuple[str, str], ...] = ()  # exported before srun, in order
    signal_grace_s: int = contract.WARNING_GRACE_S  # the warning signal this long before the time limit
    requeue: int = 0  # times the job requeues itself after stopping on the warning
    retry_failed: bool = False  # requeue also after a failure (within the same budget)
    preflight: bool = False  # prove the allocation's nodes in a step of their own before the program's
    spares: int = 0  # nodes asked beyond the layout's: the preflight picks the best, the program runs there
    exclude: tuple[str, ...] = ()  # nodes the job must not run on (sbatch --exclude)
    avoid_failed_hours: int = 0  # > 0: also every node a preflight failed within this many hours
    cluster_python: str = ""  # the cluster's Python for hpcjax's own programs, when the job is sent over SSH
    sbatch_lines: tuple[str, ...] = ()  # extra #SBATCH options hpcjax does not model (job.extras)
    prologue: tuple[str, ...] = ()  # shell commands before the launch, one per line
    epilogue: tuple[str, ...] = ()  # shell commands after it
    template: str | None = None  # a site template extending the packaged one (Jinja blocks)
    array: int = 0  # > 0: a job array of this many elements (SLURM_ARRAY_TASK_ID 0..array-1)
    array_parallel: int | None = None  # at most this many elements run at once
    array_commands: tuple[tuple[str, ...], ...] = ()  # a sweep: each element's own command
    sweep: tuple[tuple[tuple[str, str], ...], ...] = ()  # a sweep: each element's (name, value)s, for the catalog
    after: tuple[tuple[str, str], ...] = ()  # (job id, "ok" or "any"): start when those end so
    run_dir: str | None = None  # where the program keeps its run, when its command names none (a Trainer's)
    on: str | None = None  # a held allocation's name (hpcjax hold): the job runs inside it, not as a job of its own

    def __post_init__(self) -> None:
        if isinstance(self.command, str):  # tuple("python x.py") would be its letters
            raise SpecError(f"the command {self.command!r} is one string, not a list of words",
                            f"give its words: {self.command.split() or ['python', 'x.py']!r} (a shell line goes "
                            "through bash: ['bash', '-c', '...'])")
        command = tuple(self.command)
        if not command or not command[0]:
            raise SpecError("the command is empty",
                            "put the program after --: hpcjax render ... -- python train.py")
        if any(not isinstance(a, str) or "\0" in a for a in command):
            raise SpecError(f"command arguments must be strings without NUL bytes: {command!r}",
                            "pass each argument as a plain string")
        for argument in command:
            require_utf8("the command's argument", argument, SpecError)
        object.__setattr__(self, "command", command)
        object.__setattr__(self, "time", format_walltime(parse_walltime(self.time)))
        _require_text("job_name", self.job_name)
        if len(self.job_name.encode()) > MAX_JOB_NAME:
            raise SpecError(f"job_name is {len(self.job_name.encode())} bytes long: {self.job_name[:40]!r}...",
                            f"SLURM's accounting keeps at most {MAX_JOB_NAME} bytes of a job's name: give a shorter "
                            "--job-name", field="job_name")
        for name in ("partition", "account", "qos"):
            if getattr(self, name) is not None:
                _require_text(name, getattr(self, name), spaces=False)
        if self.constraint is not None:
            _require_text("constraint", self.constraint)
        if self.gpu_type is not None and not GPU_TYPE.fullmatch(str(self.gpu_type)):
            raise SpecError(f"gpu_type {self.gpu_type!r} is not a GPU type name (letters, digits, '_', '-', '.')",
                            "the type as the site's GRES names it, e.g. --gpu-type a100 (`sinfo -o '%P %G'` lists "
                            "them; `hpcjax site` writes it into a profile)", field="gpu_type")
        if self.cpus_per_task is not None:
            _require_int("cpus_per_task", self.cpus_per_task, 1, "e.g. --cpus-per-task 8")
        if self.mem is not None and not (isinstance(self.mem, str) and MEMORY.fullmatch(self.mem)):
            raise SpecError(f"malformed memory size {self.mem!r}",
                            "use SLURM's units: a number with K, M, G or T (64G), or 0 for all", field="mem")
        _require_text("output_dir", self.output_dir)
        _require_int("signal_grace_s", self.signal_grace_s, 0, "seconds before the time limit")
        _require_int("requeue", self.requeue, 0, "how many times the job may requeue itself, e.g. --requeue 2")
        _require_int("spares", self.spares, 0, "extra nodes for the preflight to choose from, e.g. --spares 1")
        if self.layout.nodes + self.spares > MAX_NODES:
            raise SpecError(f"spares={self.spares} and nodes={self.layout.nodes} ask for more nodes than any SLURM "
                            f"cluster has (at most {MAX_NODES})", "a spare or two is the use: e.g. --spares 1",
                            field=("spares", "nodes"))
        _require_int("avoid_failed_hours", self.avoid_failed_hours, 0, "hours, e.g. 24")
        object.__setattr__(self, "exclude", tuple(extras.check_node_name(n) for n in self.exclude))
        if self.spares and not self.preflight:
            raise SpecError(f"spares={self.spares} without a preflight: the spares are chosen by it",
                            "add --preflight (or drop --spares)", field=("spares", "preflight"))
        if self.retry_failed and not self.requeue:
            raise SpecError("retry_failed needs a requeue budget (requeue=0)",
                            "add --requeue N: a failed job is requeued at most N times",
                            field=("retry_failed", "requeue"))
        object.__setattr__(self, "sbatch_lines", tuple(extras.check_sbatch_line(x) for x in self.sbatch_lines))
        object.__setattr__(self, "prologue", tuple(extras.check_command_line("prologue", x) for x in self.prologue))
        object.__setattr__(self, "epilogue", tuple(extras.check_command_line("epilogue", x) for x in self.epilogue))
        if self.template is not None and not Path(self.template).is_file():
            raise SpecError(f"site template {self.template!r} does not exist",
                            "give the path of a .j2 file that starts with {% extends \"sbatch.sh.j2\" %}")
        _require_int("array", self.array, 0, "the number of elements of a job array, or 0 for one job")
        if self.array_parallel is not None:
            _require_int("array_parallel", self.array_parallel, 1, "how many elements may run at once, e.g. 4")
            if not self.array:
                raise SpecError("array_parallel was given for a job that is not an array (array=0)",
                                "give array=N, or drop array_parallel")
        object.__setattr__(self, "array_commands", tuple(tuple(c) for c in self.array_commands))
        if self.array_commands and len(self.array_commands) != self.array:
            raise SpecError(f"{len(self.array_commands)} element commands for an array of {self.array}",
                            "give one command per element (a sweep sets both)")
        if any(not c or any(not isinstance(a, str) or "\0" in a for a in c) for c in self.array_commands):
            raise SpecError("an element's command is empty or not strings", "pass each argument as a plain string")
        object.__setattr__(self, "sweep", tuple(tuple((str(k), str(v)) for k, v in dict(e).items()) for e in self.sweep))
        if self.sweep and len(self.sweep) != len(self.array_commands):
            raise SpecError("a sweep needs one set of values per element command", "build it with hpcjax.job.sweeps.expand (hpcjax submit --sweep NAME=V1,V2 does)")
        object.__setattr__(self, "after", tuple(check_after(job, when) for job, when in self.after))
        object.__setattr__(self, "modules", tuple(self.modules))
        for module in self.modules:
            _require_text("module", module)
        object.__setattr__(self, "env", tuple((k, v) for k, v in dict(self.env).items()))
        for key, value in self.env:
            check_env_pair(key, value)
        envnames.check(key for key, _ in self.env)
        check_timeouts(dict(self.env))
        if self.on is not None:
            check_on(self)

    def command_of(self, element: int | None) -> tuple[str, ...]:
        """What one element of an array runs (a sweep's element its own command), or the job."""
        return self.array_commands[element] if element is not None and self.array_commands else self.command

    def hpcjax_python(self) -> str:
        """The ranks' Python for hpcjax's own programs (preflight, smoke, a call's worker): the image's in
        a container (hpcjax bound in), the cluster's over SSH (hpcjax shipped), else this interpreter."""
        import sys

        return "python3" if self.container.in_container else self.cluster_python or sys.executable

    @property
    def warning_s(self) -> int:
        """How long before the time limit SLURM sends the warning signal (0: none). SLURM may send it
        a minute earlier than asked, and USR2's default action ends a program that does not catch
        it: a short job gets a shorter lead, at most half its time less that minute, and one of 2
        minutes or less none (issue 44: a 1-minute job was killed by its warning after 8 s)."""
        limit = self.time_seconds
        if not self.signal_grace_s or limit is None:
            return self.signal_grace_s
        lead = min(self.signal_grace_s, limit // 2 - contract.WARNING_EARLY_S)
        return lead if lead >= contract.WARNING_MIN_S else 0

    @property
    def time_seconds(self) -> int | None:
        """The walltime in seconds; None for no limit (--time 0 or UNLIMITED)."""
        return parse_walltime(self.time)


# A letter first: a job id is digits (1234, 1234_5, 1234.s2), and `release 1234` must not mean two things.
HOLD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
HOLD_NAME_HINT = "a letter, then letters, digits, _ . - (at most 64), e.g. --name dev"


def check_on(spec: "JobSpec") -> None:
    """What a job run inside a hold cannot have: the hold's allocation is already there, and its
    agent runs one job at a time (no array, no dependency); a requeue would requeue the hold."""
    if not isinstance(spec.on, str) or not HOLD_NAME.fullmatch(spec.on):
        raise SpecError(f"invalid hold name {spec.on!r}", "a hold's name as `hpcjax holds` lists it: "
                        + HOLD_NAME_HINT.replace("--name", "--on"), field="on")
    for name, value, hint in (("array", spec.array, "submit the sweep's elements one by one with --on, or as a "
                               "job array of their own without it"),
                              ("after", spec.after, "wait for the job first, or drop --on"),
                              ("requeue", spec.requeue, "a requeue would requeue the whole hold; drop --requeue"),
                              ("spares", spec.spares, "give the hold the nodes you want (hpcjax hold --nodes N)")):
        if value:
            raise SpecError(f"{name} cannot be used with on={spec.on!r} (a job inside a held allocation)",
                            hint, field=(name, "on"))
