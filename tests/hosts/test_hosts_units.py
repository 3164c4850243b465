"""The laptop side's rules, one function at a time (the whole path runs for real, over sshd,
in test_remote_cluster.py)."""

from __future__ import annotations

import argparse
import os
import subprocess

import pytest

from hpcjax.catalog import records
from hpcjax.values.errors import ConfigError, HpcjaxError, UsageError
from hpcjax.hosts import ship
from hpcjax.hosts.cluster import Cluster
from hpcjax.hosts.ssh import explain
from hpcjax.protocol.rundir import run_dir_argument


def test_a_job_on_a_cluster_has_its_own_record_and_an_ambiguous_id_asks_for_the_cluster(hpcjax_home):
    from hpcjax.launch import attach

    assert records.key("42") == "42" and records.key("42", "me@login.example.org") == "42@me_login.example.org"
    for destination in ("alpha", "beta"):
        records.save(records.key("42", destination), {"backend": "slurm", "output_dir": "/x",
                                                      "cluster": Cluster(destination).as_record()})
    assert records.remote_keys("42") == ["42@alpha", "42@beta"]
    assert records.load("42@alpha")["job_id"] == "42"
    with pytest.raises(UsageError, match=r"job 42 was submitted to more than one cluster \(alpha, beta\)") as err:
        attach("42")
    assert "--cluster" in err.value.hint


@pytest.mark.parametrize("command, found", [
    (["python3", "-m", "hpcjax", "train", "--run-dir", "runs/a"], "runs/a"),
    (["python3", "fit.py", "--run-dir=/scratch/r"], "/scratch/r"),
    (["python3", "fit.py", "--run-dir"], None),
    (["python3", "fit.py"], None),
])
def test_the_run_directory_a_command_names(command, found):
    assert run_dir_argument(command) == found


def profile_args(tmp_path, cluster: str | None, text: str) -> argparse.Namespace:
    path = tmp_path / "profiles.toml"
    path.write_text(text)
    return argparse.Namespace(cluster=cluster, profile_file=str(path), remote_dir=None)


def test_cluster_is_a_profile_that_names_a_host_or_else_a_destination(tmp_path):
    from hpcjax.cli.reach import cluster_from_args

    text = ('[profiles.site]\nhost = "me@login"\nremote_dir = "$SCRATCH/h"\nssh_options = ["-F", "cfg"]\n'
            '[profiles.nohost]\npartition = "gpu"\n')
    site = cluster_from_args(profile_args(tmp_path, "site", text))
    assert (site.destination, site.remote_dir, site.ssh_options) == ("me@login", "$SCRATCH/h", ("-F", "cfg"))
    assert cluster_from_args(profile_args(tmp_path, "login.example.org", text)).destination == "login.example.org"
    assert cluster_from_args(profile_args(tmp_path, None, text)) == Cluster()  # this machine, as a value
    with pytest.raises(UsageError, match="the profile 'nohost' names no host"):
        cluster_from_args(profile_args(tmp_path, "nohost", text))
    with pytest.raises(ConfigError, match="ssh_options must be a list of strings"):
        cluster_from_args(profile_args(tmp_path, "site", '[profiles.site]\nhost = "h"\nssh_options = "-F x"\n'))


@pytest.mark.parametrize("fields, said", [
    (dict(destination="-oProxyCommand=x"), "invalid cluster"),
    (dict(destination="two words"), "invalid cluster"),
    (dict(destination="h", remote_dir="$(rm -rf ~)"), "characters hpcjax will not pass to a shell"),
])
def test_a_cluster_that_could_inject_into_ssh_or_a_shell_is_refused(fields, said):
    with pytest.raises(UsageError, match=said.replace("(", r"\(")):
        Cluster(**fields)


@pytest.mark.parametrize("stderr, what", [
    ("ssh: Could not resolve hostname nosuch: Name or service not known", "the host is unknown"),
    ("ssh: connect to host 127.0.0.1 port 1: Connection refused", "the connection was refused"),
    ("me@h: Permission denied (publickey).", "authentication failed"),
    ("Host key verification failed.", "the host key is not known or has changed"),
    ("something else entirely", "ssh failed (something else entirely)"),
])
def test_what_openssh_said_becomes_one_line_and_a_hint(stderr, what):
    said, hint = explain(stderr, "site")
    assert said == what and hint


