"""`hpcjax smoke --bandwidth --plot FILE`: bus bandwidth by message size, drawn with matplotlib."""

from __future__ import annotations

from pathlib import Path

from hpcjax.values.sizes import format_bytes


def bandwidth_plot(report: dict, path: Path) -> Path:
    """Bus bandwidth by message size from rank 0's `check bandwidth` report: the all-reduce
    over every device, and each node pair's exchange (the slowest pair in red)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4), dpi=100)
    rows = report["rows"]
    axis.plot([r["bytes"] for r in rows], [r["busbw_gbps"] for r in rows], marker="o", linewidth=2,
              label=f"all-reduce over {report['devices']} devices")
    pairs = sorted(report.get("pairs", []), key=lambda p: p["rows"][-1]["busbw_gbps"])
    for number, pair in enumerate(pairs):
        slowest = number == 0 and len(pairs) > 1
        axis.plot([r["bytes"] for r in pair["rows"]], [r["busbw_gbps"] for r in pair["rows"]], marker=".",
                  color="tab:red" if slowest else "tab:gray", alpha=1.0 if slowest or len(pairs) == 1 else 0.5,
                  label=" <-> ".join(pair["nodes"]) + (" (slowest pair)" if slowest else "")
                  if slowest or len(pairs) <= 6 else None)
    axis.set_xscale("log", base=2)
    axis.set_xticks([r["bytes"] for r in rows], [format_bytes(r["bytes"]) for r in rows], fontsize=8)
    axis.minorticks_off()
    axis.set(xlabel="message size per device", ylabel="bus bandwidth (GB/s)",
             title=f"Bandwidth by message size, {report['processes']} processes")
    axis.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path
