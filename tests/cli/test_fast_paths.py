"""What the everyday verbs import, held to a named list (issue 36: the CLI at the interpreter's floor).

On a login node whose Python sits on a shared filesystem every imported module is several metadata
round trips, so a verb that starts importing another verb's machinery (JAX, submitit, the template
engine for `status`) is slower on every call. A module added to a verb's path on purpose goes into
its list here; one that comes in by accident fails this test. Measured with `python -X importtime`
and bench/cli_speed.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

# hpcjax's own modules each verb may import (container runtimes: the table loads them all).
# `hpcjax --help` (and no verb, or a misspelt one): the verb table and argparse the house way, no verb's module
HELP_ONLY = {"hpcjax", "hpcjax.values", "hpcjax.values.errors", "hpcjax.values.voice", "hpcjax.cli",
             "hpcjax.cli.parsing", "hpcjax.cli.verbs"}
COMMON = HELP_ONLY | {"hpcjax.protocol", "hpcjax.cli.options", "hpcjax.protocol.contract", "hpcjax.protocol.envnames", "hpcjax.values.errors", "hpcjax.values.jobid",
          "hpcjax.protocol.timeouts", "hpcjax.values.validate", "hpcjax.values.shellword", "hpcjax.job", "hpcjax.job.spec",
          "hpcjax.job.extras", "hpcjax.job.after", "hpcjax.job.envvars", "hpcjax.job.walltime", "hpcjax.containers",
          "hpcjax.containers.binds", "hpcjax.values.voice",
          "hpcjax.containers.table",
          "hpcjax.hosts", "hpcjax.hosts.files", "hpcjax.hosts.here", "hpcjax.hosts.ssh"}
FOLLOW = {"hpcjax.follow", "hpcjax.values.voice", "hpcjax.follow.hangs", "hpcjax.follow.outcome", "hpcjax.follow.ranklogs",
          "hpcjax.follow.run", "hpcjax.follow.stacks", "hpcjax.follow.triage", "hpcjax.values.jsonlines", "hpcjax.protocol.rundir",
          "hpcjax.values.nodelist", "hpcjax.protocol.hangblame", "hpcjax.protocol.stackgroups",
          "hpcjax.protocol.statuses"}
CATALOG = {"hpcjax.catalog", "hpcjax.catalog.db", "hpcjax.catalog.keep", "hpcjax.catalog.records"}
# hpcjax.hosts.cluster: the backends' default, this machine (THIS_MACHINE; 3 ms, its imports are COMMON's)
LOCAL = {"hpcjax.backends", "hpcjax.hosts.cluster", "hpcjax.backends.local", "hpcjax.localjobs", "hpcjax.localjobs.chains",
         "hpcjax.localjobs.environment", "hpcjax.localjobs.processes", "hpcjax.localjobs.queue",
         "hpcjax.protocol.placement"}
# hpcjax.launch.request: the one resolve, of the cluster too (--cluster, a profile's host, $HPCJAX_CLUSTER);
# hpcjax.slurm.commands: the status poll's queries, started before the rest is imported (cli.submitted)
ASKING_VERBS = {"hpcjax.cli.submitted", "hpcjax.cli.reach", "hpcjax.job.clusters", "hpcjax.cli.kinds", "hpcjax.job.profiles",
                "hpcjax.hosts.cluster", "hpcjax.launch", "hpcjax.launch.request", "hpcjax.slurm", "hpcjax.slurm.commands",
                "hpcjax.slurm.conf"}
ALLOWED = {
    "render": COMMON | {"hpcjax.cli.jobs", "hpcjax.cli.reach", "hpcjax.cli.following", "hpcjax.job.clusters", "hpcjax.cli.kinds", "hpcjax.cli.outputs", "hpcjax.job.profiles",
                        "hpcjax.job.sweeps", "hpcjax.hosts.cluster", "hpcjax.slurm", "hpcjax.slurm.script",
                        "hpcjax.launch", "hpcjax.launch.request",
                        "hpcjax.protocol.scriptnames",
                        "hpcjax.protocol.statuses"},
    "runs": COMMON | FOLLOW | CATALOG | LOCAL | {"hpcjax.cli.runs"},
    "status": COMMON | FOLLOW | CATALOG | LOCAL | ASKING_VERBS,
    "logs": COMMON | FOLLOW | CATALOG | LOCAL | ASKING_VERBS,
    "--help": HELP_ONLY,
}
HEAVY = ("jax", "jaxlib", "numpy", "submitit", "optax", "orbax", "jinja2")  # jinja2: render's alone

DUMP = """
import sys
from hpcjax.cli import main
code = main(sys.argv[1:])
print("\\n".join(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


@pytest.fixture(scope="module")
def local_job(tmp_path_factory):
    """A finished job of the local backend, in its own HPCJAX_HOME."""
    work = tmp_path_factory.mktemp("imports")
    env = {**os.environ, "HPCJAX_HOME": str(work / "home")}
    done = subprocess.run([sys.executable, "-m", "hpcjax", "submit", "--backend", "local", "--", "true"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return work, env, done.stdout.split()[0]


@pytest.mark.parametrize("verb", sorted(ALLOWED))
def test_each_everyday_verb_imports_its_named_modules_and_nothing_heavy(local_job, verb):
    work, env, job = local_job
    argv = {"render": ["render", "--nodes", "2", "--gpus-per-node", "4", "--", "python", "t.py"],
            "runs": ["runs"], "status": ["status", job], "logs": ["logs", job], "--help": ["--help"]}[verb]
    dump = DUMP.replace("code = main(sys.argv[1:])", "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as end:"
                        "\n    code = end.code") if verb == "--help" else DUMP  # argparse's --help exits
    done = subprocess.run([sys.executable, "-c", dump, *argv], cwd=work, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    modules = set(done.stderr.split())
    ours = {m for m in modules if m == "hpcjax" or m.startswith("hpcjax.")}
    runtimes = {m for m in ours if m.startswith("hpcjax.containers.runtimes")}
    assert ours - runtimes - ALLOWED[verb] == set(), f"`hpcjax {verb}` imports more than its list"
    own = {"render": "hpcjax.cli.jobs", "status": "hpcjax.cli.submitted", "logs": "hpcjax.cli.submitted",
           "runs": "hpcjax.cli.runs"}
    assert verb == "--help" or own[verb] in ours  # the verb's own module was loaded
    # the verbs about a submitted job build no parser with the job options (render's and submit's)
    assert verb not in ("status", "logs") or "hpcjax.cli.jobs" not in ours
    heavy = {m.split(".")[0] for m in modules} & set(HEAVY)
    assert heavy == ({"jinja2"} if verb == "render" else set()), heavy


def test_render_checks_bash_only_when_asked_and_submit_always(tmp_path, monkeypatch):
    """No subprocess on render's path unless --check; a submission still refuses a script that is not bash."""
    from test_bad_input import cli, refused

    monkeypatch.setenv("HPCJAX_HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    broken = ["--prologue", "if then fi (", "--", "true"]
    code, out, err = cli(work, "render", *broken)
    assert code == 0 and "if then fi (" in out and err == ""
    refused(work, ["render", "--check", *broken], "the rendered script is not valid bash")
    if shutil.which("sbatch"):  # without SLURM, submit refuses earlier (no sbatch); test_profiles has the rule
        refused(work, ["submit", "--backend", "slurm", "--dry-run", *broken], "the rendered script is not valid bash")


def test_compiled_templates_are_kept_and_a_cache_that_cannot_be_used_is_no_error(tmp_path, monkeypatch):
    from hpcjax.job.profiles import job_spec
    from hpcjax.slurm import script

    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    script._environment.cache_clear()
    first = script.render_sbatch(job_spec(["python", "t.py"]))
    kept = list((cache / "hpcjax" / "templates").iterdir())
    assert len(kept) == 1 and kept[0].suffix == ".cache" and kept[0].stat().st_size > 1000
    script._environment.cache_clear()
    assert script.render_sbatch(job_spec(["python", "t.py"])) == first  # rendered from the kept code
    kept[0].write_bytes(b"garbage")  # damaged: compiled again, same text
    script._environment.cache_clear()
    assert script.render_sbatch(job_spec(["python", "t.py"])) == first
    monkeypatch.setenv("XDG_CACHE_HOME", "/proc/no-cache-here")  # cannot be made: no cache, no error
    script._environment.cache_clear()
    assert script.render_sbatch(job_spec(["python", "t.py"])) == first
    script._environment.cache_clear()


def test_every_verb_of_the_table_is_added_by_its_module_with_its_line():
    """`hpcjax --help` lists the verbs from the table without their modules; each module adds its
    verbs with the table's line (hpcjax.cli.verbs is its one owner)."""
    import argparse

    from hpcjax.cli import build_parser, listing_parser
    from hpcjax.cli.verbs import HELP, VERBS

    [listed] = [a for a in listing_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert {a.dest: a.help for a in listed._choices_actions} == HELP
    for verb in VERBS:
        [sub] = [a for a in build_parser(verb)._actions if isinstance(a, argparse._SubParsersAction)]
        assert verb in sub.choices, verb
        [line] = [a.help for a in sub._choices_actions if a.dest == verb]
        assert line == HELP[verb], verb


def test_status_asks_slurm_early_only_for_a_job_of_this_machines_slurm(hpcjax_home, monkeypatch):
    """cli.submitted.ask_slurm_early's guess: a job recorded as SLURM's here, or not recorded (plain
    sbatch), has its poll started at once; a local job, one sent to a cluster over SSH, --cluster,
    $HPCJAX_CLUSTER and an id that is no job's start nothing (their status asks elsewhere, or says why)."""
    import argparse

    from hpcjax.catalog import records
    from hpcjax.cli import submitted
    from hpcjax.hosts import here
    from hpcjax.slurm import commands

    started = []
    monkeypatch.setattr(here, "start_early", lambda *argvs: started.append(list(argvs)))
    monkeypatch.delenv("HPCJAX_CLUSTER", raising=False)
    monkeypatch.setenv("SLURM_CONF", os.devnull)  # readable: the conf check passes
    records.save("41", {"backend": "slurm", "output_dir": "/x"})
    records.save("42", {"backend": "local", "output_dir": "/x"})
    records.save("43@alpha", {"backend": "slurm", "output_dir": "/x", "cluster": {"destination": "alpha"}})
    plain = argparse.Namespace(cluster=None)
    for job in ("41", "40", "42", "43", "not-a-job"):
        submitted.ask_slurm_early(job, plain)
    submitted.ask_slurm_early("41", argparse.Namespace(cluster="alpha"))
    monkeypatch.setenv("HPCJAX_CLUSTER", "alpha")
    submitted.ask_slurm_early("41", plain)
    assert started == [commands.poll(["41"]), commands.poll(["40"])]
