"""`hpcjax site --check` on the dev cluster (issue 45): the acceptance check a user runs once, for
real: the profile `hpcjax site` wrote, the Charliecloud test image, real smokes of both layouts on 2
nodes, a preflight, a plain JAX script's exit, logs, stacks (py-spy on the nodes) and cancel. The
page is loaded by headless Chromium. Then the same with an image that is not there: every check
that needs it fails with the hint hpcjax gives, and the exit status says so."""

from __future__ import annotations

import json
import subprocess

from conftest import SHARED_MACHINE_PROFILE, run_hpcjax
from pages.test_report import chromium


def test_the_acceptance_check_passes_on_the_dev_cluster_and_its_page_says_so(shared_storage, slurm_cluster,
                                                                             charliecloud_image, hpcjax_home):
    profiles = shared_storage / "profiles.toml"
    learnt = run_hpcjax("site", "--no-node", "--name", "dev", "--profile-file", str(profiles), cwd=shared_storage)
    assert learnt.returncode == 0, learnt.stderr
    # Two of each node's four GPUs, as a user may edit the profile: the check's five jobs then share the
    # dev cluster with CI's other tests (taking all eight, each queued until every other job had
    # ended: 315 s of CI 36, 213 s of it waiting). The 2 x 4 layout is proven on its own elsewhere
    # (tests/rank/test_runtime_cluster.py, tests/hosts/test_remote_cluster.py).
    # The preflight's ratio held low in the profile (conftest.SHARED_MACHINE_ENV says why).
    written = profiles.read_text()
    assert "\ngpus_per_node = 4" in written, written
    profiles.write_text(written.replace("\ngpus_per_node = 4", "\ngpus_per_node = 2\n" + SHARED_MACHINE_PROFILE))
    done = run_hpcjax("site", "--check", "--profile", "dev", "--profile-file", str(profiles), "--image",
                      charliecloud_image, "--runtime", "charliecloud", "--json", cwd=shared_storage, timeout=1200)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    verdicts = {r["check"]: r["verdict"] for r in found["results"]}
    assert verdicts == {"smoke, one process per GPU": "passed", "smoke, one process per node": "passed",
                        "container": "passed", "preflight": "passed", "an unmodified script's exit": "passed",
                        "logs, stacks, cancel": "passed"}, done.stderr
    details = {r["check"]: r["detail"] for r in found["results"]}
    assert details["smoke, one process per GPU"] == "4 of 4 ranks passed"
    assert details["smoke, one process per node"] == "2 of 2 ranks passed"
    assert details["preflight"].startswith("2 node(s), 4 device(s), passed in")
    assert "program's own status 3" in details["an unmodified script's exit"]
    assert f"charliecloud with {charliecloud_image}" in details["container"]
    dom = loaded(shared_storage / "hpcjax-check.html")
    assert 'data-failed="0" data-checks="6"' in dom and "hpcjax works here: 6 of 6 checks passed" in dom


def test_an_image_that_is_not_there_is_refused_before_any_job(shared_storage, slurm_cluster, hpcjax_home):
    """Issue 63: it ran every check (five "submitting" lines, nothing submitted) before; now submit's
    own checks are asked once, first: no job, no page, no probe folder."""
    done = run_hpcjax("site", "--check", "--gpus-per-node", "2", "--image", str(shared_storage / "no-such-image"),
                      "--runtime", "charliecloud", "--page", "page.html", cwd=shared_storage, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: the check's jobs would be refused: image ") and "no-such-image" in done.stderr
    assert "submitting" not in done.stderr and done.stdout == ""
    assert not (shared_storage / "page.html").exists() and not (shared_storage / "hpcjax-check").exists()
    assert json.loads(run_hpcjax("runs", "--json").stdout) == []


def test_jobs_that_all_fail_at_once_end_the_check_with_each_cause_not_a_silent_wait(shared_storage, slurm_cluster,
                                                                                  hpcjax_home):
    """Issue 63: a runtime the nodes do not have (apptainer: an image file that is here, a runtime
    that is not on the nodes) fails every job at once. The check waited up to 900 + 120 s for the
    logs job to reach RUNNING, silent after "logs, stacks, cancel: submitting"; now a job that has
    ended ends the wait, with its state and its cause."""
    image = shared_storage / "image.sif"
    image.write_text("not an image: the nodes have no apptainer to try it\n")
    done = run_hpcjax("site", "--check", "--gpus-per-node", "2", "--image", str(image), "--runtime", "apptainer",
                      "--page", "page.html", "--json", cwd=shared_storage, timeout=600)
    assert done.returncode == 1, done.stderr
    found = {r["check"]: r for r in json.loads(done.stdout)["results"]}
    assert {check: r["verdict"] for check, r in found.items()} == dict.fromkeys(found, "failed"), done.stderr
    logs = found["logs, stacks, cancel"]["detail"]
    assert " ended FAILED before it printed its line: " in logs, logs
    for check in ("smoke, one process per GPU", "logs, stacks, cancel"):  # the job's own cause, not an empty log's
        assert "apptainer is not installed on " in found[check]["detail"], found[check]
    assert 'data-failed="6" data-checks="6"' in loaded(shared_storage / "page.html")


def loaded(page) -> str:
    dom = subprocess.run(chromium() + ["--virtual-time-budget=2000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert "<table>" in dom.stdout, dom.stderr[-2000:]
    return dom.stdout
