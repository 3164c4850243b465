"""The backend seam (issue 35): a backend of the test suite's own, registered here and nowhere in
hpcjax, takes jobs through the one pipeline and answers `submit`, `status`, `logs`, `cancel`,
`runs` and `runs show`, with no change to hpcjax's modules. It starts each rank as a detached
shell of this machine that writes its exit code beside its log (a stand-in for a scheduler
whose jobs outlive the submitting process); what it must implement is the table's interface
(docs/architecture.md: "Adding a backend")."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hpcjax import backends
from hpcjax.protocol import contract
from hpcjax.backends import Backend, Queued, register
from hpcjax.catalog import keep, records
from support import cli
from hpcjax.follow.outcome import Outcome, TaskEvent, analyze
from hpcjax.follow.run import Run


def exit_file(log_dir, job: str, rank: int) -> Path:
    return Path(log_dir) / f"{job}-rank{rank}.exit"


class DetachedRun(Run):
    backend = "detached"
    poll_s = 0.1

    def poll(self) -> tuple[str, str]:
        record = records.load(self.job_id) or {}
        if record.get("cancelled"):
            return "CANCELLED", "CANCELLED"
        codes = [exit_file(self.log_dir, self.job_id, r).read_text().strip() if exit_file(self.log_dir, self.job_id, r)
                 .exists() else None for r in range(self.num_ranks)]
        if None in codes:
            return "RUNNING", f"RUNNING: {codes.count(None)} of {self.num_ranks} shells"
        return ("COMPLETED" if set(codes) == {"0"} else "FAILED"), "done"

    def cancel(self) -> None:
        for pid in (records.load(self.job_id) or {}).get("pids", []):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
        keep.update(self.job_id, cancelled=True, state="CANCELLED")

    def hosts(self) -> dict[int, str]:
        return {r: "here" for r in range(self.num_ranks)}

    def _finish(self, state: str) -> Outcome:
        codes = {r: exit_file(self.log_dir, self.job_id, r).read_text().strip() for r in range(self.num_ranks)
                 if exit_file(self.log_dir, self.job_id, r).exists()}
        events = [TaskEvent((r,), "here", f"Exited with exit code {c}", True) for r, c in codes.items() if c != "0"]
        return analyze(self.job_id, state, events, lambda r: contract.rank_log_path(self.log_dir, self.job_id, r))


@register
class DetachedBackend(Backend):
    name = "detached"
    order = 200  # never what "auto" picks
    shared_storage = False

    def check(self, sub, probe) -> None:
        if sub.spec.layout.num_processes > 4:
            from hpcjax.values.errors import UsageError

            raise UsageError("the detached backend runs at most 4 shells", "ask for fewer GPUs")

    def render(self, sub) -> tuple[str, str]:
        return " ".join(sub.spec.command) + "\n", "dry run: each shell would run:"

    def queue(self, sub) -> list:  # started at once: its shells need nobody to follow them
        job = records.new_local_id(int(time.time() * 1000))
        ranks, pids = sub.spec.layout.num_processes, []
        for rank in range(ranks):
            log = contract.rank_log_path(sub.log_dir, job, rank)
            shell = f'{" ".join(sub.spec.command)} > "{log}" 2>&1; echo $? > "{exit_file(sub.log_dir, job, rank)}"'
            pids.append(subprocess.Popen(["sh", "-c", shell], start_new_session=True).pid)
        return [Queued(DetachedRun(job, sub.log_dir, ranks), job, None, (("pids", pids), ("state", "RUNNING")))]

    def attach(self, job_id: str, record: dict | None, cluster) -> DetachedRun:
        return DetachedRun(job_id, record["output_dir"], contract.Layout.from_dict(record["layout"]).num_processes)

    def refresh(self, conn, rows: list[dict]) -> None:
        for row in rows:
            state = self.attach(row["job_id"], records.load(row["key"]), None).state()
            keep.update(row["key"], state=state)


def test_a_backend_defined_in_the_tests_takes_jobs_through_every_verb(tmp_path, hpcjax_home):
    assert "detached" in backends.names() and backends.choose("auto").name != "detached"
    code, out, err = cli(tmp_path, "submit", "--backend", "detached", "--gpus-per-node", "2", "--", "echo", "hello")
    assert code == 0, err
    job = out.strip()
    deadline = time.monotonic() + 30
    while (status := cli(tmp_path, "status", job))[1].find("COMPLETED") < 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert f"job {job} (detached): COMPLETED" in status[1], status
    code, out, _ = cli(tmp_path, "logs", job)
    assert code == 0 and "[rank 0 here] hello" in out and "[rank 1 here] hello" in out, out
    code, out, _ = cli(tmp_path, "submit", "--backend", "detached", "--", "sleep", "60")
    sleeper = out.strip()
    assert cli(tmp_path, "cancel", sleeper)[0] == 0
    assert json.loads(cli(tmp_path, "status", sleeper, "--json")[1])["state"] == "CANCELLED"
    rows = {r["job_id"]: r for r in json.loads(cli(tmp_path, "runs", "--json")[1])}
    assert (rows[job]["backend"], rows[job]["state"], rows[job]["command"]) == ("detached", "COMPLETED",
                                                                                ["echo", "hello"])
    assert rows[sleeper]["state"] == "CANCELLED"
    code, out, _ = cli(tmp_path, "runs", "show", job)
    assert code == 0 and f"run {job} (hpcjax, command, detached): COMPLETED" in out, out
    code, out, err = cli(tmp_path, "submit", "--backend", "detached", "--gpus-per-node", "8", "--", "true")
    assert code == 2 and "the detached backend runs at most 4 shells" in err  # its own check, before anything
    code, out, err = cli(tmp_path, "submit", "--backend", "detached", "--dry-run", "--", "echo", "x")
    assert code == 0 and out == "echo x\n" and "each shell would run" in err


@pytest.mark.parametrize("name", ["nope", ""])
def test_an_unknown_backend_lists_the_registered_ones(tmp_path, hpcjax_home, name):
    code, _, err = cli(tmp_path, "submit", "--backend", name, "--", "true")
    assert code == 2 and "valid backends: auto, slurm, " in err and "detached" in err
