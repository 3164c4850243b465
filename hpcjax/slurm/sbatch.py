"""sbatch, on this machine through submitit or on a login node over SSH: the rendered script in,
the job id out (or SLURM's refusal, with the hint for what it said).

Here, submitit is reached through the smallest adapter that works: two of SlurmExecutor's
methods overridden (`_make_submission_file_text` returns the rendered script, `_num_tasks` the
layout's processes) and one called (`_submit_command` writes the file, runs sbatch and reads
the job id); SUBMITIT_HOOKS pins all three and a test fails loudly when a submitit release
changes them. The script is the render step's (launch.steps), rendered once: what `hpcjax render`
prints is what is submitted.
"""

from __future__ import annotations

import time

from hpcjax.values.errors import SubmitError
from hpcjax.job.spec import JobSpec
from hpcjax.slurm import commands, controller

# submitit's methods hpcjax overrides (the first two) or calls (the last)
SUBMITIT_HOOKS = {"_make_submission_file_text": ("self", "command", "uid"), "_num_tasks": ("self",),
                  "_submit_command": ("self", "command")}


def executor_class():
    # submitit is imported here, not at module import: the CLI must start fast.
    import submitit

    class HpcjaxSlurmExecutor(submitit.SlurmExecutor):
        """submitit's SLURM executor whose submission file is hpcjax's rendered script.
        submitit still writes the file into its folder, runs sbatch and reads the job id."""

        def __init__(self, script: str, spec: JobSpec) -> None:
            super().__init__(folder=spec.output_dir)
            self.script, self.spec = script, spec

        def _make_submission_file_text(self, command: str, uid: str) -> str:
            return self.script

        def _num_tasks(self) -> int:
            return self.spec.layout.num_processes

        def submit_spec(self):
            # The rendered script carries its own srun line, so no pickled function.
            return self._submit_command(command="")

    return HpcjaxSlurmExecutor


def here(script: str, spec: JobSpec) -> str:
    """sbatch of the rendered `script` on this machine, through submitit (the log directory exists:
    the stage made it)."""
    import submitit

    try:
        job = executor_class()(script, spec).submit_spec()
    except submitit.core.utils.FailedJobError as err:
        said = str(err).strip()
        raise SubmitError(f"sbatch refused the job ({spec.layout.name}): {said}",
                          controller.slurm_on().refusal_hint(said)) from None
    return str(job.job_id)


def there(text: str, spec: JobSpec, cluster, home: str, workdir: str, log_dir: str) -> str:
    """sbatch of the rendered script `text` on the cluster's login node, in the job's snapshot: the
    script is written under remote_dir/jobs/ (`home`: the remote directory there) first (kept, for a
    look by hand)."""
    script = f"{home}/jobs/{time.strftime('%Y%m%d-%H%M%S')}-{spec.job_name[:40]}.sh".replace(" ", "_")
    run = " ".join(commands.sbatch('"$2"'))
    done = cluster.host().run(
        ["sh", "-c", f'mkdir -p -- "$1" "$(dirname -- "$2")" && cat > "$2" && cd -- "$3" && {run}',
         "sh", log_dir, script, workdir], input=text)
    if done.returncode != 0:
        said = done.stderr.strip() or done.stdout.strip()
        raise SubmitError(f"sbatch on {cluster.name} refused the job ({spec.layout.name}): {said}",
                          f"{controller.slurm_on(cluster.host()).refusal_hint(said)} (there; the script is at "
                          f"{script})")
    job_id = done.stdout.strip().splitlines()[-1].split(";")[0]
    if not job_id.isdigit():
        raise SubmitError(f"sbatch on {cluster.name} said {done.stdout.strip()!r}, not a job id",
                          "run the script by hand there to see why: sbatch " + script)
    return job_id
