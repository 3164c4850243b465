"""SLURM's pending reasons and the job states the dev cluster never produces, read as hpcjax reads
them: squeue lines and sacct rows in SLURM's formats (the field lists hpcjax asks for), written
here from squeue's and sacct's man pages (JOB REASON CODES, JOB STATE CODES): not captured from a
real cluster, which this machine cannot reach. A stand-in host answers; the dev cluster's own
reasons (None, Resources, Priority, PartitionConfig) are met for real in the cluster tests."""

from __future__ import annotations

import pytest

from hpcjax.hosts import this_machine
from hpcjax.values.errors import SubmitError
from hpcjax.slurm import reasons
from hpcjax.slurm.controller import Slurm
from hpcjax.slurm.job import SlurmRun

from test_slurmctl import FakeHost


def pending(reason: str, start: str = "N/A") -> str:
    return f"500|train|PENDING|{reason}||0:00|{start}\n"


@pytest.mark.parametrize("reason, words, change, never", [
    ("Resources", "it waits for the nodes and GPUs it asked for to be free (Resources)", "hpcjax free", False),
    ("Priority", "jobs of higher priority are ahead of it (Priority)", "shorter --time", False),
    ("QOSMaxGRESPerUser", "your QOS's limit of GPUs (GRES) per user is reached (QOSMaxGRESPerUser)",
     "sacctmgr show qos", False),
    ("AssocGrpGRES", "your account's limit of GPUs (GRES) (all its jobs together) is reached (AssocGrpGRES)",
     "ask for fewer GPUs", False),
    ("QOSMaxGRESPerJob", "more GPUs (GRES) than your QOS's limit per job: it can never start", "fewer GPUs", True),
    ("QOSMaxWallDurationPerJobLimit", "more run time than your QOS's limit per job", "a shorter --time", True),
    ("PartitionTimeLimit", "its --time is over its partition's limit: it can never start", "sinfo -o", True),
    ("ReqNodeNotAvail, UnavailableNodes:gpu[07-08]", "a node it needs is down, drained or reserved "
     "(ReqNodeNotAvail, UnavailableNodes:gpu[07-08])", "--exclude", True),
    ("Dependency", "it waits for the job it runs after (--after) (Dependency)", "", False),
    ("JobArrayTaskLimit", "the sweep's --max-parallel elements are running", "", False),
    ("SomethingNewer", "SLURM's reason SomethingNewer (see `man squeue`, JOB REASON CODES)", "", False),
])
def test_a_pending_reason_is_said_in_words_with_what_to_change(reason, words, change, never):
    to_change = reasons.explain(reason)[1]
    assert words in reasons.in_words(reason)
    assert change in to_change if change else to_change == ""
    assert reasons.never_starts(reason) is never


def test_the_expected_start_and_the_reason_reach_the_followers_line_and_status():
    host = FakeHost(lambda argv: (0, pending("Resources", "2026-11-27T14:05:00")) if argv[0] == "squeue" else (0, ""))
    slurm = Slurm(host)
    status = slurm.job_status("500")
    assert status.start == "2026-11-27T14:05:00"
    assert status.describe().splitlines() == [
        "job 500 (train): PENDING: it waits for the nodes and GPUs it asked for to be free (Resources); "
        "SLURM expects it to start at 2026-11-27 14:05:00",
        "  to start sooner: " + reasons.explain("Resources")[1]]


def test_no_estimate_is_no_start_said():
    host = FakeHost(lambda argv: (0, pending("Priority")) if argv[0] == "squeue" else (0, ""))
    status = Slurm(host).job_status("500")
    assert status.start == "" and "expects" not in status.describe()


