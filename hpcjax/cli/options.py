"""What the verbs share: the job options (named after sbatch's) and the spec they build, the
cluster they name. (argparse the house way is hpcjax.cli.parsing.)"""

from __future__ import annotations

import argparse

from hpcjax.protocol.contract import DEFAULT_OUTPUT_DIR
from hpcjax.values.errors import UsageError
from hpcjax.job.envvars import parse_env_assignment

COMMAND_USAGE = " -- COMMAND [ARG ...]"


def takes_command(parser: argparse.ArgumentParser, run) -> None:
    """A verb that runs a command: its usage shows where the command goes (call it last)."""
    parser.set_defaults(run=run, takes_command=True)
    parser.usage = parser.format_usage().removeprefix("usage: ").rstrip() + COMMAND_USAGE


class Refused(argparse.Action):
    """An sbatch option that does not map onto one hpcjax option: refused with the ones to use."""

    def __init__(self, option_strings, dest, hint: str = "", **kwargs) -> None:
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)
        self.hint = hint

    def __call__(self, parser, namespace, values, option_string=None):
        raise UsageError(f"{option_string} is sbatch's; hpcjax derives it from the layout", self.hint)


def add_layout_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("layout", "named G<GPUs in all>N<nodes>p<processes> in output: G8N2p8 is "
                                      "2 nodes x 4 GPUs, one process per GPU")
    group.add_argument("--nodes", "-N", type=int, help="number of nodes (N, default 1)")
    group.add_argument("--gpus-per-node", type=int, help="GPUs on each node (G, default 1)")
    group.add_argument("--gpus-per-process", type=int,
                       help="GPUs each process owns (K): 1 = one process per GPU (the default), G = one per node")
    layout = "hpcjax starts one process per --gpus-per-process GPUs on each of --nodes nodes"
    for names, hint in ((("--ntasks", "-n"), f"{layout}: --ntasks 8 on 2 nodes of 4 GPUs is --nodes 2 "
                         "--gpus-per-node 4"),
                        (("--ntasks-per-node", "--tasks-per-node"), f"{layout}: 4 tasks per node of 4 GPUs is "
                         "--gpus-per-node 4 (one process per GPU), 1 is --gpus-per-process 4"),
                        (("--gpus", "-G"), "give the GPUs of each node: --gpus 8 on 2 nodes is --nodes 2 "
                         "--gpus-per-node 4"),
                        (("--gpus-per-task",), "write it as --gpus-per-process K"),
                        (("--gres",), "give GPUs with --gpus-per-node G: the script asks SLURM for them")):
        group.add_argument(*names, action=Refused, hint=hint)


