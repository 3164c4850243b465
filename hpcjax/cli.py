"""The `hpcjax` command. Thin: parse, build a spec, call one step of the flow.

Importing this module must not import JAX: `hpcjax render` runs many times on
login nodes and has to answer at once. Steps that need heavier imports import
them inside their command function.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from hpcjax import __version__
from hpcjax.cli_runtime import add_runtime_verbs, choose_backend, run_submit_locally
from hpcjax.cli_train import add_train_verb
from hpcjax.errors import HpcjaxError, UsageError
from hpcjax.spec import Container, JobSpec, Layout, parse_env_assignment


class _Parser(argparse.ArgumentParser):
    """argparse with the house error format: `error: ...`, blank line, `hint: ...`, exit 2."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message, f"see `{self.prog} --help`")


def add_layout_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("layout")
    group.add_argument("--nodes", type=int, default=1, help="number of nodes (N)")
    group.add_argument("--gpus-per-node", type=int, default=1, help="GPUs on each node (G)")
    group.add_argument("--gpus-per-process", type=int, default=1,
                       help="GPUs each process owns (K): 1 = one process per GPU, "
                            "G = one process per node")


def add_job_options(parser: argparse.ArgumentParser, job_name: str = "hpcjax",
                    time: str = "01:00:00") -> None:
    """The options of render, submit and smoke, named after sbatch's."""
    add_layout_options(parser)
    job = parser.add_argument_group("job (named after sbatch's options)")
    job.add_argument("--time", default=time, help=f"walltime, as sbatch takes it (default {time})")
    job.add_argument("--job-name", default=job_name)
    job.add_argument("--partition")
    job.add_argument("--account")
    job.add_argument("--qos")
    job.add_argument("--constraint", help="node features, e.g. a100")
    job.add_argument("--cpus-per-task", type=int)
    job.add_argument("--mem", help="memory per node, e.g. 64G")
    job.add_argument("--exclusive", action="store_true")
    job.add_argument("--output-dir", default="hpcjax-logs",
                     help="directory of the per-rank logs (default: hpcjax-logs)")
    job.add_argument("--module", action="append", default=[], metavar="NAME",
                     help="`module load NAME` before launching (repeatable)")
    job.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                     help="export KEY=VALUE to every rank (repeatable)")
    box = parser.add_argument_group("container")
    box.add_argument("--image", help="container image: a .sif path, a URI, or $VAR set by a module")
    box.add_argument("--runtime", help="apptainer, singularity or none "
                                       "(default: apptainer with --image, else none)")
    box.add_argument("--bind", action="append", default=[], metavar="SRC[:DST]",
                     help="bind mount into the container (repeatable)")
    box.add_argument("--container-flag", action="append", default=[], metavar="FLAG",
                     help="extra argument to `<runtime> exec` (repeatable)")


def layout_from_args(args: argparse.Namespace) -> Layout:
    return Layout(nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                  gpus_per_process=args.gpus_per_process)


def spec_from_args(args: argparse.Namespace, command: list[str]) -> JobSpec:
    runtime = args.runtime or ("apptainer" if args.image else "none")
    return JobSpec(
        command=tuple(command),
        layout=layout_from_args(args),
        container=Container(runtime=runtime, image=args.image, binds=tuple(args.bind),
                            flags=tuple(args.container_flag)),
        time=args.time, job_name=args.job_name, partition=args.partition,
        account=args.account, qos=args.qos, constraint=args.constraint,
        cpus_per_task=args.cpus_per_task, mem=args.mem, exclusive=args.exclusive,
        output_dir=args.output_dir, modules=tuple(args.module),
        env=tuple(parse_env_assignment(e) for e in args.env),
    )


def write_atomically(path: Path, text: str) -> None:
    """Write text to path in one step: a reader never sees half a script."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cmd_render(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.render import render_sbatch

    spec = spec_from_args(args, command)
    text = render_sbatch(spec)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    write_atomically(Path(args.output), text)
    Path(spec.output_dir).mkdir(parents=True, exist_ok=True)  # sbatch needs it to exist
    print(f"wrote {args.output} ({spec.layout.name}); submit it with: sbatch {args.output}",
          file=sys.stderr)
    return 0


def cmd_submit(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax import dispatch

    spec = spec_from_args(args, command)
    if args.dry_run:
        from hpcjax.render import render_sbatch
        print(f"dry run: would submit {spec.layout.name} with this script:", file=sys.stderr)
        sys.stdout.write(render_sbatch(spec))
        return 0
    if choose_backend(args.backend) == "local":
        return run_submit_locally(spec)
    job = dispatch.submit(spec)
    print(job.job_id)
    sys.stdout.flush()
    if not args.wait:
        return 0
    return dispatch.wait_and_report(job.job_id)


def cmd_status(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax import jobs

    status = jobs.job_status(args.job_id)
    if args.json:
        print(json.dumps(status.as_dict(), indent=2))
    else:
        print(status.describe())
    return 0


def cmd_logs(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax import jobs

    sys.stdout.write(jobs.read_logs(args.job_id, rank=args.rank, tail=args.tail))
    return 0


def cmd_cancel(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax import jobs

    jobs.cancel_job(args.job_id)
    print(f"cancelled job {args.job_id}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="hpcjax", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"hpcjax {__version__}")
    sub = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)

    render = sub.add_parser("render", help="print the sbatch script for a job: render [options] -- CMD...")
    add_job_options(render)
    render.add_argument("-o", "--output", help="write the script to this file instead of stdout")
    render.set_defaults(run=cmd_render, takes_command=True)

    submit = sub.add_parser("submit", help="submit a job to SLURM: submit [options] -- CMD...")
    add_job_options(submit)
    submit.add_argument("--wait", action="store_true", help="wait and exit with the job's outcome")
    submit.add_argument("--dry-run", action="store_true", help="show what would be submitted")
    submit.add_argument("--backend", default="auto",
                        help="slurm, local (this machine's CPU), or auto: slurm when sbatch exists")
    submit.set_defaults(run=cmd_submit, takes_command=True)

    status = sub.add_parser("status", help="state of a job (from sacct, finished jobs too)")
    status.add_argument("job_id")
    status.add_argument("--json", action="store_true")
    status.set_defaults(run=cmd_status, takes_command=False)

    logs = sub.add_parser("logs", help="per-rank output of a job")
    logs.add_argument("job_id")
    logs.add_argument("--rank", type=int, help="only this rank")
    logs.add_argument("--tail", type=int, help="only the last N lines of each rank")
    logs.set_defaults(run=cmd_logs, takes_command=False)

    cancel = sub.add_parser("cancel", help="cancel a job")
    cancel.add_argument("job_id")
    cancel.set_defaults(run=cmd_cancel, takes_command=False)
    add_runtime_verbs(sub, add_job_options)
    add_train_verb(sub)
    return parser


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """Everything after the first `--` is the job's command, untouched by argparse."""
    if "--" not in argv:
        return argv, None
    at = argv.index("--")
    return argv[:at], argv[at + 1:]


def main(argv: list[str] | None = None) -> int:
    options, command = split_command(list(sys.argv[1:] if argv is None else argv))
    try:
        args = build_parser().parse_args(options)
        if command is not None and not args.takes_command:
            raise UsageError(f"`hpcjax {args.verb}` takes no command after --",
                             f"see `hpcjax {args.verb} --help`")
        return args.run(args, command or [])
    except HpcjaxError as err:
        print(f"error: {err.message}", file=sys.stderr)
        if err.hint:
            print(f"\nhint: {err.hint}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
