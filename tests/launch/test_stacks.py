"""`hpcjax stacks` (issue 27, part 1): the node side finds a job's ranks by their environment
and reads them with py-spy (real processes here); the login side groups the stacks. The same
on the dev cluster, through `srun --overlap`: tests/launch/test_stacks_cluster.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import run_hpcjax
from hpcjax.follow import stacks
from hpcjax.protocol.stackgroups import groups
from hpcjax.rank.watch import stacks as node

PROGRAM = """
import os, sys, time
rank = int(os.environ["SLURM_PROCID"])
def wait_in_collective():
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
def stuck_in_loader():
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
print("rank", rank, "waits", flush=True)
stuck_in_loader() if rank == int(sys.argv[2]) else wait_in_collective()
print("rank", rank, "done", flush=True)
"""


def frame(name, line=1, file="t.py"):
    return {"name": name, "short_filename": file, "line": line}


def entry(rank, *names, host="n1"):
    return {"rank": rank, "host": host, "pid": 100 + rank,
            "threads": [{"thread_name": "MainThread", "frames": [frame(n, i) for i, n in enumerate(names)]},
                        {"thread_name": f"bg{rank}", "frames": [frame("poll")]}]}


def test_ranks_with_the_same_stack_are_one_group_and_the_odd_one_comes_first():
    entries = [entry(r, "all_reduce", "train_step") for r in (0, 1, 2, 4, 5, 6, 7)] + [entry(3, "sleep", "load")]
    entries.append({"rank": 8, "host": "n2", "error": "pid 9: Permission denied", "hint": "ptrace"})
    found = groups(entries)
    assert [ranks for ranks, _ in found] == [[3], [0, 1, 2, 4, 5, 6, 7]]
    text = stacks.report("42", entries, 1.25)
    assert text.index("ranks 3 (n1): sleep (t.py:0) <- load (t.py:1)") < text.index("ranks 0-2,4-7 (n1): all_reduce")
    assert "rank 8 on n2: pid 9: Permission denied\n  hint: ptrace" in text
    # --all: the background threads differ on every rank, so every rank is its own group
    assert len(groups(entries, all_threads=True)) == 8


def start_ranks(tmp_path, count, odd, env_of):
    (tmp_path / "p.py").write_text(PROGRAM)
    release = tmp_path / "release"
    procs = [subprocess.Popen([sys.executable, str(tmp_path / "p.py"), str(release), str(odd)],
                              env={**os.environ, **env_of(r)}, stdout=subprocess.PIPE, text=True)
             for r in range(count)]
    for p in procs:
        assert "waits" in p.stdout.readline()
    return procs, release


def test_the_node_side_finds_this_nodes_ranks_of_the_job_and_no_others(tmp_path, monkeypatch):
    def env_of(rank):  # two "nodes" on one host, as on the dev cluster; step 0 is the launch
        return {"SLURM_JOB_ID": "9001", "SLURM_PROCID": str(rank), "SLURM_STEP_ID": "0",
                "SLURMD_NODENAME": f"node{rank // 2 + 1}"}

    procs, release = start_ranks(tmp_path, 4, 1, env_of)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             env={**os.environ, "SLURM_JOB_ID": "9002", "SLURM_PROCID": "0", "SLURM_STEP_ID": "0"})
    try:
        monkeypatch.setenv("SLURMD_NODENAME", "node1")
        found = node.rank_processes("9001", own_step="7")
        assert {r: pids[0] for r, pids in found.items()} == {0: procs[0].pid, 1: procs[1].pid}
        lines = node.node_stacks("9001", "7")
        assert [(line["rank"], line["host"]) for line in lines] == [(0, "node1"), (1, "node1")]
        names = [[f["name"] for f in line["threads"][0]["frames"]] for line in lines]
        assert names == [["wait_in_collective", "<module>"], ["stuck_in_loader", "<module>"]]
        assert node.node_stacks("9001", "0")[0]["error"] == "no rank of job 9001 runs on node1"  # its own step
        monkeypatch.setenv("HPCJAX_PY_SPY", str(tmp_path / "nowhere"))
        [missing] = node.node_stacks("9001", "7")
        assert missing["error"] == "py-spy is not installed on node1" and "pip install py-spy" in missing["hint"]
    finally:
        release.touch()
        other.kill()
        for p in procs:
            p.wait(timeout=10)
    assert all(p.returncode == 0 for p in procs)  # read, never stopped


def test_stacks_of_a_local_job_grouped_and_the_job_ends_undisturbed(tmp_path):
    (tmp_path / "p.py").write_text(PROGRAM)
    env = {"HPCJAX_HOME": str(tmp_path / "home")}
    job = subprocess.Popen([sys.executable, "-m", "hpcjax", "submit", "--backend", "local", "--gpus-per-node", "4",
                            "--", sys.executable, "p.py", "release", "2"], cwd=tmp_path, env={**os.environ, **env},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    job_id = job.stdout.readline().strip()
    logs = tmp_path / "hpcjax-logs"
    deadline = time.monotonic() + 60
    while sum("waits" in p.read_text() for p in logs.glob("*-rank*.log")) < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    shown = run_hpcjax("stacks", job_id, cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "stacks of 4 rank(s) in 2 group(s)" in shown.stdout
    assert shown.stdout.index("ranks 2 (") < shown.stdout.index("ranks 0-1,3 (")
    assert "stuck_in_loader (p.py:" in shown.stdout
    one = json.loads(run_hpcjax("stacks", job_id, "--rank", "2", "--json", cwd=tmp_path, env=env).stdout)
    assert [r["rank"] for r in one["ranks"]] == [2]
    (tmp_path / "release").touch()
    assert job.wait(timeout=60) == 0, job.stderr.read()
    ended = run_hpcjax("stacks", job_id, cwd=tmp_path, env=env)
    assert ended.returncode == 1 and f"job {job_id} is COMPLETED, not running" in ended.stderr


def deep_entry(rank, host, depth=60):
    """A Trainer rank's stack: deep, with long file names (one JSON line of several kB)."""
    names = [f"frame_{i}_{'x' * 40}" for i in range(depth)]
    return {"rank": rank, "host": host, "pid": 100 + rank, "threads": [
        {"thread_name": "MainThread", "frames": [frame(n, i, f"site-packages/pkg/{'m' * 50}{i}.py")
                                                 for i, n in enumerate(names)]}]}