def add_job_options(parser: argparse.ArgumentParser, job_name: str = "hpcjax", time: str = "01:00:00") -> None:
    """The options of render, submit and smoke, named after sbatch's. None means "not given":
    a profile's value, then the command's default (job_defaults), then JobSpec's applies."""
    add_layout_options(parser)
    parser.set_defaults(job_defaults={"job_name": job_name, "time": time})
    site = parser.add_argument_group("site profile")
    site.add_argument("--profile", metavar="NAME", help="apply a site profile (see `hpcjax profile list`)")
    site.add_argument("--profile-file", metavar="FILE", help="the profiles file (default: $HPCJAX_PROFILES, "
                      "else ~/.config/hpcjax/profiles.toml)")
    job = parser.add_argument_group("job (named after sbatch's options)")
    job.add_argument("--time", "-t", help=f"walltime, as sbatch takes it; 0 or UNLIMITED for the partition's "
                                           f"limit (default {time})")
    job.add_argument("--job-name", "-J", help=f"default {job_name}")
    job.add_argument("--partition", "-p", help="the SLURM partition (default: the cluster's)")
    job.add_argument("--account", "-A", help="the account charged (default: yours)")
    job.add_argument("--qos", "-q", help="quality of service")
    job.add_argument("--constraint", "-C", help="node features, e.g. a100")
    job.add_argument("--gpu-type", help="the GPUs' type where the site's GRES is typed (gpu:a100:4): a100")
    job.add_argument("--cpus-per-task", "-c", type=int, help="CPUs of each process")
    job.add_argument("--mem", help="memory per node, e.g. 64G")
    job.add_argument("--exclusive", action="store_true", default=None, help="whole nodes, shared with no other job")
    job.add_argument("--output-dir", help=f"directory of the per-rank logs (default: {DEFAULT_OUTPUT_DIR})")
    job.add_argument("--module", action="append", dest="modules", metavar="NAME",
                     help="`module load NAME` before launching (repeatable; adds to the profile's)")
    job.add_argument("--env", action="append", metavar="KEY=VALUE",
                     help="export KEY=VALUE to every rank (repeatable); $NAME in VALUE is the job's variable, "
                          "e.g. --env 'PATH=/opt/bin:$PATH'")
    job.add_argument("--requeue", type=int, metavar="N",
                     help="after stopping on SLURM's warning (time limit, preemption) and saving, the job "
                          "requeues itself, at most N times (default 0)")
    job.add_argument("--retry-failed", action="store_true", default=None,
                     help="with --requeue: requeue a failed attempt too; a node that failed two attempts "
                          "is excluded from the next")
    job.add_argument("--preflight", action="store_true", default=None,
                     help="before the program, prove the allocation's nodes in the job itself (devices, matmul "
                          "throughput, all-reduce inside and between nodes, storage, GPU health); a node that "
                          "fails is named and the program never starts (with --retry-failed: requeued "
                          "without the node)")
    job.add_argument("--spares", type=int, metavar="K",
                     help="with --preflight: ask for K nodes more than the layout needs; the preflight runs on "
                          "all and the program on the best (hot spares: a bad node costs no requeue)")
    job.add_argument("--exclude", action="append", metavar="NODE",
                     help="a node the job must not run on (repeatable; adds to the profile's)")
    job.add_argument("--on", metavar="HOLD",
                     help="run inside the held allocation HOLD (`hpcjax hold`; `hpcjax holds` lists them): no wait "
                          "in SLURM's queue; its name is HOLD's job id and a step number, e.g. 1234.s2")
    job.add_argument("--sbatch", action="append", metavar="OPTION",
                     help="an extra #SBATCH option hpcjax does not model, e.g. --sbatch=--licenses=scratch")
    job.add_argument("--prologue", action="append", metavar="CMD", help="a shell command before the launch")
    job.add_argument("--epilogue", action="append", metavar="CMD", help="a shell command after the launch")
    job.add_argument("--template", metavar="FILE", help="a site template extending the packaged one")
    box = parser.add_argument_group("container")
    box.add_argument("--image", help="container image: a .sif path, a URI, a Charliecloud directory, a pyxis "
                                     "image (registry#image:tag), or $VAR set by a module")
    from hpcjax.containers import table as runtime_table

    box.add_argument("--runtime", help=f"{', '.join(runtime_table.names())} (default: "
                                       f"{runtime_table.DEFAULT_WITH_IMAGE} with --image, else {runtime_table.BARE})")
    box.add_argument("--cleanenv", action="store_true", default=None,
                     help="start the container with a clean environment; hpcjax passes what the ranks need "
                          "(SLURM_*, JAX_*, XLA_*, NCCL_*, CUDA_VISIBLE_DEVICES, HPCJAX_*, your --env)")
    box.add_argument("--no-bind-hpcjax", dest="bind_hpcjax", action="store_false", default=None,
                     help="the image ships hpcjax: do not bind this hpcjax's rank side into it")
    box.add_argument("--bind", action="append", dest="binds", metavar="SRC[:DST[:ro]]",
                     help="bind mount into the container (repeatable); $NAME is the job's variable, e.g. "
                          "--bind '$SCRATCH/data:/data:ro'")
    box.add_argument("--container-flag", action="append", dest="container_flags", metavar="FLAG",
                     help="extra argument to the runtime (`<runtime> exec`, ch-run, or srun for pyxis), e.g. "
                          "--container-flag=--writable-tmpfs (repeatable)")


def add_backend_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", default="auto",
                        help="slurm, local (this machine's CPU), or auto: slurm when sbatch exists (default auto)")


def command_line_options(args: argparse.Namespace) -> dict:
    """The job options given on the command line (None: not given)."""
    from hpcjax.job.profiles import OPTIONS

    given = {key: getattr(args, key, None) for key in OPTIONS}
    if getattr(args, "env", None) is not None:
        given["env"] = dict(parse_env_assignment(e) for e in args.env)
    return given


def request_from_args(args: argparse.Namespace, command, **travels):
    """The command line's request (hpcjax.launch.request): the job options as given, each named by its
    flag, the profile, the cluster, the backend, the sweep and `--after`, what travels (--upload, and
    `travels`: the rest of the Submission). hpcjax.launch.request resolves it, once."""
    from hpcjax.launch.request import Request

    return Request(command=tuple(command), given=command_line_options(args), flags=job_flags(),
                   defaults=getattr(args, "job_defaults", None) or {}, profile=getattr(args, "profile", None),
                   profile_file=getattr(args, "profile_file", None), cluster=getattr(args, "cluster", None),
                   remote_dir=getattr(args, "remote_dir", None), backend=getattr(args, "backend", "auto"),
                   sweep=tuple(getattr(args, "sweep", None) or ()), max_parallel=getattr(args, "max_parallel", None),
                   after=getattr(args, "after", None) or None, uploads=tuple(getattr(args, "upload", None) or ()),
                   travels=travels)


# The job options whose flag is not their name with dashes.
FLAGS = {"binds": "--bind", "container_flags": "--container-flag", "modules": "--module", "sbatch": "--sbatch",
         "exclude": "--exclude"}


def flag_of(key: str) -> str:
    return FLAGS.get(key, "--" + key.replace("_", "-"))


def job_flags() -> dict[str, str]:
    """Each job option's flag."""
    from hpcjax.job.profiles import OPTIONS

    return {key: flag_of(key) for key in OPTIONS}


def flagged(message: str, names) -> str:
    """message with Python field names written as the flags a user types (launch.request.flagged)."""
    from hpcjax.launch.request import flagged as rewritten

    return rewritten(message, {name: flag_of(name) for name in names})
