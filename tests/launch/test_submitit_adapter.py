"""hpcjax reaches SLURM through two of submitit's private hooks. If a submitit
release renames them or changes what they receive, these tests fail loudly,
before a user's submission silently loses hpcjax's script."""

import dataclasses
import inspect
import os

import submitit

from hpcjax.slurm.script import render_sbatch
from hpcjax.slurm.sbatch import SUBMITIT_HOOKS, executor_class
from hpcjax.job.spec import JobSpec, Layout


def test_the_hooks_hpcjax_overrides_still_exist_with_the_same_parameters():
    for name, params in SUBMITIT_HOOKS.items():
        hook = getattr(submitit.SlurmExecutor, name, None)
        assert hook is not None, f"submitit {submitit.__version__} has no SlurmExecutor.{name}"
        assert tuple(inspect.signature(hook).parameters) == params, (name, inspect.signature(hook))


def test_submitit_submits_exactly_the_rendered_script(tmp_path, monkeypatch):
    """submitit's own _submit_command, with sbatch replaced by a stand-in that keeps the file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(f'#!/bin/sh\ncp "$1" {tmp_path}/submitted.sh\necho "Submitted batch job 4242"\n')
    sbatch.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    spec = JobSpec(command=("python", "train.py"), layout=Layout(nodes=2, gpus_per_node=4),
                   output_dir=str(tmp_path / "logs"))
    (tmp_path / "logs").mkdir()  # hpcjax.slurm.job.submit creates it: sbatch needs it
    job = executor_class()(render_sbatch(spec), spec).submit_spec()
    assert job.job_id == "4242"
    assert (tmp_path / "submitted.sh").read_text() == render_sbatch(spec)


def test_a_submission_is_rendered_once_and_that_script_is_submitted(tmp_path, monkeypatch, hpcjax_home):
    """The render step renders the script once; --test-only and sbatch get that very text (the
    SLURM backend rendered it twice, issue 64). sbatch and its --test-only: stand-ins that keep
    what they were given."""
    from hpcjax.launch import steps, submission
    from hpcjax.slurm import script

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(
        f'#!/bin/sh\nif [ "$1" = --test-only ]; then cat > {tmp_path}/tested.sh; '
        'echo "sbatch: Job 1 to start at 2026-12-06T20:00:00 using 8 processors on nodes node1 in partition gpu" >&2; '
        f'exit 0; fi\ncp "$1" {tmp_path}/submitted.sh\necho "Submitted batch job 4243"\n')
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    renders = []
    real = script.render_sbatch
    monkeypatch.setattr(script, "render_sbatch", lambda *a, **k: renders.append(a) or real(*a, **k))
    spec = JobSpec(command=("python", "train.py"), layout=Layout(nodes=2, gpus_per_node=4),
                   output_dir=str(tmp_path / "logs"))
    sub = submission(spec, "slurm")
    staged = steps.staging.stage(sub, steps.refusals.Probe())
    rendered = dataclasses.replace(staged, script=staged.backend.render(staged)[0])
    [queued] = staged.backend.queue(rendered)
    run = queued.run
    assert run.job_id == "4243"
    assert len(renders) == 1
    assert (tmp_path / "submitted.sh").read_text() == (tmp_path / "tested.sh").read_text() == rendered.script
