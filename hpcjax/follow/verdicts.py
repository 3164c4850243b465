"""The smoke test's verdict: every rank of its job ran `python -m hpcjax check all --json` and
wrote one JSON line per check into its log; here those lines are gathered into a table per node
and rank with pass/fail. (The job itself is built by the `smoke` verb, cli/smoke.py.)"""

from __future__ import annotations

from hpcjax.values import jsonlines
from hpcjax.values.errors import HpcjaxError
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


def silent_ranks(run, reports: dict[int, dict[str, dict]], num_processes: int, outcome) -> dict[int, tuple]:
    """rank -> (its node, the first cause its log shows) for each rank that reported nothing (its
    Python could not start, a library would not load, ...): the node where the run knows it (the
    job's nodes, srun's report), the cause from the rank's own log (follow.triage), else its last line."""
    from hpcjax.follow.triage import first_cause

    try:
        hosts = run.hosts()
    except HpcjaxError:  # where it ran is a detail of the table: not known (accounting down), it is '?'
        hosts = {}
    hosts.update({failure.rank: failure.host for failure in getattr(outcome, "failed", ())})
    logs, causes, last_lines = run.rank_logs(), {}, {}
    for rank in range(num_processes):
        if reports.get(rank):
            continue
        text = run.read_log(logs[rank]) if rank in logs else ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        causes[rank], last_lines[rank] = first_cause(text), (lines[-1] if lines else "its log is empty")
    # A rank whose log shows no cause of its own was most often stopped because another failed (srun
    # ends the step at the first failure; under load the others have not written yet: CI of 25b7cb0,
    # "slurmstepd ... CANCELLED" or an empty log): it points at the rank that has one.
    failed_first = next((rank for rank, cause in causes.items() if cause), None)
    found = {}
    for rank, cause in causes.items():
        if not cause and failed_first is not None:
            cause = f"none in its own log ({last_lines[rank]}); rank {failed_first}'s: {causes[failed_first]}"
        found[rank] = (hosts.get(rank, "?"), cause or last_lines[rank])
    return found


def verdicts(reports: dict[int, dict[str, dict]], num_processes: int, bandwidth: bool,
             silent: dict[int, tuple] | None = None) -> list[dict]:
    """One row per expected rank: what it reported and whether it passed; a rank that reported
    nothing, with its node and first cause where `silent` (silent_ranks) knows them."""
    wanted = ALL_CHECKS + (("bandwidth",) if bandwidth else ())
    rows = []
    for rank in range(num_processes):
        mine = reports.get(rank, {})
        devices, allreduce, bw = mine.get("devices", {}), mine.get("allreduce", {}), mine.get("bandwidth", {})
        missing = [c for c in wanted if c not in mine]
        node, cause = (silent or {}).get(rank, ("?", ""))
        rows.append({
            "rank": rank, "node": devices.get("node", node), "first_cause": cause,
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
            local = f"{_known(r['local_devices'])}/{_known(r['expected_local'])}"
            glob = f"{_known(r['global_devices'])}/{_known(r['expected_global'])}"
            summed = f"{_short(r['allreduce'])} ({_known(r['expected_sum'])})"
            busbw = f"  {r['busbw_gbps']:>10.3f}" if bandwidth and r["busbw_gbps"] is not None else \
                ("  " + "-".rjust(10) if bandwidth else "")
            result = "PASS" if r["ok"] else "FAIL" + (f" (no report: {', '.join(r['missing'])})"
                                                       if r["missing"] else "")
            out.append(f"  {r['rank']:>4}  {local:>14}  {glob:>15}  {summed:>21}{busbw}  {result}")
            if r.get("first_cause"):
                out.append(f"        first cause: {r['first_cause'][:300]}")
    passed = sum(r["ok"] for r in rows)
    out.append(f"{passed} of {len(rows)} ranks passed")
    return "\n".join(out)


def _known(value) -> str:
    return "-" if value is None else str(value)


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
