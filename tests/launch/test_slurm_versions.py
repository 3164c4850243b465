"""Every SLURM release a user may meet (issue 45): every option hpcjax gives SLURM is in the table
of releases (hpcjax.slurm.versions, read from SchedMD's man pages at each release's first tag) and in
docs/slurm-versions.md; an option newer than the cluster is left out where the older behaviour is
what it asks for. The command builders and the rendered batch scripts are read here, no SLURM; the
dev cluster's own 22.05 answers `scontrol --version` in the cluster tests."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from hpcjax.protocol.contract import Layout
from hpcjax.job.spec import JobSpec
from hpcjax.slurm import commands, controller, versions
from hpcjax.slurm.controller import Slurm
from hpcjax.slurm.script import render_sbatch

from test_slurmctl import FakeHost

REPO = Path(__file__).resolve().parents[2]
SAMPLE = {"job_id": "12", "job_ids": ["12", "13_1"], "script": "job.sh", "nodelist": "node[1-2]", "partition": "gpu",
          "element": "12_1", "job": "12", "nodes": 2, "environment": "A=1", "argv": ["true"], "node": "node1",
          "user": "me", "gpus": True, "gpus_per_node": 4, "time": "01:00:00", "account": "physics"}


def options_of(argv: list[str]) -> list[str]:
    """The options of one command line: srun's up to the program it runs (whose own options are its
    own), every other command's wherever they are (`scontrol show job -o ID`)."""
    found = []
    for word in argv[1:]:
        if not word.startswith("-"):
            if argv[0] == "srun":
                break
            continue  # a subcommand, or an option's value: -o FORMAT, -j IDS
        found.append(word.split("=", 1)[0])
    return found


def builders():
    for name, function in inspect.getmembers(commands, inspect.isfunction):
        if function.__module__ != commands.__name__:
            continue
        params = inspect.signature(function).parameters
        built = function(**{p: SAMPLE[p] for p in params if p in SAMPLE})
        if isinstance(built[0], list):  # several command lines (poll: squeue's and sacct's)
            yield from ((f"{name}-{argv[0]}", argv) for argv in built)
        else:
            yield name, built


@pytest.mark.parametrize("name, argv", list(builders()), ids=[name for name, _ in builders()])
def test_every_option_a_command_builder_gives_is_in_the_table_of_releases(name, argv):
    for option in options_of(argv) + [w for w in argv[1:] if w in ("show", "requeue", "update")]:
        assert (argv[0], option) in versions.OPTIONS, f"{name}: {argv[0]} {option} is not in hpcjax.slurm.versions"


def script_options(text: str) -> set[tuple[str, str]]:
    found = {("sbatch", m) for m in re.findall(r"^#SBATCH (--[a-z-]+)", text, re.M)}
    for line in re.findall(r"^\s*srun ((?:[^\n]*\\\n)*[^\n]*)", text, re.M):
        for option in re.findall(r"(?:^|\s)(--[a-z-]+)", line.split(" -- ")[0]):
            found.add(("srun", option))
    for command in ("squeue", "sinfo", "scontrol", "scancel", "sacct"):
        for line in re.findall(rf"\b{command}( [^|;)\n]*)", text):
            found |= {(command, o) for o in re.findall(r"(?:^|\s)(--?[a-zA-Z][a-z-]*)", line)}
    return found


SPECS = {
    "plain": JobSpec(command=("python", "t.py"), layout=Layout(nodes=2, gpus_per_node=4), time="01:00:00"),
    "everything": JobSpec(command=("python", "t.py"), layout=Layout(nodes=2, gpus_per_node=4, gpus_per_process=4),
                          time="01:00:00", partition="gpu", account="a", qos="q", constraint="a100", mem="10G",
                          exclusive=True, exclude=("node3",), requeue=2, retry_failed=True, preflight=True,
                          array=3, array_parallel=2),
    "in a hold": JobSpec(command=("python", "t.py"), layout=Layout(nodes=1, gpus_per_node=1), time="00:10:00",
                         on="dev", exclude=("node2",)),
}


@pytest.mark.parametrize("kind", sorted(SPECS) + ["the hold itself"])
def test_every_option_the_batch_script_gives_is_in_the_table_of_releases(kind):
    if kind == "the hold itself":
        text = render_sbatch(JobSpec(command=("hpcjax-hold",), layout=Layout(nodes=2, gpus_per_node=4)), hold=True)
    else:
        text = render_sbatch(SPECS[kind])
    used = script_options(text)
    assert ("srun", "--kill-on-bad-exit") in used or kind == "the hold itself"  # the reader reads
    missing = sorted(o for o in used if o not in versions.OPTIONS)
    assert not missing, f"{kind}: options not in hpcjax.slurm.versions: {missing}"


def test_every_row_of_the_table_is_in_the_docs_with_its_release():
    lines = [line for line in (REPO / "docs" / "slurm-versions.md").read_text().splitlines() if line.startswith("| `")]
    for (command, option), release in versions.OPTIONS.items():
        said = [line.split("|")[-2].strip() for line in lines
                if line.startswith(f"| `{command}` |") and f"`{option}`" in line.split("|")[2]]
        assert said == [versions.shown(release)], (command, option, said)


@pytest.mark.parametrize("said, release", [("slurm 22.05.8\n", (22, 5)), ("slurm-wlm 23.11.4", (23, 11)),
                                           ("slurm 20.02.7", (20, 2)), ("", None), ("no version", None)])
def test_a_release_is_read_from_what_scontrol_says(said, release):
    assert versions.parse(said) == release


def test_an_option_newer_than_the_cluster_is_left_out_and_the_old_release_said_once(capsys, monkeypatch):
    monkeypatch.setattr(controller, "QUERY_BACKOFF_S", 0)  # the silent cluster's retries need not wait
    old = FakeHost(lambda argv: (0, "slurm 20.02.7\n") if argv[:2] == ["scontrol", "--version"] else (1, "?"))
    slurm = Slurm(old)
    assert not slurm.has("srun", "--overlap") and not slurm.has("srun", "--overlap")
    assert old.count("scontrol") == 1  # asked once
    assert capsys.readouterr().err.count("SLURM 20.02 is older than 20.11") == 1
    argv = commands.on_each_node("12", 2, "A=1", ["true"], overlap=slurm.has("srun", "--overlap"))
    assert "--overlap" not in argv and argv[:2] == ["srun", "--jobid=12"]
    assert "--overlap" not in commands.step_on_node("12", "node1", ["bash"], overlap=False)

    current = Slurm(FakeHost(lambda argv: (0, "slurm 22.05.8\n")))
    assert current.has("srun", "--overlap") and "--overlap" in commands.step_on_node("12", "node1", ["bash"])
    silent = Slurm(FakeHost(lambda argv: (1, "scontrol: error: no answer")))
    assert silent.version() is None and silent.has("srun", "--overlap")  # unknown: assumed current
    assert capsys.readouterr().err == ""
