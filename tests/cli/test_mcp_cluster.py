"""`hpcjax mcp` driven by the MCP SDK's own client over stdio (a real `hpcjax mcp` process, the
protocol's real handshake), against the dev cluster: the tools it lists are the CLI's parsers', a job
submitted through it runs and is followed with status and logs, another's stack is taken and it is
cancelled, `free` and `runs` answer, `report` refuses a missing run as the CLI does, and a bad value, an unknown argument or a left-out option is refused in the CLI's own
words, nothing submitted."""

from __future__ import annotations

import json
import sys
import time

import anyio
import pytest

from conftest import run_hpcjax
from mcp_client import drive

pytestmark = [pytest.mark.cluster]


# A rank that sleeps in a function of its own, for its stack to name.
SLEEPER = "import time\ndef sleeps_here():\n    time.sleep(300)\nsleeps_here()\n"


def test_an_agent_submits_follows_and_cancels_jobs_in_the_clis_words(tmp_path, slurm_cluster, hpcjax_home):
    from hpcjax.cli import tools

    async def steps(call, session):
        seen = {}
        listed = (await session.list_tools()).tools
        seen["tools"] = {t.name: t.input_schema for t in listed}
        seen["read_only"] = {t.name for t in listed if t.annotations and t.annotations.read_only_hint}
        seen["submitted"] = await call("submit", nodes=2, gpus_per_node=2, job_name="by-an-agent",
                                       command=["bash", "-c", "echo hello from $SLURM_PROCID"])
        job = seen["submitted"][1]["stdout"].split()[0]
        deadline, state = time.monotonic() + 60, ""
        while state != "COMPLETED" and time.monotonic() < deadline:
            text, _, failed = await call("status", job_id=job, json=True)
            assert not failed, text
            state = json.loads(text.split("\n[stderr]")[0])["state"]
            await anyio.sleep(0.5)
        seen["state"] = state
        seen["logs"] = await call("logs", job_id=job, rank=1)
        sleeper = (await call("submit", gpus_per_node=1, job_name="sleeper",
                              command=[sys.executable, "-c", SLEEPER]))[1]["stdout"].split()[0]
        deadline, stacks = time.monotonic() + 60, ("", None, True)
        while time.monotonic() < deadline:  # its rank up and asleep: its stack shows where
            stacks = await call("stacks", job_id=sleeper, json=True)
            if not stacks[2] and "sleeps_here" in stacks[0]:
                break
            await anyio.sleep(1)
        seen["stacks"] = stacks
        seen["cancel"] = await call("cancel", job_id=sleeper)
        seen["sleeper"] = sleeper
        seen["free"] = await call("free", json=True)
        seen["runs"] = await call("runs", json=True)
        seen["report"] = await call("report", run_dir=[str(tmp_path / "no-such-run")])
        seen["zero_nodes"] = await call("submit", nodes=0, command=["true"])
        seen["unknown"] = await call("submit", ntasks=4, command=["true"])
        seen["waiting"] = await call("submit", wait=True, command=["true"])
        seen["listed_job"] = await call("status", job_id=["1", "2"])
        return seen

    seen = drive(tmp_path, steps)
    # What it lists is what the CLI's parsers say (tools.tool_schemas reads them), every tool.
    assert seen["tools"] == {t["name"]: t["inputSchema"] for t in tools.tool_schemas()}
    assert list(seen["tools"]) == list(tools.TOOLS)
    assert seen["tools"]["submit"]["properties"]["nodes"]["type"] == "integer"
    assert seen["read_only"] == {"status", "logs", "stacks", "free", "runs"}
    text, structured, failed = seen["submitted"]
    assert not failed and structured["exit_code"] == 0, text
    assert seen["state"] == "COMPLETED"
    text, _, failed = seen["logs"]
    assert not failed and text.splitlines()[0] == "hello from 1", text
    text, _, failed = seen["stacks"]
    assert not failed and "sleeps_here" in text, text
    text, _, failed = seen["cancel"]
    assert not failed, text
    assert json.loads(run_hpcjax("status", seen["sleeper"], "--json", cwd=tmp_path).stdout)["state"] == "CANCELLED"
    text, _, failed = seen["free"]
    assert not failed and "gpu" in {row["partition"] for row in json.loads(text.split("\n[stderr]")[0])}, text
    text, _, failed = seen["runs"]
    assert not failed and "by-an-agent" in text, text
    text, structured, failed = seen["report"]
    by_hand = run_hpcjax("report", str(tmp_path / "no-such-run"), cwd=tmp_path)
    assert failed and structured["exit_code"] == by_hand.returncode != 0 and structured["stderr"] == by_hand.stderr
    # A bad value: the CLI's refusal, word for word, with its hint and exit status 2; nothing submitted.
    text, structured, failed = seen["zero_nodes"]
    by_hand = run_hpcjax("submit", "--nodes=0", "--", "true", cwd=tmp_path)
    assert failed and structured["exit_code"] == by_hand.returncode == 2
    assert structured["stderr"] == by_hand.stderr and "hint:" in by_hand.stderr, text
    # What no tool takes is refused before anything runs: its name, and what would be valid.
    text, structured, failed = seen["unknown"]
    assert failed and structured is None
    assert "error: tool submit takes no argument 'ntasks'" in text and "its arguments are: nodes, " in text, text
    text, _, failed = seen["waiting"]
    assert failed and "takes no argument 'wait'" in text and "call status until it has ended" in text, text
    text, _, failed = seen["listed_job"]
    assert failed and "job_id is a list" in text, text
    rows = json.loads(run_hpcjax("runs", "--json", cwd=tmp_path).stdout)
    assert len(rows) == 2, rows  # the agent's two jobs, none of the refused ones


