"""`submit --dry-run`: what a submit would do, shown without doing it, after every check the
submit itself makes (so a dry run that passes is a submit that starts): for SLURM the sbatch
script, for the local backend the processes it would start and the variables each is given."""

from __future__ import annotations

import os
import shlex

from hpcjax.containers import binds
from hpcjax.launch import _slurm_for
from hpcjax.launch.spec import JobSpec

# Options of a spec the local backend has no use for (they are SLURM's), with their flags.
SLURM_ONLY = (("partition", "--partition"), ("account", "--account"), ("qos", "--qos"),
              ("constraint", "--constraint"), ("mem", "--mem"), ("exclusive", "--exclusive"),
              ("cpus_per_task", "--cpus-per-task"), ("sbatch_lines", "--sbatch"), ("prologue", "--prologue"),
              ("epilogue", "--epilogue"), ("template", "--template"))


def dry_run(spec: JobSpec, backend: str | None, cluster=None) -> tuple[str, str]:
    """(what goes to stdout, the line that says what it is)."""
    from hpcjax.launch.render import render_sbatch

    if _slurm_for(backend, cluster):  # the backend's name is checked here as a submit checks it
        if cluster is not None and cluster.remote:
            from hpcjax.launch import remote
            spec = remote.as_there(spec, cluster)
        else:
            binds.check_before_submit(spec)
        return render_sbatch(spec), f"dry run: would submit {spec.layout.described} with this script:"
    return local_processes(spec), (f"dry run: the local backend would start "
                                   f"{spec.layout.described} on this machine, each as shown:")


def local_processes(spec: JobSpec) -> str:
    """One shell line per rank: the variables hpcjax gives it (beyond this environment), then the
    command; JOBID and PORT are chosen when the job starts."""
    from hpcjax.launch.local import check_local_spec, rank_environment

    check_local_spec(spec)
    unused = [flag for name, flag in SLURM_ONLY if getattr(spec, name)]
    lines = [f"# logs: {spec.output_dir}/JOBID-rankR.log; time limit: {spec.time}"]
    if unused:
        lines.append(f"# not used by the local backend (SLURM's): {', '.join(unused)}")
    command = " ".join(map(shlex.quote, spec.command))
    for rank in range(spec.layout.num_processes):
        env = rank_environment(spec, "JOBID", rank, "PORT")  # type: ignore[arg-type]
        given = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(env.items()) if os.environ.get(k) != v)
        lines.append(f"env {given} {command}")
    return "\n".join(lines) + "\n"
