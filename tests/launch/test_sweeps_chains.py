"""Sweeps and chains from the command line (issue 25, part 2): the cross product and its
placeholders, refused typos, each element's command reaching bash verbatim, and on the local
backend a 2x2 sweep listed with its values and losses, a chain whose failing link cancels the
rest (and one that runs in order), and after= in the Python API. On the dev cluster:
tests/launch/test_sweeps_cluster.py."""

from __future__ import annotations

import json
import subprocess
import sys
import pytest

import hpcjax
from conftest import DATA_DIR, run_hpcjax
from hpcjax.values.errors import UsageError
from hpcjax.job import sweeps
from hpcjax.slurm.script import render_sbatch
from hpcjax.job import after
from hpcjax.job.after import dependencies
from hpcjax.job.spec import JobSpec

SWEEP_PROGRAM = str(DATA_DIR / "sweep_program.py")


def test_the_cross_product_first_sweep_slowest_and_braces_escaped():
    commands, values = sweeps.expand(("t.py", "--lr={lr}", "{layers}", "{{literal}}"), ["lr=1e-3,3e-4", "layers=2,4"])
    assert values == [{"lr": "1e-3", "layers": "2"}, {"lr": "1e-3", "layers": "4"},
                      {"lr": "3e-4", "layers": "2"}, {"lr": "3e-4", "layers": "4"}]
    assert commands[1] == ("t.py", "--lr=1e-3", "4", "{literal}")


@pytest.mark.parametrize("texts, command, words", [
    (["lr=1,2"], ("t.py", "{lrr}"), "the command uses {lrr}, but no --sweep lrr=... is given (the sweeps: lr)"),
    (["lr=1,2", "bs=8"], ("t.py", "{lr}"), "--sweep bs is not used by the command: no {bs} in it"),
    (["lr"], ("t.py", "{lr}"), "--sweep 'lr' is not NAME=V1,V2,..."),
    (["1x=1"], ("t.py",), "--sweep '1x=1' is not NAME=V1,V2,..."),
    (["lr=1,,2"], ("t.py", "{lr}"), "--sweep 'lr=1,,2' has an empty value"),
    (["lr=1,1"], ("t.py", "{lr}"), "repeats a value"),
    (["lr=1", "lr=2"], ("t.py", "{lr}"), "--sweep lr is given twice"),
])
def test_a_sweep_typo_is_refused_before_anything_is_submitted(texts, command, words):
    with pytest.raises(UsageError) as raised:
        sweeps.expand(command, texts)
    assert words in raised.value.message and raised.value.hint


def test_a_placeholder_typo_on_the_command_line_submits_nothing(tmp_path, hpcjax_home):
    done = run_hpcjax("submit", "--backend", "local", "--sweep", "lr=1,2", "--", "python3", "t.py", "--lr", "{lrr}",
                      cwd=tmp_path)
    assert done.returncode == 2 and "no --sweep lrr=... is given" in done.stderr and done.stdout == ""
    assert not (tmp_path / "hpcjax-logs").exists() and not hpcjax_home.exists()


def test_each_element_gets_its_own_command_verbatim_in_bash(tmp_path):
    hostile = "$(touch pwned) 'q' \"d\" `b` ;x"
    commands, values = sweeps.expand(("prog", "--v={v}"), [f"v=plain,{hostile.replace(',', '')}"])
    text = render_sbatch(JobSpec(command=("prog", "--v={v}"), array=2, array_commands=tuple(commands),
                                 sweep=tuple(values)))
    start = text.index('case "$SLURM_ARRAY_TASK_ID" in')
    block = text[start:text.index("esac", start) + 4]
    for element, expected in enumerate(commands):
        shown = subprocess.run(["bash", "-c", block + '\nprintf "%s\\n" "$@"'], capture_output=True, text=True,
                               cwd=tmp_path, env={"SLURM_ARRAY_TASK_ID": str(element), "PATH": "/usr/bin:/bin"})
        assert shown.stdout.splitlines() == list(expected), shown.stderr
    assert not (tmp_path / "pwned").exists()
    assert "#SBATCH --array=0-1" in text