def test_a_job_over_a_per_job_limit_is_cancelled_at_once_with_the_reason_in_words(monkeypatch, tmp_path):
    host = FakeHost(lambda argv: (0, pending("QOSMaxGRESPerJob")) if argv[0] == "squeue" else
                    (0, "gpu 2 nodes, 8 CPUs, gres gpu:4\n") if argv[0] == "sinfo" else (0, ""))
    host.files = this_machine().files  # the job's logs: none yet
    monkeypatch.setattr("hpcjax.slurm.controller._by_host", {host.key: Slurm(host)})
    monkeypatch.setattr("hpcjax.hosts.cluster.Cluster.host", lambda self: host)
    run = SlurmRun("500", tmp_path, 1)
    with pytest.raises(SubmitError) as refused:
        run.poll()
    assert ["scancel", "500"] in host.commands
    text = str(refused.value)
    assert "can never start: SLURM holds it with reason QOSMaxGRESPerJob (it asks for more GPUs (GRES) than " \
           "your QOS's limit per job); it was cancelled" in text, text
    assert "ask for fewer GPUs (GRES)" in text and "the cluster has: gpu 2 nodes" in text


# sacct -P rows in the fields hpcjax asks for: JobID|JobName|State|ExitCode|Elapsed|NodeList|NTasks|Reason|WorkDir
ENDED = {
    "PREEMPTED": ("501|train|PREEMPTED|0:15|01:00:00|gpu[01-02]||None|/w\n", 143),
    "NODE_FAIL": ("502|train|NODE_FAIL|0:0|00:10:00|gpu[01-02]||None|/w\n", 1),
    "BOOT_FAIL": ("503|train|BOOT_FAIL|0:0|00:00:00|gpu01||None|/w\n", 1),
    "OUT_OF_MEMORY": ("504|train|OUT_OF_MEMORY|0:125|00:02:00|gpu01||None|/w\n", 125),
    "DEADLINE": ("505|train|DEADLINE|0:0|00:00:00|None assigned||None|/w\n", 1),
}


@pytest.mark.parametrize("state", sorted(ENDED))
def test_states_that_end_a_job_are_read_as_its_end(state):
    row, _ = ENDED[state]
    job = row.split("|")[0]
    host = FakeHost(lambda argv: (1, "slurm_load_jobs error: Invalid job id specified") if argv[0] == "squeue"
                    else (0, row))
    status = Slurm(host).job_status(job)
    assert status.state == state and status.finished


@pytest.mark.parametrize("queue_line, state", [
    ("506|train|REQUEUE_HOLD|JobHeldUser||0:00|N/A\n", "REQUEUE_HOLD"),
    ("507|train|SPECIAL_EXIT|JobHeldUser||0:00|N/A\n", "SPECIAL_EXIT"),
    ("508|train|REQUEUED|BeginTime||0:00|N/A\n", "REQUEUED"),
])
def test_states_a_job_waits_in_are_not_its_end(queue_line, state):
    host = FakeHost(lambda argv: (0, queue_line) if argv[0] == "squeue" else (0, ""))
    status = Slurm(host).job_status(queue_line.split("|")[0])
    assert status.state == state and not status.finished


def test_an_arrays_pending_range_answers_for_each_pending_element():
    """squeue -r lists pending elements one by one; sacct keeps one row for the pending range."""
    host = FakeHost(lambda argv: (0, "741_0|sweep|RUNNING|None|node1|0:10|2026-11-27T04:00:00\n"
                                     "741_1|sweep|PENDING|JobArrayTaskLimit||0:00|N/A\n"
                                     "741_2|sweep|PENDING|JobArrayTaskLimit||0:00|N/A\n")
                    if argv[0] == "squeue" else (0, "741_[1-2%1]|sweep|PENDING|0:0|00:00:00|None assigned||"
                                                     "JobArrayTaskLimit|/w\n741_0|sweep|RUNNING|0:0|00:00:10|node1|||/w\n"))
    slurm = Slurm(host)
    for element in ("741_0", "741_1", "741_2"):
        slurm.watcher.follow(element)
    assert [slurm.job_status(e).state for e in ("741_0", "741_1", "741_2")] == ["RUNNING", "PENDING", "PENDING"]
    assert "--max-parallel" in slurm.job_status("741_2").describe()


def test_a_reason_that_is_hpcjaxs_own_words_is_shown_as_it_is():
    """A job queued in a hold is PENDING with where it waits, in words: not one of SLURM's codes."""
    said = "queued in hold dev (job 1234, running)"
    assert reasons.in_words(said) == said and reasons.explain(said) == (said, "")
    assert not reasons.never_starts(said)