def test_the_tree_is_what_git_would_commit_less_hpcjaxignore_and_a_big_one_is_refused_before_sending(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("ignored/\n")
    (tmp_path / ".hpcjaxignore").write_text("# data travels with --upload\n*.npy\n")
    for name, size in (("train.py", 10), ("ignored/x.txt", 10), ("data/big.npy", 10), ("data/notes.md", 10),
                       ("weights.bin", 3_000_000)):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"x" * size)
    names = ship.tree_files(tmp_path)
    assert names == [".gitignore", ".hpcjaxignore", "data/notes.md", "train.py", "weights.bin"]
    with pytest.raises(HpcjaxError, match=r"weights.bin") as err:
        ship.check_size(tmp_path, names, limit_mb=2)
    assert ".hpcjaxignore" in err.value.hint
    assert ship.check_size(tmp_path, names, limit_mb=5) > 3_000_000


def test_without_git_the_tree_is_every_file_less_what_is_left_out_and_left_out_directories_are_not_walked(
        tmp_path, monkeypatch):
    """.hpcjaxignore's patterns as .gitignore's plain ones: a name without a slash at any depth (a
    trailing one: a directory), one with a slash from the tree's root."""
    (tmp_path / ".hpcjaxignore").write_text("# data travels with --upload\ndata/\n*.json\nraw\n/top\nsub/x/\n")
    for name in ("train.py", "data/big.npy", "data/deep/x.txt", "sub/data/y.txt", "notes/raw/z.txt", "notes/raw",
                 "runs/a/ck/1.bin", "runs/b/metrics.json", "runs/b/kept.txt", ".git/HEAD", "back/log.txt",
                 "top/a.txt", "sub/top/kept.txt", "sub/x/y.txt", "sub/y/x/kept.txt", "notes/data"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        if not (tmp_path / name).is_dir():
            (tmp_path / name).write_text("x")
    ship.mark_fetched(tmp_path / "back")
    walked = []
    real_walk = os.walk
    monkeypatch.setattr(ship.os, "walk", lambda top: ((walked.append(here) or (here, dirs, files))
                                                      for here, dirs, files in real_walk(top)))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "no-such-git"))  # git, if installed, finds no repository
    assert ship.tree_files(tmp_path, ("runs/a",)) == [".hpcjaxignore", "notes/data", "runs/b/kept.txt",
                                                       "sub/top/kept.txt", "sub/y/x/kept.txt", "train.py"]
    (tmp_path / ".hpcjaxignore").write_text("data/\n!data/keep.txt\n")
    with pytest.raises(UsageError, match=r"\.hpcjaxignore:2: '!data/keep.txt': .* is not read") as refused:
        ship.tree_files(tmp_path)
    assert "remove the line" in refused.value.hint
    seen = {os.path.relpath(here, tmp_path) for here in walked}
    assert seen.isdisjoint({"data", "data/deep", "sub/data", "notes/raw", "runs/a", "runs/a/ck", ".git", "top",
                            "sub/x"}) and {"sub", "sub/top", "sub/y/x"} <= seen
    assert "back" in seen  # its mark is found there; nothing of it is shipped