def srun_merged(senders: dict[str, list[str]], cut: int = 1024) -> str:
    """What srun's merged output of several tasks can look like: each task's output cut into
    pieces of at most `cut` bytes, the pieces of the tasks interleaved."""
    streams = {s: "".join(line + "\n" for line in lines) for s, lines in senders.items()}
    pieces = {s: [text[i:i + cut] for i in range(0, len(text), cut)] for s, text in streams.items()}
    out = []
    while any(pieces.values()):
        for sender in sorted(pieces):
            if pieces[sender]:
                out.append(pieces[sender].pop(0))
    return "".join(out)


def test_deep_stacks_cross_srun_whole_when_its_output_cuts_and_interleaves_lines():
    """The defect of issue 34: one JSON line per rank, cut by srun, failed to parse (a traceback)."""
    from hpcjax.values import jsonlines

    entries = {"node1": [deep_entry(r, "node1") for r in range(4)],
               "node2": [deep_entry(r, "node2") for r in range(4, 8)]}
    plain = srun_merged({s: [json.dumps(e) for e in es] for s, es in entries.items()})
    with pytest.raises(ValueError):  # what the old reader did with such output
        [json.loads(line) for line in plain.splitlines() if line.startswith("{")]
    framed = {s: [line for i, e in enumerate(es) for line in jsonlines.frame(e, s, i)] for s, es in entries.items()}
    assert max(len(line) for lines in framed.values() for line in lines) < 500  # never cut by srun
    whole, broken = jsonlines.unframe(srun_merged(framed, cut=10**6) + "srun: a line of srun's own\n")
    assert broken == [] and sorted(e["rank"] for e in whole) == list(range(8))
    assert whole[0] == entries["node1"][0]


def test_a_node_whose_frames_arrived_incomplete_is_named_not_a_traceback():
    from hpcjax.values import jsonlines

    good = jsonlines.frame(deep_entry(0, "node1"), "node1", 0)
    cut = jsonlines.frame(deep_entry(4, "node2"), "node2", 0)
    whole, broken = jsonlines.unframe("\n".join(good + cut[:-1] + [cut[-1][:-5] + "!!!"]))
    assert [e["rank"] for e in whole] == [0] and broken == ["node2"]
    assert jsonlines.objects('{"a": 1}\n{"a": 2\nnot json\n[1]\n{"b": 3}') == [{"a": 1}, {"b": 3}]


def test_the_node_side_sends_its_answer_as_frames(monkeypatch, capsys):
    monkeypatch.setattr(node, "node_stacks", lambda job, step, native=False: [deep_entry(1, "node1")])
    monkeypatch.setenv("SLURMD_NODENAME", "node1")
    assert node.main(["123"]) == 0
    from hpcjax.values import jsonlines

    out = capsys.readouterr().out
    assert all(len(line) < 500 for line in out.splitlines())
    assert jsonlines.unframe(out) == ([deep_entry(1, "node1")], [])