def test_dependencies_render_as_slurm_asks_for_them():
    text = render_sbatch(JobSpec(command=("t",), after=dependencies(["12", "13_2:any"])))
    assert "#SBATCH --dependency=afterok:12,afterany:13_2" in text and "#SBATCH --kill-on-invalid-dep=yes" in text
    # refused in the caller's spelling: the API's after=, the command line's --after
    with pytest.raises(UsageError, match="after='12:done' asks for 'done', not ok or any") as refused:
        dependencies("12:done")
    assert 'pass after="JOBID[:ok|:any]"' in refused.value.hint
    with pytest.raises(UsageError, match="^after='job7' is not a job id"):
        dependencies(["job7"])
    with pytest.raises(UsageError, match="^--after 'job7' is not a job id") as refused:
        dependencies(["job7"], after.OPTION)
    assert refused.value.hint.startswith("write --after JOBID[:ok|:any]")


def runs_json(cwd, *options) -> list[dict]:
    done = run_hpcjax("runs", "--json", *options, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_2x2_sweep_is_one_array_of_four_listed_with_values_and_losses(tmp_path, hpcjax_home):
    done = run_hpcjax("submit", "--backend", "local", "--sweep", "lr=0.1,0.3", "--sweep", "layers=2,4",
                      "--max-parallel", "2", "--", sys.executable, SWEEP_PROGRAM, "--lr", "{lr}", "--layers",
                      "{layers}", "--run-dir", "runs/{lr}-{layers}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    sweep = done.stdout.split()[0]
    rows = runs_json(tmp_path, "--sweep", sweep, "--sort", "loss")
    assert [r["key"] for r in rows] == [f"{sweep}_{i}" for i in range(4)]  # 0.1x2 < 0.1x4 < 0.3x2 < 0.3x4
    assert [(r["sweep_values"], r["state"], r["metrics"]["loss"]) for r in rows] == [
        ({"lr": "0.1", "layers": "2"}, "COMPLETED", 0.2), ({"lr": "0.1", "layers": "4"}, "COMPLETED", 0.4),
        ({"lr": "0.3", "layers": "2"}, "COMPLETED", 0.6), ({"lr": "0.3", "layers": "4"}, "COMPLETED", 1.2)]
    table = run_hpcjax("runs", "--sweep", sweep, "--sort", "loss", cwd=tmp_path).stdout.splitlines()
    assert table[0].split() == ["ID", "lr", "layers", "STATE", "LOSS"]
    assert table[1].split() == [f"{sweep}_0", "0.1", "2", "COMPLETED", "0.2"]


def test_a_chain_whose_second_link_fails_cancels_the_third_and_says_why(tmp_path, hpcjax_home):
    def program(name, code):
        return f"import sys, time; time.sleep(0.3); open('order', 'a').write('{name}\\n'); sys.exit({code})"

    ids = []
    procs = []
    for name, code in (("a", 0), ("b", 3), ("c", 0)):
        after = ["--after", ids[-1]] if ids else []
        proc = subprocess.Popen([sys.executable, "-m", "hpcjax", "submit", "--backend", "local", "-J", name, *after,
                                 "--", sys.executable, "-c", program(name, code)], cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ids.append(proc.stdout.readline().strip())
        procs.append(proc)
    said = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 3, 1]
    assert (tmp_path / "order").read_text() == "a\nb\n"  # c never started
    assert f"not started: job {ids[1]} failed (--after {ids[1]}:ok)" in said[2]
    rows = {r["key"]: r for r in runs_json(tmp_path)}
    assert [rows[i]["state"] for i in ids] == ["COMPLETED", "FAILED", "CANCELLED"]
    assert rows[ids[2]]["attempts"] == [] and rows[ids[2]]["after"] == [f"{ids[1]}:ok"]


def test_a_chain_that_succeeds_runs_in_order(tmp_path, hpcjax_home, monkeypatch):
    """after= in the Python API (a Run, or "JOBID:any"): each link starts after the one before ended."""
    monkeypatch.chdir(tmp_path)

    def link(name):
        return f"import time; open('order', 'a').write('{name} %f\\n' % time.time()); time.sleep(0.1)"

    first = hpcjax.launch.submit(JobSpec(command=(sys.executable, "-c", link("a"))), "local")
    second = hpcjax.launch.submit(JobSpec(command=(sys.executable, "-c", link("b"))), "local", after=first)
    third = hpcjax.launch.submit(JobSpec(command=(sys.executable, "-c", link("c"))), "local", after=[f"{second.job_id}:any"])
    assert third.wait(progress=False).ok and second.outcome.ok
    lines = [line.split() for line in (tmp_path / "order").read_text().splitlines()]
    assert [name for name, _ in lines] == ["a", "b", "c"]
    assert float(lines[0][1]) < float(lines[1][1]) < float(lines[2][1])


@pytest.mark.jax  # its function imports JAX on its rank (the tier says what the processes a test starts use)
def test_after_in_a_remote_functions_submit(tmp_path, hpcjax_home):
    """f.submit(..., after=handle): the second call waits for the first; the first fails, so
    the second is cancelled without running, and its error says why."""
    import api_cases

    square = hpcjax.remote(backend="local", storage_path=str(tmp_path / "calls"))(api_cases.square_or_fail)
    first = square.submit(3)  # raises on its rank
    second = square.submit(2, after=first)
    error = second.exception()
    assert isinstance(error, hpcjax.RemoteError), error
    assert f"not started: job {first.job_id} failed (--after {first.job_id}:ok)" in str(error)
    assert second.run.outcome.state == "CANCELLED" and isinstance(first.exception(), hpcjax.RemoteError)
    ok = square.submit(4, after=[f"{first.job_id}:any"])
    assert ok.result() == 17


def test_after_a_job_nobody_knows_is_refused_before_anything_is_submitted(tmp_path, hpcjax_home):
    """SLURM drops a dependency on an unknown job and runs the job at once (issue 34): refused here."""
    done = run_hpcjax("submit", "--backend", "local", "--after", "987654321", "--", "true", cwd=tmp_path)
    assert done.returncode == 2 and "--after 987654321:ok: this machine knows no job 987654321" in done.stderr
    assert "hint:" in done.stderr and done.stdout == ""
    assert not (hpcjax_home / "jobs").exists() or not list((hpcjax_home / "jobs").glob("*.json"))
    square = hpcjax.remote(backend="local", storage_path=str(tmp_path / "calls"))(abs)
    with pytest.raises(UsageError, match="knows no job 987654321"):
        square.submit(-1, after="987654321")


def test_a_sweep_after_a_failed_job_never_starts_and_after_a_good_one_starts_after_it(tmp_path, hpcjax_home):
    """The sweep x chain seam: the local queue started a sweep's elements at once, --after or not."""
    failed = run_hpcjax("submit", "--backend", "local", "--", sys.executable, "-c",
                        "import sys; open('first', 'w').write('x'); sys.exit(3)", cwd=tmp_path)
    assert failed.returncode == 3
    first = failed.stdout.strip()
    program = "import sys, os; open('ran-' + sys.argv[1], 'w').write(str(os.path.exists('first')))"
    swept = run_hpcjax("submit", "--backend", "local", "--after", first, "--sweep", "x=1,2", "--",
                       sys.executable, "-c", program, "{x}", cwd=tmp_path)
    assert swept.returncode == 1 and f"not started: job {first} failed (--after {first}:ok)" in swept.stderr
    assert not list(tmp_path.glob("ran-*"))
    # the first job runs until the sweep has been submitted behind it (its id said), then ends
    slow = subprocess.Popen([sys.executable, "-m", "hpcjax", "submit", "--backend", "local", "--", sys.executable,
                             "-c", "import os, time\nwhile not os.path.exists('go'): time.sleep(0.02)\n"
                             "open('first2', 'w').write('x')"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = slow.stdout.readline().strip()
    program = "import sys, os; open('ran-' + sys.argv[1], 'w').write(str(os.path.exists('first2')))"
    sweep = subprocess.Popen([sys.executable, "-m", "hpcjax", "submit", "--backend", "local", "--after", second,
                              "--sweep", "x=1,2", "--", sys.executable, "-c", program, "{x}"], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert sweep.stdout.readline().strip(), sweep.stderr.read()
    assert not list(tmp_path.glob("ran-*"))  # submitted, and waiting
    (tmp_path / "go").write_text("")
    _, said = sweep.communicate(timeout=60)
    assert sweep.returncode == 0, said
    assert slow.wait(timeout=60) == 0
    assert sorted(p.read_text() for p in tmp_path.glob("ran-*")) == ["True", "True"]