def test_uploads_are_named_as_given_stored_by_name_and_content_and_refuse_what_would_mislead(tmp_path):
    """Issue 34: two directories of the same files both uploaded left the second name dangling;
    --upload '' shipped the whole working directory; a link named ./data was uploaded under its
    target's name; links inside that lead out would reach the cluster's files."""
    from hpcjax.launch.uploads import parse_upload

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.txt").write_text("same bytes\n")
    assert ship.content_digest(tmp_path / "a") != ship.content_digest(tmp_path / "b")
    (tmp_path / "a2").mkdir()
    (tmp_path / "a2" / "x.txt").write_text("same bytes\n")
    elsewhere = tmp_path / "elsewhere" / "a"
    elsewhere.mkdir(parents=True)
    (elsewhere / "x.txt").write_text("same bytes\n")
    assert ship.content_digest(elsewhere) == ship.content_digest(tmp_path / "a")  # stored once
    for empty in ("", "  ", ":data"):
        with pytest.raises(UsageError, match="names no directory|does not exist"):
            parse_upload(empty, cwd=tmp_path)
    external = tmp_path.parent / f"{tmp_path.name}-external-mnist"
    external.mkdir(exist_ok=True)
    (external / "train.bin").write_bytes(b"\1" * 10)
    (tmp_path / "data").symlink_to(external)
    import os

    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        path, name = parse_upload("./data", cwd=tmp_path)
        assert (path, name) == (external.resolve(), "data")  # the job opens ./data, as on the laptop
        (tmp_path / "a" / "etc").symlink_to("/etc")
        (tmp_path / "a" / "inside").symlink_to("x.txt")  # a link within: kept as a link
        with pytest.raises(UsageError, match=r"1 entry leads outside it: etc -> /etc"):
            parse_upload("./a", cwd=tmp_path)
    finally:
        os.chdir(here)


def test_relative_run_dirs_are_kept_beside_the_snapshots_and_fetched_runs_never_ship(tmp_path, monkeypatch):
    from hpcjax.launch.uploads import relative_run_dirs
    from hpcjax.job.spec import JobSpec

    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    spec = JobSpec(command=("hpcjax", "train", "--run-dir", "runs/a"))
    assert relative_run_dirs(spec, tmp_path) == {"runs/a": "sub/runs/a"}
    for named in ("/scratch/r", "../../elsewhere", "$SCRATCH/r", "."):
        assert relative_run_dirs(JobSpec(command=("x", f"--run-dir={named}")), tmp_path) == {}
    swept = JobSpec(command=("x",), array=2, array_commands=(("x", "--run-dir", "r/1"), ("x", "--run-dir", "r/2")))
    assert relative_run_dirs(swept, tmp_path) == {"r/1": "sub/r/1", "r/2": "sub/r/2"}
    (tmp_path / "sub" / "runs" / "a").mkdir(parents=True)
    (tmp_path / "sub" / "runs" / "a" / "metrics.jsonl").write_text("{}\n")
    (tmp_path / "train.py").write_text("")
    back = tmp_path / "sub" / "hpcjax-job-7" / "logs"
    back.mkdir(parents=True)
    (back / "7-rank0.log").write_text("x")
    ship.mark_fetched(back)
    assert ship.tree_files(tmp_path, ("sub/runs/a",)) == ["train.py"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # git leaves it out by its .gitignore
    assert ship.tree_files(tmp_path, ("sub/runs/a",)) == ["train.py"]


def test_a_query_started_early_answers_the_same_command_once_and_only_while_fresh(monkeypatch):
    """hosts.here.start_early (`hpcjax status` starts its poll's queries before its imports): the first
    run of the same argv takes the early answer; the next one, another argv, one given input, or an
    answer older than EARLY_FRESH_S runs anew."""
    import sys
    import time

    from hpcjax.hosts import here

    clock = [sys.executable, "-c", "import time; print(time.time())"]
    host = here.LocalHost()
    here.start_early(clock)
    time.sleep(0.5)
    asked = time.time()
    early = float(host.run(clock).stdout)
    assert early < asked and here._early == {}
    assert float(host.run(clock).stdout) > asked  # taken once: the next run is its own
    here.start_early(clock)
    assert host.run([sys.executable, "-c", "print('other')"]).stdout == "other\n"  # another argv: its own run
    here.start_early(["cat"])
    assert host.run(["cat"], input="given").stdout == "given"  # a run given input is its own too
    monkeypatch.setattr(here, "EARLY_FRESH_S", 0.0)
    asked = time.time()
    assert float(host.run(clock).stdout) > asked  # too old to stand for a query asked now
    assert host.run(["cat"], input="x").stdout == "x" and set(here._early) == {("cat",)}
    here._early.pop(("cat",))[1].kill()


def test_an_early_query_that_cannot_start_leaves_the_run_to_say_why():
    from hpcjax.hosts import here

    here.start_early(["no-such-program-here"])
    assert here._early == {}
    done = here.LocalHost().run(["no-such-program-here"])
    assert done.returncode == here.NOT_FOUND and "command not found" in done.stderr
