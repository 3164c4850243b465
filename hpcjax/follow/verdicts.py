"""The smoke test's verdict: every rank of its job ran `python -m hpcjax check all --json` and
wrote one JSON line per check into its log; here those lines are gathered into a table per node
and rank with pass/fail. (The job itself is built by the `smoke` verb, cli/smoke.py.)"""

from __future__ import annotations

from hpcjax.values import jsonlines
from hpcjax.protocol.contract import ALL_CHECKS
from hpcjax.values.sizes import format_bytes


def read_reports(run) -> dict[int, dict[str, dict]]:
    """rank -> check name -> that rank's JSON report, from the run's rank logs (wherever they are)."""
    found: dict[int, dict[str, dict]] = {}
    for rank, path in run.rank_logs().items():
        text = run.read_log(path)
        for line in text.splitlines():
            report = report_on(line)
            if report is not None:
                found.setdefault(rank, {})[report["check"]] = report
    return found


def report_on(line: str) -> dict | None:
    """The check report on a line of a rank's log, also where it follows the unfinished line of
    another writer. Gloo writes its "[Gloo] Rank N is connected to ..." lines to the same stdout,
    from several threads through C++'s own buffer, which can pass on part of a line just before
    the report is printed: a smoke whose job had completed once failed for a report read as no
    report (CI 26, 4 GPUs per process in Charliecloud: rank 1's allreduce)."""
    if '"check"' not in line:
        return None
    start = line.find("{")
    while start >= 0:
        report = jsonlines.object_of(line[start:])
        if report is not None and isinstance(report.get("check"), str):
            return report
        start = line.find("{", start + 1)
    return None


def verdicts(reports: dict[int, dict[str, dict]], num_processes: int, bandwidth: bool) -> list[dict]:
    """One row per expected rank: what it reported and whether it passed."""
    wanted = ALL_CHECKS + (("bandwidth",) if bandwidth else ())
    rows = []
    for rank in range(num_processes):
        mine = reports.get(rank, {})
        devices, allreduce, bw = mine.get("devices", {}), mine.get("allreduce", {}), mine.get("bandwidth", {})
        missing = [c for c in wanted if c not in mine]
        rows.append({
            "rank": rank, "node": devices.get("node", "?"),
            "local_devices": devices.get("local_device_count"), "expected_local": devices.get("expected_local"),
            "global_devices": devices.get("device_count"), "expected_global": devices.get("expected_global"),
            "allreduce": allreduce.get("seen"), "expected_sum": allreduce.get("expected"),
            "busbw_gbps": bw.get("avg_busbw_gbps"),
            "missing": missing, "ok": not missing and all(mine[c]["ok"] for c in wanted),
        })
    return rows


def format_table(rows: list[dict], bandwidth: bool) -> str:
    out = []
    for node in sorted({r["node"] for r in rows}, key=lambda n: min(r["rank"] for r in rows if r["node"] == n)):
        out.append(f"node {node}")
        out.append("  rank  local/expected  global/expected  all-reduce (expected)"
                   + ("  busbw GB/s" if bandwidth else "") + "  result")
        for r in (r for r in rows if r["node"] == node):
            local = f"{r['local_devices']}/{r['expected_local']}"
            glob = f"{r['global_devices']}/{r['expected_global']}"
            summed = f"{_short(r['allreduce'])} ({r['expected_sum']})"
            busbw = f"  {r['busbw_gbps']:>10.3f}" if bandwidth and r["busbw_gbps"] is not None else \
                ("  " + "-".rjust(10) if bandwidth else "")
            result = "PASS" if r["ok"] else "FAIL" + (f" (no report: {', '.join(r['missing'])})"
                                                       if r["missing"] else "")
            out.append(f"  {r['rank']:>4}  {local:>14}  {glob:>15}  {summed:>21}{busbw}  {result}")
    passed = sum(r["ok"] for r in rows)
    out.append(f"{passed} of {len(rows)} ranks passed")
    return "\n".join(out)


def _short(values) -> str:
    if not values:
        return "-"
    unique = sorted(set(values))
    return f"{unique[0]:g}" if len(unique) == 1 else ",".join(f"{v:g}" for v in values)



def format_pairs(pairs: list[dict]) -> str:
    """One line per node pair: its bandwidth at the largest message size; '' on one node."""
    if not pairs:
        return ""
    lines = ["bandwidth between nodes (both ways at once, largest message):"]
    for pair in sorted(pairs, key=lambda p: p["rows"][-1]["busbw_gbps"]):
        last = pair["rows"][-1]
        lines.append(f"  {' <-> '.join(pair['nodes'])}: {last['busbw_gbps']:.3f} GB/s at {format_bytes(last['bytes'])}"
                     + ("" if all(r["correct"] for r in pair["rows"]) else "  WRONG DATA"))
    return "\n".join(lines) + "\n"
