"""A strict site, for real (issue 62): SLURM 24.11 configured as strict sites run it (up.sh --release
strict): AccountingStorageEnforce=associations,limits,qos, so SLURM itself refuses a job without a
valid account or QOS and holds one over its QOS's limit; a submit filter (job_submit.lua) that
refuses a job without --time or --account and gives one without --qos the site's default; root's
associations the only users SLURM knows (account physics, its default, with QOS normal and gpu2; the
account root with normal). Beside it, the lenient dev cluster (22.05, nothing enforced): the same
requests are said there, and run, where SLURM takes them.

On the strict site every refusal comes before anything runs, in words and with a hint; `hpcjax
site` learns what the site refuses a job without and writes the account into the profile, with
which jobs, holds and the Python API then run."""

from __future__ import annotations

import json
import sys

import pytest

from releases_support import ON, hpcjax_on, on_release

pytestmark = [pytest.mark.cluster, pytest.mark.xdist_group("release-strict")]

STRICT = "strict"


def queue_size() -> int:
    return len(on_release(STRICT, "squeue", "-h", "-o", "%i").stdout.split())


@pytest.mark.parametrize("release", [STRICT])
def test_site_learns_what_the_strict_site_refuses_and_its_profile_runs_jobs(release, release_cluster, tmp_path,
                                                                            hpcjax_home):
    profiles = tmp_path / "profiles.toml"
    learnt = hpcjax_on(STRICT, "site", "--no-node", "--name", "strict", "--profile-file", str(profiles), cwd=tmp_path)
    assert learnt.returncode == 0, learnt.stderr
    shown = hpcjax_on(STRICT, "site", "--no-node", "--print", cwd=tmp_path).stdout
    assert "enforced: associations,limits,qos (AccountingStorageEnforce)" in shown, shown
    assert "refuses a job without --time: this site needs a time limit on every job" in shown, shown
    assert "refuses a job without --account: this site needs an account on every job" in shown, shown
    written = profiles.read_text()
    assert '\naccount = "physics"  # sbatch --test-only: the site refuses a job without --account' in written, written
    assert "# time: sbatch --test-only: the site refuses a job without --time" in written, written

    done = hpcjax_on(STRICT, "submit", "--profile", "strict", "--profile-file", str(profiles), "--nodes", "1",
                     "--gpus-per-node", "1", "--wait", "--", "true", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = done.stdout.split()[0]
    billed = on_release(STRICT, "sacct", "-n", "-P", "-X", "-j", job, "-o", "Account,QOS,State").stdout.split()
    assert billed == ["physics|normal|COMPLETED"], billed  # the filter gave it the site's default QOS

    held = hpcjax_on(STRICT, "hold", "--profile", "strict", "--profile-file", str(profiles), "--name", "strict1",
                     "--nodes", "1", "--gpus-per-node", "1", "--time", "00:05:00", cwd=tmp_path)
    assert held.returncode == 0, held.stderr
    try:
        inside = hpcjax_on(STRICT, "submit", "--on", "strict1", "--nodes", "1", "--wait", "--", "true", cwd=tmp_path)
        assert inside.returncode == 0, inside.stderr
    finally:
        hpcjax_on(STRICT, "release", "strict1", cwd=tmp_path)


@pytest.mark.parametrize("release", [STRICT])
@pytest.mark.parametrize("options, said, hint", [
    ((), "sbatch --test-only refused the job (G1N1p1): sbatch: error: this site needs an account on every job",
     "hint: the site's own submit rules refused the job, in their words above"),
    (("--account", "nosuchacct"), "error: --account nosuchacct is not one of yours on this machine (physics, root): "
     "SLURM refuses such a job there (AccountingStorageEnforce=associations,limits,qos)",
     "hint: give one of physics, root"),
    (("--account", "physics", "--qos", "nosuchqos"), "error: --qos nosuchqos is not one you may use under account "
     "physics on this machine (gpu2, normal): SLURM refuses such a job there", "hint: give --qos gpu2 or normal"),
    (("--account", "root", "--qos", "gpu2"), "error: --qos gpu2 is not one you may use under account root",
     "hint: give --qos normal, or --account physics, which has it"),
    (("--account", "physics", "--qos", "gpu2", "--gpus-per-node", "4"),
     "error: the job asks for 4 GPUs; QOS gpu2 allows 2 per user (MaxTRESPU gres/gpu=2): SLURM would keep it "
     "pending for ever", "hint: ask for at most 2 GPUs"),
], ids=["no account", "not an account of yours", "not a QOS of yours", "a QOS of another account", "over the QOS"])
def test_what_the_strict_site_refuses_is_said_before_anything_runs(release, release_cluster, tmp_path, hpcjax_home,
                                                                   options, said, hint):
    before = queue_size()
    args = ["--nodes", "1", "--gpus-per-node", "1", *options] if "--gpus-per-node" not in options else \
        ["--nodes", "1", *options]
    done = hpcjax_on(STRICT, "submit", *args, "--", "true", cwd=tmp_path)
    assert done.returncode != 0 and said in done.stderr and hint in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == "" and queue_size() == before  # nothing was submitted
    assert not (tmp_path / "hpcjax-logs").exists() or not any((tmp_path / "hpcjax-logs").iterdir())
    held = hpcjax_on(STRICT, "hold", "--name", "refused", *args, cwd=tmp_path)  # a hold is refused the same way
    assert held.returncode != 0 and said.split("(G1N1p1)")[-1][:40] in held.stderr, held.stderr
    assert queue_size() == before


@pytest.mark.parametrize("release", ["22.05"])
@pytest.mark.parametrize("options, note", [
    (("--account", "nosuchacct"), "note: --account nosuchacct is not one of yours on this machine (physics, root); "
     "SLURM there does not enforce accounts, and will run the job billed to your default account instead"),
    # 2 GPUs on each of 2 nodes: 4, over the QOS's 2, and room beside the other tests' jobs on the shared cluster
    (("--qos", "gpu2", "--account", "physics", "--nodes", "2", "--gpus-per-node", "2"), "note: the job asks for 4 "
     "GPUs; QOS gpu2 allows 2 per user (MaxTRESPU gres/gpu=2); SLURM there does not enforce QOS limits"),
], ids=["an account not yours", "over a QOS limit"])
def test_the_same_requests_on_a_lenient_site_are_said_and_run(release, release_cluster, tmp_path, hpcjax_home,
                                                              options, note):
    args = [*options] + ([] if "--gpus-per-node" in options else ["--nodes", "1", "--gpus-per-node", "1"])
    done = hpcjax_on(release, "submit", *args, "--wait", "--", "true", cwd=tmp_path)
    assert done.returncode == 0 and note in done.stderr, done.stderr
    state = json.loads(hpcjax_on(release, "status", done.stdout.split()[0], "--json", cwd=tmp_path).stdout)["state"]
    assert state == "COMPLETED"  # as plain sbatch runs it there


API_PROGRAM = """
import sys, hpcjax
from hpcjax.values.errors import HpcjaxError

@hpcjax.remote(nodes=1, gpus_per_node=1, time="00:05:00", storage_path=sys.argv[2], **({{"account": sys.argv[1]}}
               if sys.argv[1] else {{}}))
def where():
    import os
    return os.environ["SLURM_JOB_ACCOUNT"]

try:
    print("ran under", where())
except HpcjaxError as error:
    print("refused:", error.message.splitlines()[0], "| hint:", error.hint)
"""


@pytest.mark.parametrize("release", [STRICT])
def test_the_python_api_is_refused_in_words_or_runs_under_its_account(release, release_cluster, shared_storage,
                                                                      hpcjax_home):
    program = shared_storage / "api_program.py"
    program.write_text(API_PROGRAM.format())
    before = queue_size()
    refused = on_release(STRICT, sys.executable, str(program), "", str(shared_storage / "calls"), cwd=shared_storage)
    assert "refused: sbatch --test-only refused the job (G1N1p1): sbatch: error: this site needs an account" \
           in refused.stdout, refused.stdout + refused.stderr
    assert "hint: the site's own submit rules refused the job" in refused.stdout and queue_size() == before
    ran = on_release(STRICT, sys.executable, str(program), "physics", str(shared_storage / "calls"),
                     cwd=shared_storage, timeout=300)
    assert "ran under physics" in ran.stdout, ran.stdout + ran.stderr[-2000:]


@pytest.mark.parametrize("release", [STRICT])
def test_an_agent_meets_the_sites_refusal_in_its_words_and_then_runs_with_what_it_asks(release, release_cluster,
                                                                                       tmp_path, hpcjax_home):
    """`hpcjax mcp` on the strict site's login side, driven by the MCP SDK's client: a job without an
    account is the site's refusal with hpcjax's hint, nothing queued; with the account it runs."""
    import time

    import anyio
    from mcp_client import drive

    async def steps(call, session):
        queued = queue_size()
        refused = await call("submit", nodes=1, gpus_per_node=1, command=["true"])
        left = queue_size() - queued
        done = await call("submit", nodes=1, gpus_per_node=1, account="physics", time="00:05:00", command=["true"])
        job, state, deadline = done[1]["stdout"].split()[0], "", time.monotonic() + 60
        while state != "COMPLETED" and time.monotonic() < deadline:
            state = json.loads((await call("status", job_id=job, json=True))[1]["stdout"])["state"]
            await anyio.sleep(0.5)
        return refused, left, done, state

    (text, structured, failed), left, done, state = drive(
        tmp_path, steps, server=["bash", str(ON), STRICT, "--", sys.executable, "-m", "hpcjax", "mcp"])
    assert failed and structured["exit_code"] == 1 and left == 0, text
    assert "this site needs an account on every job: give --account" in text, text
    assert "hint: the site's own submit rules refused the job" in text, text
    assert not done[2], done[0]
    assert state == "COMPLETED"