def test_an_agent_on_a_laptop_drives_the_cluster_over_ssh(laptop, ssh_cluster, monkeypatch):
    """The server where the agent is, a laptop without SLURM; its verbs reach the dev cluster through the
    tests' sshd ($HPCJAX_CLUSTER names the profile, as a user's shell would)."""
    monkeypatch.setenv("HPCJAX_PROFILES", str(ssh_cluster.profiles(laptop / "profiles.toml")))
    monkeypatch.setenv("HPCJAX_CLUSTER", "devcluster")

    async def steps(call, session):
        seen = {"submitted": await call("submit", nodes=2, command=["bash", "-c", "echo on $SLURMD_NODENAME"])}
        job = seen["submitted"][1]["stdout"].split()[0]
        deadline, state = time.monotonic() + 90, ""
        while state not in ("COMPLETED", "FAILED") and time.monotonic() < deadline:
            text, _, failed = await call("status", job_id=job, json=True)
            assert not failed, text
            state = json.loads(text.split("\n[stderr]")[0])["state"]
            await anyio.sleep(1)
        seen["state"], seen["logs"] = state, await call("logs", job_id=job)
        return seen

    seen = drive(laptop, steps)
    text, _, failed = seen["submitted"]
    assert not failed, text
    assert seen["state"] == "COMPLETED"
    text, _, failed = seen["logs"]
    assert not failed and "[rank 0 node1] on node1" in text and "[rank 1 node2] on node2" in text, text


@pytest.mark.jax
def test_an_agent_runs_a_job_on_this_machines_cpu(tmp_path, hpcjax_home):
    """The local backend (no cluster): the same tools, the job on this machine's CPU."""
    async def steps(call, session):
        text, structured, failed = await call("submit", backend="local", gpus_per_node=2,
                                              command=["bash", "-c", "echo hello from $SLURM_PROCID"])
        assert not failed, text
        job, deadline, state = structured["stdout"].split()[0], time.monotonic() + 60, ""
        while state != "COMPLETED" and time.monotonic() < deadline:
            state = json.loads((await call("status", job_id=job, json=True))[1]["stdout"])["state"]
            await anyio.sleep(0.2)
        return state, await call("logs", job_id=job)

    state, (text, _, failed) = drive(tmp_path, steps)
    assert state == "COMPLETED"
    assert not failed and "[rank 0 local0] hello from 0" in text and "[rank 1 local0] hello from 1" in text, text
