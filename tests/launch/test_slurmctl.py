"""Asking SLURM about jobs: ids, and what squeue and sacct say (answered by a stand-in host
here, counting the commands; the cluster tests ask for real)."""

import subprocess

import pytest

from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.slurm.controller import Slurm, check_job_id


class FakeHost:
    """A host whose SLURM answers from a table and remembers every command it was given."""

    name, key, remote = "a stand-in host", "fake", False

    def __init__(self, answers):
        self.answers, self.commands = answers, []

    def which(self, program):
        return True

    def run(self, argv, *, input=None, timeout=None):
        self.commands.append(argv)
        code, out = self.answers(argv)
        return subprocess.CompletedProcess(argv, code, out if code == 0 else "", "" if code == 0 else out)

    def count(self, program):
        return sum(argv[0] == program for argv in self.commands)


@pytest.mark.parametrize("bad", ["12a", "", "1;rm", "-1"])
def test_job_ids_are_numbers(bad):
    with pytest.raises(UsageError):
        check_job_id(bad)


FORGOTTEN = (1, "slurm_load_jobs error: Invalid job id specified")


def test_status_of_a_job_the_controller_has_forgotten_comes_from_accounting():
    """After MinJobAge squeue says 'Invalid job id'; sacct still knows the job."""
    host = FakeHost(lambda argv: FORGOTTEN if argv[0] == "squeue" else (0, (
        "7|train|COMPLETED|0:0|00:01:02|node[1-2]||None|/work\n7.0|python|COMPLETED|0:0|00:01:01|node[1-2]|8||\n")))
    status = Slurm(host).job_status("7")
    assert (status.state, status.name, status.nodelist, status.workdir) == ("COMPLETED", "train", "node[1-2]", "/work")
    assert status.steps[0]["NTasks"] == "8"


def test_unknown_job_is_a_clear_error():
    host = FakeHost(lambda argv: FORGOTTEN if argv[0] == "squeue" else (0, ""))
    with pytest.raises(HpcjaxError, match="SLURM knows no job 99"):
        Slurm(host).job_status("99")


def sacct_rows(job_ids):
    return "".join(f"{j}|job{j}|RUNNING|0:0|00:00:05|node1|||/w\n" for j in job_ids)


def test_a_hundred_followed_jobs_cost_one_squeue_and_one_sacct_per_poll():
    """Like submitit's InfoWatcher: every job being followed is asked about in one query."""
    ids = [str(1000 + i) for i in range(100)]
    host = FakeHost(lambda argv: (0, "".join(f"{j}|job{j}|RUNNING|None|node1|0:05|2026-11-27T04:00:00\n" for j in ids))
                    if argv[0] == "squeue" else (0, sacct_rows(ids)))
    slurm = Slurm(host)
    for job_id in ids:
        slurm.watcher.follow(job_id)
    states = {slurm.job_status(j).state for j in ids}
    assert states == {"RUNNING"}
    assert (host.count("squeue"), host.count("sacct")) == (1, 1)
    [squeue] = [argv for argv in host.commands if argv[0] == "squeue"]
    assert squeue[squeue.index("-j") + 1] == ",".join(ids)  # every job in the one query


def test_array_elements_are_asked_for_by_their_array_and_read_back_by_element():
    host = FakeHost(lambda argv: (0, "55_0|sweep|COMPLETED|None|node1|0:03|2026-11-27T04:00:00\n55_1|sweep|RUNNING|None|node2|0:03|2026-11-27T04:00:00\n")
                    if argv[0] == "squeue" else (0, "55_0|sweep|COMPLETED|0:0|00:00:03|node1|||/w\n"
                                                    "55_0.0|python|COMPLETED|0:0|00:00:03|node1|2||\n"))
    slurm = Slurm(host)
    slurm.watcher.follow("55_0")
    assert slurm.job_status("55_1").state == "RUNNING"
    done = slurm.job_status("55_0")
    assert (done.state, [s["JobID"] for s in done.steps]) == ("COMPLETED", ["55_0.0"])
    [squeue] = [argv for argv in host.commands if argv[0] == "squeue"]
    assert squeue[squeue.index("-j") + 1] == "55" and "-r" in squeue


def test_a_job_that_ended_for_good_is_not_asked_about_again():
    state = {"7": "RUNNING"}
    host = FakeHost(lambda argv: FORGOTTEN if argv[0] == "squeue" else (0, f"7|t|{state['7']}|0:0|1|n1|||/w\n"))
    slurm = Slurm(host)
    slurm.watcher.fresh_s = 0  # every call is a new poll
    assert slurm.job_status("7").state == "RUNNING"
    state["7"] = "COMPLETED"
    assert slurm.job_status("7").state == "COMPLETED"
    before = len(host.commands)
    assert slurm.job_status("7").state == "COMPLETED"
    assert len(host.commands) == before  # final: answered from memory


