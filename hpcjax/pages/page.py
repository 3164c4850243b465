"""`hpcjax report RUN_DIR`: one self-contained HTML page about a training run, made after
the fact from what the run wrote (its run directory: hpcjax.protocol.rundir), with PNG
plots beside it (drawn with matplotlib, embedded in the page too).
(What the run wrote is read back by hpcjax.pages.record.)
A multi-process run's "pace" lines (train.pace: each rank's time working and waiting in
collectives, from short profiler captures) give the per-rank view and the slow rank.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

from hpcjax.values.errors import UsageError
from hpcjax.pages.record import RunRecord, diverged, is_number, read_run

PLOTS = ("loss", "throughput", "step_times")


def _figure(plot: str, record: RunRecord):
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a login node
    import matplotlib.pyplot as plt

    if plot == "ranks":
        return _ranks_figure(plt, record)
    figure, axis = plt.subplots(figsize=(8, 3.2), dpi=100)
    steps = [r["step"] for r in record.steps]
    if plot == "loss":
        axis.plot(steps, [r["loss"] for r in record.steps], label="loss")
        if record.evals:
            axis.plot([e["step"] for e in record.evals], [e["val_loss"] for e in record.evals], "o",
                      label="validation loss")
        axis.set(xlabel="step", ylabel="loss", title="Loss")
    elif plot == "throughput":
        axis.plot(steps, [r["tokens_per_s"] / 1e3 for r in record.steps], label="k tokens/s")
        axis.set(xlabel="step", ylabel="k tokens/s", title="Throughput and MFU")
        mfu = axis.twinx()
        mfu.plot(steps, [100 * r["mfu"] for r in record.steps], color="tab:orange", label="MFU %")
        mfu.set_ylabel("MFU %")
    else:
        # A run's first step compiles (or loads from the cache): not a step time.
        firsts = {record.steps[0]["step"], *record.restarts}
        times = [1e3 * r["step_time_s"] for r in record.steps if r["step"] not in firsts] or [0.0]
        axis.hist(times, bins=30)
        axis.set(xlabel="ms per step (process 0)", ylabel="steps", title="Step time distribution")
    if plot != "step_times":
        for step in record.checkpoints:
            axis.axvline(step, color="tab:green", alpha=0.3, linewidth=1)
        for step in record.restarts:
            axis.axvline(step, color="tab:red", linestyle="--", linewidth=1.5)
        axis.legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    return figure


def per_rank(record: RunRecord) -> tuple[list[list[float]], list[list[float]]]:
    """Each rank's milliseconds per step working and waiting in collectives, one value per capture."""
    work: list[list[float]] = []
    wait: list[list[float]] = []
    for entry in record.pace:
        pace = entry["pace"]
        for rank, (collective, traced) in enumerate(zip(pace["collective_s"], pace["traced_s"])):
            while len(work) <= rank:
                work.append([])
                wait.append([])
            work[rank].append(1e3 * (traced - collective) / pace["steps"])
            wait[rank].append(1e3 * collective / pace["steps"])
    return work, wait


def slow_ranks(record: RunRecord) -> str:
    named = [entry["pace"]["slow"] for entry in record.pace if entry["pace"].get("slow")]
    if not record.pace:
        return "not measured (one process, or --pace-every 0, or too few steps)"
    return named[-1] + f" (named in {len(named)} of {len(record.pace)} captures)" if named else "none named"


def _ranks_figure(plt, record: RunRecord):
    work, wait = per_rank(record)
    figure, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2), dpi=100)
    ranks = list(range(len(work)))
    left.boxplot(work, positions=ranks, widths=0.35)
    left.boxplot(wait, positions=[r + 0.4 for r in ranks], widths=0.35,
                 boxprops={"color": "tab:red"}, medianprops={"color": "tab:red"})
    left.set_xticks([r + 0.2 for r in ranks], [str(r) for r in ranks])
    left.set(xlabel="rank (black: working, red: waiting in collectives)", ylabel="ms per step",
             title="Step time per rank")
    steps = [entry["step"] for entry in record.pace]
    for rank in ranks:
        shares = [100 * w / (w + k) if w + k else 0.0 for w, k in zip(wait[rank], work[rank])]
        right.plot(steps, shares, marker=".", label=f"rank {rank}")
    right.set(xlabel="step", ylabel="% of step waiting", title="Waiting in collectives")
    if len(ranks) <= 8:
        right.legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    return figure


