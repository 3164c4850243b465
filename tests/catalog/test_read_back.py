"""What hpcjax reads back that others may have written (issue 34, part 4; the list is in
docs/architecture.md, "What hpcjax reads back"). A job record names a cluster, never how to
reach it: the SSH options and the Python of a record, hostile or old, are never used."""

from __future__ import annotations

import json

import pytest

from hpcjax import launch
from hpcjax.catalog import records
from hpcjax.values.errors import UsageError
from hpcjax.hosts.cluster import Cluster
from hpcjax.job import clusters

HOSTILE = {"destination": "login.example.org", "remote_dir": "$HOME/hpcjax",
           "ssh_options": ["-oProxyCommand=touch /tmp/pwned-by-a-record"], "python": "/tmp/evil-python"}


def record(**more) -> dict:
    return {"backend": "slurm", "output_dir": "/shared/logs", "layout": {"nodes": 1, "gpus_per_node": 1,
                                                                          "gpus_per_process": 1}, **more}


def test_a_record_on_the_cluster_never_chooses_how_the_laptop_connects(monkeypatch, hpcjax_home):
    """`hpcjax status JOBID --cluster NAME` on a fresh laptop reads the record from the cluster."""
    mine = Cluster("login.example.org", ssh_options=("-F", "/home/me/.ssh/hpc_config"), python="python3.11")
    monkeypatch.setattr(records, "load_there", lambda cluster, job: record(cluster=HOSTILE))
    run = launch.attach("1234", mine)
    assert run.cluster is mine
    assert run.host.options == ("-F", "/home/me/.ssh/hpc_config")
    assert run.cluster.python == "python3.11"


def test_a_local_record_names_the_cluster_and_the_users_profile_says_how_to_reach_it(tmp_path, monkeypatch,
                                                                                   hpcjax_home):
    profile_file = tmp_path / "profiles.toml"
    profile_file.write_text('[profiles.hpc]\nhost = "login.example.org"\nssh_options = ["-p", "2222"]\n'
                            'python = "python3.12"\nremote_dir = "$SCRATCH/hj"\n')
    monkeypatch.setenv("HPCJAX_PROFILES", str(profile_file))
    records.save("77@login.example.org", record(cluster={**HOSTILE, "profile": "hpc"}))
    run = launch.attach("77")
    assert run.host.options == ("-p", "2222") and run.cluster.python == "python3.12"
    assert run.cluster.remote_dir == "$SCRATCH/hj"
    # A record without a profile (or whose profile now names another host): the destination alone.
    records.save("78@login.example.org", record(cluster=HOSTILE))
    bare = launch.attach("78")
    assert bare.host.options == () and bare.cluster.python == "python3"
    assert bare.cluster.destination == "login.example.org"


def test_a_record_naming_an_option_as_its_cluster_is_refused_not_run(hpcjax_home):
    records.save("79@x", record(cluster={"destination": "-oProxyCommand=touch /tmp/pwned"}))
    with pytest.raises(UsageError, match="invalid cluster"):
        launch.attach("79")


def test_what_a_record_keeps_of_a_cluster_is_its_name_and_place_not_how_to_reach_it():
    kept = Cluster("me@login", ssh_options=("-i", "/home/me/.ssh/key"), python="/opt/py/bin/python3",
                   profile="hpc").as_record()
    assert kept == {"destination": "me@login", "remote_dir": "$HOME/hpcjax", "profile": "hpc", "profile_file": None}
    assert "ssh" not in json.dumps(kept) and "python" not in json.dumps(kept)


def test_a_cluster_named_through_a_profile_remembers_the_profile(tmp_path):
    profile_file = tmp_path / "profiles.toml"
    profile_file.write_text('[profiles.hpc]\nhost = "me@login"\n')
    named = clusters.cluster_named("hpc", profile_file=profile_file)
    assert (named.profile, named.profile_file) == ("hpc", str(profile_file.resolve()))
    # what the record keeps finds the same cluster again, from the same file
    assert clusters.cluster_from_record(named.as_record()) == named
    assert clusters.cluster_named("me@login", profile_file=profile_file).profile is None
    with pytest.raises(UsageError, match="names no cluster"):
        clusters.cluster_named("", profile_file=profile_file)


def test_a_result_pickle_another_user_wrote_is_never_loaded(tmp_path):
    """A call's results are pickles (code): one in a shared storage_path that another user wrote is
    not unpickled; the caller gets the job's report instead of that user's code running."""
    import os
    import pickle
    import pwd

    from hpcjax.api import folder
    from hpcjax.api.calls import RemoteError, read_result
    from hpcjax.hosts.files import LocalFiles
    from hpcjax.follow.outcome import Outcome

    folder.element_dir(tmp_path, 0).mkdir(parents=True)
    planted = folder.result_path(tmp_path, 0, 0)
    planted.write_bytes(pickle.dumps(("success", "from someone else")))
    assert LocalFiles().read_own_bytes(str(planted)) is not None
    nobody = pwd.getpwnam("nobody")
    os.chown(planted, nobody.pw_uid, nobody.pw_gid)
    assert LocalFiles().read_own_bytes(str(planted)) is None
    with pytest.raises(RemoteError):
        read_result(tmp_path, 0, Outcome(job_id="9", state="COMPLETED", exit_code=0), LocalFiles())


def test_fetch_never_lands_a_run_above_its_target(tmp_path, hpcjax_home, monkeypatch):
    """A record (on the cluster: anyone who can write there) naming a run directory '/x/..'."""
    from conftest import run_hpcjax

    records.save("55", record(run_dir="/x/..", output_dir=str(tmp_path)))
    done = run_hpcjax("fetch", "55", "--to", str(tmp_path / "back"), cwd=tmp_path, env={"HPCJAX_HOME": str(hpcjax_home)})
    assert done.returncode == 2 and "has no name to fetch it under" in done.stderr, done.stderr


def test_a_local_record_without_its_layout_is_named_damaged_not_followed(hpcjax_home):
    """The local backend counts a job's ranks from its record's layout: a record without one (hand
    edited, or cut short) is refused with where it is, not followed with a guessed rank count."""
    records.save("81", {"backend": "local", "output_dir": "/tmp/logs", "pids": [1]})
    with pytest.raises(records.DamagedRecord, match="record of local job 81 .* has no layout"):
        launch.attach("81")