def test_without_accounting_the_controller_answers_and_it_is_said_once(capsys, monkeypatch):
    monkeypatch.setattr("hpcjax.slurm.controller.QUERY_BACKOFF_S", 0.0)  # sacct is retried: not slowly here
    def answers(argv):
        if argv[0] == "sacct":
            return 1, "sacct: error: Problem talking to the database: Connection refused"
        if argv[0] == "squeue":
            return 0, "8|t|RUNNING|None|node1|0:05|2026-11-27T04:00:00\n"
        return 0, "JobId=8 JobName=t JobState=RUNNING ExitCode=0:0 RunTime=00:00:05 NodeList=node1 WorkDir=/w"

    slurm = Slurm(FakeHost(answers))
    slurm.watcher.fresh_s = 0
    assert slurm.job_status("8").state == "RUNNING"
    assert slurm.job_status("8").workdir == "/w"
    assert capsys.readouterr().err.count("accounting is unavailable") == 1


def test_an_element_absent_beside_its_array_was_cancelled_while_pending():
    """Issue 44: SLURM keeps no row of an array element cancelled while it was pending (squeue drops
    it, accounting only had the array's pending row "741_[1-2%1]"): said as cancelled, not unknown."""
    from hpcjax.slurm.status import CANCELLED_PENDING, status_of

    rows = [{"JobID": "741_0", "JobName": "x", "State": "RUNNING", "ExitCode": "0:0", "Elapsed": "", "NodeList": "n1",
             "Reason": "", "WorkDir": "/w", "NTasks": ""},
            {"JobID": "741_[1%1]", "JobName": "x", "State": "PENDING", "ExitCode": "0:0", "Elapsed": "",
             "NodeList": "", "Reason": "", "WorkDir": "/w", "NTasks": ""}]
    gone = status_of("741_2", None, rows, None, array_known=True)
    assert gone.state == "CANCELLED" and gone.finished and gone.reason == CANCELLED_PENDING
    for array_known, known_rows in ((False, rows), (True, None)):  # nothing to infer it from: unknown, said
        with pytest.raises(HpcjaxError, match="SLURM knows no job 741_2"):
            status_of("741_2", None, known_rows, {}, array_known=array_known)
    with pytest.raises(HpcjaxError, match="SLURM knows no job 741"):
        status_of("741", None, rows, None, array_known=True)  # the array's own id is no element


def test_a_sweeps_elements_are_found_by_its_array_id(tmp_path, monkeypatch):
    from hpcjax.catalog import records

    monkeypatch.setenv("HPCJAX_HOME", str(tmp_path))
    for key in ("741_10", "741_2", "741_0", "7410_1", "741", "741_1@login.example", "741_x"):
        (records.records_dir() / f"{key}.json").parent.mkdir(parents=True, exist_ok=True)
        (records.records_dir() / f"{key}.json").write_text("{}")
    assert records.element_ids("741") == ["741_0", "741_2", "741_10"]
    assert records.element_ids("741", "login.example") == ["741_1"]
    assert records.element_ids("74") == []


def test_an_id_squeue_cannot_read_does_not_hide_the_other_jobs_of_its_query():
    """squeue refuses a whole list for one id it cannot read as a job number (0, 4294967294 and up:
    seen on the dev cluster), and says so; the watcher asks again without it. A job just submitted
    beside such an id was once 'a job SLURM knows not' (CI, 2026-11-27)."""
    def answers(argv):
        if argv[0] == "squeue":
            asked = argv[argv.index("-j") + 1].split(",")
            for bad in ("0", "4294967295"):
                if bad in asked:
                    return 1, f"squeue: error: Invalid job id: {bad}"
            return 0, "".join(f"{j}|job{j}|PENDING|None||0:00|N/A\n" for j in asked)
        return 0, ""  # accounting has no row yet of a job just submitted
    host = FakeHost(answers)
    slurm = Slurm(host)
    for job_id in ("0", "4294967295"):
        slurm.watcher.follow(job_id)
    assert slurm.job_status("1290").state == "PENDING"
    for job_id in ("0", "4294967295"):
        with pytest.raises(HpcjaxError, match=f"SLURM knows no job {job_id}"):
            slurm.job_status(job_id)
    assert host.count("squeue") == 3  # one poll asked three times: all, without 0, without 4294967295


def test_a_refusal_that_names_no_asked_id_is_an_error_not_a_loop():
    host = FakeHost(lambda argv: (1, "squeue: error: Invalid job id: 12x") if argv[0] == "squeue" else (0, ""))
    with pytest.raises(HpcjaxError, match="Invalid job id: 12x"):
        Slurm(host).job_status("5")
