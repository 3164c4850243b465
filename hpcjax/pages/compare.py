"""`hpcjax report RUN_A RUN_B [...]`: one page comparing training runs: their loss and
validation, tokens/s and MFU curves overlaid (one colour per run), and the configuration keys
whose values differ between them (nested keys flattened: model.layers). Each run is read as
the single-run report reads it (pages.record.read_run), its problems said the same way.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

from hpcjax.values.errors import UsageError
from hpcjax.pages.page import shell, write_page
from hpcjax.pages.record import RunRecord, read_run

PLOTS = ("loss", "throughput", "mfu")


def names_of(run_dirs: list[Path]) -> list[str]:
    """Short names for the legend: the directory names, with their parents where two are the same."""
    names = [d.name or str(d) for d in run_dirs]
    if len(set(names)) < len(names):
        names = [str(d) for d in run_dirs]
    return names


def flat(config: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def differing(configs: list[dict]) -> list[tuple[str, list]]:
    """The keys whose values are not the same in every run (a key one run lacks is "(absent)")."""
    flats = [flat(c) for c in configs]
    out = []
    for key in sorted(set().union(*flats)):
        values = [f.get(key, "(absent)") for f in flats]
        if len({json.dumps(v, sort_keys=True, default=str) for v in values}) > 1:
            out.append((key, values))
    return out


def _figure(plot: str, records: list[RunRecord], names: list[str]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 3.2), dpi=100)
    for index, (record, name) in enumerate(zip(records, names)):
        colour = f"C{index % 10}"
        steps = [r["step"] for r in record.steps]
        if plot == "loss":
            axis.plot(steps, [r["loss"] for r in record.steps], color=colour, label=f"{name}: loss")
            if record.evals:
                axis.plot([e["step"] for e in record.evals], [e["val_loss"] for e in record.evals], "o",
                          color=colour, label=f"{name}: validation")
        elif plot == "throughput":
            axis.plot(steps, [r["tokens_per_s"] / 1e3 for r in record.steps], color=colour, label=name)
        else:
            axis.plot(steps, [100 * r["mfu"] for r in record.steps], color=colour, label=name)
    axis.set(xlabel="step", **{"loss": dict(ylabel="loss", title="Loss and validation"),
                               "throughput": dict(ylabel="k tokens/s", title="Throughput"),
                               "mfu": dict(ylabel="MFU %", title="Model FLOPs utilization")}[plot])
    axis.legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    return figure


def render(run_dirs: list[Path], output: Path) -> tuple[Path, list[RunRecord]]:
    """Write the comparison page (and its PNGs beside it); return its path and the runs' records."""
    if len(run_dirs) < 2:
        raise UsageError("a comparison needs at least two runs", "hpcjax report RUN_A RUN_B [...]")
    records = [read_run(d) for d in run_dirs]
    names = names_of(run_dirs)
    pngs = {}
    if any(r.steps for r in records):
        for plot in PLOTS:
            buffer = io.BytesIO()
            _figure(plot, records, names).savefig(buffer, format="png")
            pngs[plot] = buffer.getvalue()
    write_page(output, page(run_dirs, names, records, {k: base64.b64encode(v).decode() for k, v in pngs.items()}),
               pngs)
    return output, records


def page(run_dirs: list[Path], names: list[str], records: list[RunRecord], images: dict[str, str]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(n)}</th>" for n in names)
    facts = [("directory", [str(d) for d in run_dirs]),
             ("steps recorded", [len(r.steps) for r in records]),
             ("last loss", [f"{r.steps[-1]['loss']:.4f}" if r.steps else "-" for r in records]),
             ("validation loss", [f"{r.evals[-1]['val_loss']:.4f}" if r.evals else "-" for r in records])]
    rows = "".join(f"<tr><th>{e(k)}</th>{''.join(f'<td>{e(str(v))}</td>' for v in values)}</tr>"
                   for k, values in facts)
    changed = differing([r.config for r in records])
    diff = "".join(f"<tr><th>{e(k)}</th>{''.join(f'<td>{e(json.dumps(v, default=str))}</td>' for v in values)}</tr>"
                   for k, values in changed)
    notes = "".join(f"<li>{e(name)}: {e(p)}</li>" for name, r in zip(names, records) for p in r.problems)
    figures = "".join(f'<figure><img alt="{plot}" src="data:image/png;base64,{data}"></figure>'
                      for plot, data in images.items())
    return shell(f"hpcjax: {' vs '.join(names)}", f"""<h1>{e(' vs '.join(names))}</h1>
<table><tr><th></th>{head}</tr>{rows}</table>
{f'<ul class="notes">{notes}</ul>' if notes else ''}
<h2>What differs</h2>
<table class="differs"><tr><th>key</th>{head}</tr>{diff or '<tr><td>nothing: the same configuration</td></tr>'}</table>
{figures or '<p>No steps recorded yet: nothing to plot.</p>'}""")
