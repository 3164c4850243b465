"""One live case per failure class the dev cluster can produce: the report's likely
cause and its evidence. (Out-of-memory, NCCL, CUDA ordinal, preemption and node
failure need what these machines lack: cgroups, GPUs, a preemption policy, a second
machine; the table test covers their texts.)"""

from __future__ import annotations

import json
import re
import sys

import pytest

from conftest import run_hpcjax, start_hpcjax

pytestmark = pytest.mark.cluster


def submit_wait(tmp_path, *options: str, command: list[str], timeout: float = 300):
    result = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "2", "--wait", *options, "--", *command,
                        cwd=tmp_path, timeout=timeout)
    return collected(result, tmp_path)


def collected(result, cwd):
    """A finished `submit --wait` with the likely causes its job's status gives."""
    causes = json.loads(run_hpcjax("status", result.stdout.strip(), "--json", cwd=cwd).stdout)["outcome"]["causes"]
    return result, causes


def test_a_python_exception(tmp_path, slurm_cluster, hpcjax_home):
    script = ("import os, time\nif os.environ['SLURM_PROCID'] == '2':\n"
              "    raise ValueError('rank two is wrong')\ntime.sleep(30)\n")
    result, causes = submit_wait(tmp_path, command=[sys.executable, "-c", script])
    assert result.returncode == 1
    assert "likely cause: python exception" in result.stderr
    assert causes[0]["evidence"] == "rank 2 log: ValueError: rank two is wrong"


def test_a_node_whose_own_name_resolves_nowhere(tmp_path, slurm_cluster, hpcjax_home):
    """Found on a release's root whose /etc/hosts lacked the machine's name (issue 62): Gloo fails with
    `device.cc:99 rv == 0. -2 vs 0`, and the report blamed the network between nodes. Reproduced here
    by giving each rank a hostname of its own (a UTS namespace: unshare -u, as root) that resolves nowhere."""
    program = ("import jax, jax.numpy as jnp\njax.distributed.initialize()\n"
               "from jax.experimental import multihost_utils\nprint(multihost_utils.process_allgather(jnp.ones(1)))\n")
    (tmp_path / "prog.py").write_text(program)
    result = run_hpcjax("submit", "--nodes", "2", "--gpus-per-node", "1", "--wait", "--", "unshare", "-u", "bash",
                        "-c", f'hostname "nowhere-$SLURM_PROCID.invalid"; exec {sys.executable} prog.py', cwd=tmp_path,
                        timeout=300)
    result, causes = collected(result, tmp_path)
    assert result.returncode == 1, result.stderr
    assert "likely cause: this node's name does not resolve" in result.stderr, result.stderr
    assert "device.cc:99] rv == 0. -2 vs 0" in causes[0]["evidence"], causes
    assert "`getent hosts $(hostname)` on the node must answer" in causes[0]["hint"]


def test_a_smoke_whose_ranks_never_report_names_their_nodes_and_first_cause(tmp_path, slurm_cluster, hpcjax_home):
    """Found on a release's root whose Python could not load libffi (issue 62): the table said "node ?"
    and None/None for every rank. Here the ranks' Python cannot start (PYTHONHOME names nothing)."""
    done = run_hpcjax("smoke", "--nodes", "2", "--gpus-per-node", "1", "--env", "PYTHONHOME=/nonexistent",
                      cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "node ?" not in done.stdout and "None" not in done.stdout, done.stdout
    for rank, node in ((0, "node1"), (1, "node2")):
        assert f"node {node}\n  rank  local/expected" in done.stdout, done.stdout
        # a rank srun stopped before it wrote (under load) points at the one that failed (CI of 25b7cb0)
        row = re.search(rf"     {rank}             -/-              -/-                  - \(-\)  FAIL \(no report: "
                        rf"devices, allreduce\)\n        first cause: (.*)", done.stdout)
        assert row and row.group(1).endswith("ModuleNotFoundError: No module named 'encodings'"), done.stdout


def test_a_rank_missing_at_start(tmp_path, slurm_cluster, hpcjax_home):
    script = '[ "$SLURM_PROCID" = 2 ] && sleep 40; exec "$0" -m hpcjax check devices'
    result, causes = submit_wait(tmp_path, "--env", "HPCJAX_INIT_TIMEOUT=5",
                                 command=["bash", "-c", script, sys.executable])
    assert result.returncode != 0
    assert causes[0]["cause"] == "rank missing at start"
    assert "process(es) 2 of 4 did not arrive within 5 s" in causes[0]["evidence"]


@pytest.mark.waits  # minutes of a time limit or a sleep, and little CPU
def test_the_warning_kills_a_3_minute_program_that_does_not_catch_it_and_a_1_minute_job_gets_none(
        tmp_path, slurm_cluster, hpcjax_home):
    """A 3-minute job gets SLURM's warning (USR2) 30 s before its limit (SLURM may send it up to a
    minute earlier): a program that does not catch it ends on it, said as such. Issue 44: a job of
    2 minutes or less gets no warning (SLURM sent it at once and killed the job after 8 s); a
    program that does not catch USR2 runs to its limit. The two jobs wait out their limits together,
    on the a100 partition's node (a GPU each): on the default partition, a job of the whole cluster
    submitted meanwhile waited for them, and every job behind it (CI 9: up to 140 s each)."""
    warned, limited = tmp_path / "warned", tmp_path / "limited"
    started = []
    for minutes, where in (("3", warned), ("1", limited)):
        where.mkdir()
        started.append(start_hpcjax("submit", "--partition", "a100", "--nodes", "1", "--gpus-per-node", "1",
                                    "--wait", "--time", minutes, "--", "sleep", "600", cwd=where))
    three, one = started

    result, causes = collected(three.result(timeout=400), warned)
    assert result.returncode != 0
    assert causes[0]["cause"] == "warning signal not handled"
    assert "Catch SIGUSR2" in result.stderr

    result, causes = collected(one.result(timeout=400), limited)
    assert result.returncode != 0 and "ended TIMEOUT" in result.stderr
    assert causes[0]["cause"] == "time limit" and "DUE TO TIME LIMIT" in causes[0]["evidence"]
    assert "hint: raise --time, or checkpoint and use --requeue N" in result.stderr
