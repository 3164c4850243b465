"""`hpcjax report`: the page of a real (short, resumed) training run, loaded by headless
Chromium, whose own count says every image decoded and whose screenshot is not blank;
and a run directory with no metrics, or a half-written last line, still gets a page."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import run_hpcjax
from support import not_blank

pytestmark = pytest.mark.jax  # runs JAX programs on this machine

TINY = ["--seq-len", "16", "--d-model", "32", "--heads", "4", "--layers", "1", "--d-ff", "64", "--batch-size", "4",
        "--strategy", "dp", "--steps", "8", "--checkpoint-every", "4", "--warmup-steps", "2"]


def chromium():
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("chromium is not installed; the test command installs it (apt-get install chromium)")
    return [found, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]


def assert_loads_in_chromium(page, tmp_path, images: int) -> None:
    """Headless Chromium's own count says every image decoded; its screenshot is not blank."""
    dom = subprocess.run(chromium() + ["--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert f'data-images-decoded="{images}/{images}"' in dom.stdout, dom.stderr[-2000:]
    shot = tmp_path / "shot.png"
    subprocess.run(chromium() + [f"--screenshot={shot}", "--window-size=1000,1600", page.as_uri()],
                   capture_output=True, text=True, timeout=120)
    assert not_blank(shot)


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("report") / "run"
    env = {**os.environ, "HPCJAX_GPUS_PER_PROCESS": "1"}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "hpcjax", "train", "--run-dir", str(run_dir), *TINY],
                              capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        shutil.rmtree(run_dir / "checkpoints" / "8", ignore_errors=True)  # the next run redoes steps 4..7
    return run_dir


def test_the_report_of_a_resumed_run_loads_in_chromium_with_every_plot(resumed_run, tmp_path):
    made = run_hpcjax("report", str(resumed_run), "--open")
    assert made.returncode == 0, made.stderr
    page = resumed_run / "report.html"
    assert made.stdout.strip() == str(page.resolve())
    text = page.read_text()
    assert "restarts (resumed at step)</th><td>4" in text and "&quot;dp&quot;" in text  # marked; the config
    # one row per attempt: the first from step 0 (cold), the second from step 4 (warm where it could be)
    table = text.split("Time to the first step, per attempt")[1].split("</table>")[0]
    assert "<tr><td>1</td><td>0</td>" in table and "<tr><td>2</td><td>4</td>" in table
    assert "<th>restore (s)</th>" in table and "<th>compile (s)</th>" in table
    assert table.split("<tr><td>2</td>")[1].count("(warm)") == 3  # model, data, compile
    for plot in ("loss", "throughput", "step_times"):
        assert not_blank(resumed_run / f"report-{plot}.png"), plot
    assert_loads_in_chromium(page, tmp_path, 3)


def test_no_metrics_or_a_cut_line_is_said_and_the_page_still_renders(tmp_path, resumed_run):
    empty = tmp_path / "empty"
    empty.mkdir()
    made = run_hpcjax("report", str(empty))
    assert made.returncode == 0 and "no metrics in" in made.stderr
    assert "nothing to plot" in (empty / "report.html").read_text()
    cut = tmp_path / "cut"
    cut.mkdir()
    lines = (resumed_run / "metrics.jsonl").read_text().splitlines()
    (cut / "metrics.jsonl").write_text("\n".join(lines[:5]) + "\n" + lines[5][:20])
    made = run_hpcjax("report", str(cut))
    assert made.returncode == 0 and "line 6 of metrics.jsonl is cut short" in made.stderr
    assert "cut short" in (cut / "report.html").read_text() and (cut / "report-loss.png").is_file()
    missing = run_hpcjax("report", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_pace_lines_give_the_per_rank_plot_and_the_slow_rank(tmp_path, resumed_run):
    """The per-rank view drawn from train.pace's lines (a real run's are in test_pace_cluster.py)."""
    run_dir = tmp_path / "paced"
    run_dir.mkdir()
    lines = (resumed_run / "metrics.jsonl").read_text().splitlines()
    for step, named in ((4, None), (8, 1)):
        lines.append(json.dumps({"step": step, "pace": {
            "steps": 3, "collective_s": [0.21, 0.09], "traced_s": [0.3, 0.3], "hosts": ["node1", "node2"],
            "waited_for": 1, "others_wait": 0.4, "slow_rank": named,
            "slow": "slow: rank 1 on node2, others wait 40 % of each step for it" if named else ""}}))
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    made = run_hpcjax("report", str(run_dir))
    assert made.returncode == 0, made.stderr
    assert "slow: rank 1 on node2, others wait 40 % of each step for it (named in 1 of 2 captures)" in \
        (run_dir / "report.html").read_text()
    assert not_blank(run_dir / "report-ranks.png")
    single = tmp_path / "single.html"
    assert run_hpcjax("report", str(resumed_run), "-o", str(single)).returncode == 0
    assert "not measured" in single.read_text()  # one process: no captures


def test_a_resume_that_redoes_no_step_is_marked_too(tmp_path):
    run_dir = tmp_path / "run"
    env = {**os.environ, "HPCJAX_GPUS_PER_PROCESS": "1"}
    for extra in (["--stop-after", "5"], []):  # stops after step 5 with a checkpoint; resumes there
        done = subprocess.run([sys.executable, "-m", "hpcjax", "train", "--run-dir", str(run_dir), *TINY, *extra],
                              capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    assert run_hpcjax("report", str(run_dir)).returncode == 0
    assert "restarts (resumed at step)</th><td>5<" in (run_dir / "report.html").read_text()


def test_a_comparison_of_two_learning_rates_overlays_the_curves_and_lists_what_differs(tmp_path):
    """issue 25: `hpcjax report RUN_A RUN_B` (two real runs, learning rates 3e-3 and 1e-3): every
    plot has a curve per run, the differing key is listed (and a shared one is not), and the page
    loads in Chromium with its images decoded and a screenshot that is not blank."""
    from hpcjax.pages import compare
    from hpcjax.pages.record import read_run

    env = {**os.environ, "HPCJAX_GPUS_PER_PROCESS": "1"}
    runs = []
    for rate in ("3e-3", "1e-3"):
        run_dir = tmp_path / f"lr{rate}"
        done = subprocess.run([sys.executable, "-m", "hpcjax", "train", "--run-dir", str(run_dir), *TINY,
                               "--learning-rate", rate], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(run_dir)
    made = run_hpcjax("report", *map(str, runs), "-o", str(tmp_path / "cmp" / "compare.html"))
    assert made.returncode == 0, made.stderr
    page = tmp_path / "cmp" / "compare.html"
    assert made.stdout.strip() == str(page.resolve())
    text = page.read_text()
    differs = text[text.index('<table class="differs">'):].split("</table>")[0]
    assert "<th>learning_rate</th><td>0.003</td><td>0.001</td>" in differs
    assert "<th>strategy</th>" not in differs  # the same in both: not listed
    records = [read_run(r) for r in runs]
    for plot in compare.PLOTS:
        assert not_blank(tmp_path / "cmp" / f"compare-{plot}.png"), plot
        lines = compare._figure(plot, records, compare.names_of(runs)).axes[0].get_lines()
        curves = [line.get_label() for line in lines if len(line.get_xdata()) == 8]
        assert len(curves) == 2 and curves[0].startswith("lr3e-3") and curves[1].startswith("lr1e-3"), (plot, curves)
    assert_loads_in_chromium(page, tmp_path, 3)
    one = run_hpcjax("report", *map(str, runs), "--cluster", "nowhere.invalid")
    assert one.returncode == 2 and "a comparison reads run directories here" in one.stderr