def render(run_dir: Path, output: Path) -> tuple[Path, RunRecord]:
    """Write output (the HTML page) and its PNGs beside it; return the page's path."""
    record = read_run(run_dir)
    pngs = {}  # drawn in memory first: nothing is written unless all of it can be
    if record.steps:
        for plot in PLOTS + (("ranks",) if record.pace else ()):
            buffer = io.BytesIO()
            _figure(plot, record).savefig(buffer, format="png")
            pngs[plot] = buffer.getvalue()
    write_page(output, page(run_dir, record, {plot: base64.b64encode(data).decode() for plot, data in pngs.items()}),
               pngs)
    return output, record


def page(run_dir: Path, record: RunRecord, images: dict[str, str]) -> str:
    e = html.escape
    last = record.steps[-1] if record.steps else {}
    steady = sorted(r["tokens_per_s"] for r in record.steps[1:]) or [0.0]
    facts = [("steps recorded", len(record.steps)), ("last loss", f"{last.get('loss', float('nan')):.4f}"),
             ("diverged", diverged(record)),
             ("validation loss", f"{record.evals[-1]['val_loss']:.4f}" if record.evals else "-"),
             ("median tokens/s", f"{steady[len(steady) // 2]:,.0f}"),
             ("checkpoints", ", ".join(map(str, record.checkpoints)) or "-"),
             ("restarts (resumed at step)", ", ".join(map(str, record.restarts)) or "-"),
             ("slow rank", slow_ranks(record))]
    rows = "".join(f"<tr><th>{e(str(k))}</th><td>{e(str(v))}</td></tr>" for k, v in facts)
    config = "".join(f"<tr><th>{e(str(k))}</th><td>{e(json.dumps(v))}</td></tr>" for k, v in record.config.items())
    notes = "".join(f"<li>{e(p)}</li>" for p in record.problems)
    figures = "".join(f'<figure><img alt="{plot}" src="data:image/png;base64,{data}"></figure>'
                      for plot, data in images.items())
    return shell(f"hpcjax run {run_dir.name}", f"""<h1>Run {e(str(run_dir))}</h1>
<table>{rows}</table>
{f'<ul class="notes">{notes}</ul>' if notes else ''}
{figures or '<p>No steps recorded yet: nothing to plot.</p>'}
<p>Green lines: checkpoints. Red dashed lines: a run resumed there.</p>
{starts_table(record)}
<h2>Configuration and layout</h2>
<table>{config or '<tr><td>unknown</td></tr>'}</table>""")


def starts_table(record: RunRecord) -> str:
    """Each attempt's time to its first step, phase by phase, warm or cold."""
    if not record.starts:
        return ""
    e = html.escape
    names = list(dict.fromkeys(p["phase"] for s in record.starts for p in s["time_to_first_step"]["phases"]))
    head = "".join(f"<th>{e(n)} (s)</th>" for n in names)
    rows = []
    for number, entry in enumerate(record.starts, 1):
        start = entry["time_to_first_step"]
        seconds = {p["phase"]: p for p in start["phases"]}
        total = f"{start['total_s']:.2f}" if is_number(start.get("total_s")) else "-"
        cells = "".join(f'<td title="{e(str(seconds[n].get("how", "")))}">{seconds[n]["s"]:.2f}'
                        f'{" (warm)" if str(seconds[n].get("how", "")).startswith("warm") else ""}</td>'
                        if n in seconds else "<td>-</td>" for n in names)
        rows.append(f"<tr><td>{number}</td><td>{entry['step']}</td><td>{total}</td>{cells}</tr>")
    return (f"<h2>Time to the first step, per attempt</h2><table><tr><th>attempt</th><th>from step</th>"
            f"<th>total (s)</th>{head}</tr>{''.join(rows)}</table>")


def shell(title: str, body: str) -> str:
    """A self-contained page around `body` (its images inline), which says on load how many
    of its images decoded (for a test, and for a reader who wonders)."""
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:60em}} th{{text-align:left;padding-right:1em}}
img{{max-width:100%}} .notes{{color:#a40}}</style></head>
<body>
{body}
<script>
window.addEventListener("load", () => {{
  const ok = [...document.images].filter(i => i.complete && i.naturalWidth > 0).length;
  document.body.dataset.imagesDecoded = ok + "/" + document.images.length;
}});
</script>
</body></html>
"""


def write_page(output: Path, text: str, pngs: dict[str, bytes]) -> None:
    """The page and its PNGs beside it (output-PLOT.png), or a UsageError and nothing half-written."""
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        for plot, data in pngs.items():
            (output.parent / f"{output.stem}-{plot}.png").write_bytes(data)
        output.write_text(text)
    except OSError as err:
        raise UsageError(f"cannot write the report {str(output)!r}: {err.strerror}",
                         "give -o a file in a directory you can write") from None
