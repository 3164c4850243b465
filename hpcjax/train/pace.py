"""Which rank sets the pace. In synchronous training every rank's step lasts as long as
the slowest rank's, so step times never name it; what differs is who waits. A rank
that is late (a throttled GPU, a busy host, a stopped process) reaches each collective
last and waits in it least; every other rank sits in the collective until it arrives.

So every `pace_every` steps each process traces its last PACE_STEPS steps with JAX's
profiler (a few milliseconds to start and stop) and sums the time it spent in collective
operations (all-reduce, all-gather, reduce-scatter, collective-permute, all-to-all),
each counted on the process's device that arrived last (with several devices per
process, the others also wait for their siblings). The capture ends with the one device synchronisation this adds: once per
interval, never per step. Each process puts its share in the coordination service's
key-value store before the per-step stop barrier (train.stop) and process 0 reads them
all after it: no extra round of waiting.

The rank with the smallest share is the one the others waited for, and the others'
mean share minus its share is how long they waited for it. It is named only when it
waited least in STREAK captures in a row and the others waited at least SLOW_SHARE for
it over them: jitter moves the last arrival from rank to rank, a straggler does not.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import jax

from hpcjax.train.config import PACE_STEPS
from hpcjax.train.stage import Stage
from hpcjax.values.voice import say

SLOW_SHARE = 0.15   # the others wait at least this share of each step for the slow rank
STREAK = 3          # captures in a row a rank must wait least in before it is named
NAMESPACE = "hpcjax/pace"
# HLO collectives as XLA names them in traces (with .N suffixes, -start/-done halves on
# GPU), and NCCL's kernels on a GPU's streams.
COLLECTIVE = re.compile(r"^%?(all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all|"
                        r"ragged-all-to-all|collective-broadcast|nccl)", re.IGNORECASE)


def collective_seconds(events, local_devices: int, platform: str = "cpu") -> float:
    """Seconds this process waited in collectives for other processes, from (plane, line,
    name, start_ns, duration_ns) events of its trace: for each instance of a collective,
    the time of its local device that arrived last (the others of this process also waited
    for that sibling, which says nothing about other processes; a rank stopped mid-step
    leaves its finished devices waiting in the collective for the stopped ones). A GPU or
    TPU has a plane per device (its "XLA Ops" line when there is one, so kernels are not
    counted twice): an op's Nth run on each plane is one instance. On CPU, XLA's thread
    pools' lines of the host plane hold every local device's ops, on whichever thread ran
    them: the local devices of one instance leave it together, so its runs are grouped by
    their ends, split at the widest gaps into as many instances as there are runs per device."""
    events = list(events)
    devices = {plane for plane, *_ in events if plane.startswith("/device:")}
    if not devices and platform != "cpu":
        # The host's lines hold only kernel launches then: their times would say nothing.
        raise ValueError(f"the trace has no {platform} device activity (on NVIDIA GPUs the profiler needs "
                         f"CUPTI and, in many sites, the permission to use it)")
    if devices:
        ops_lines = {(p, line) for p, line, *_ in events if p in devices and line == "XLA Ops"}
        chosen = [e for e in events if e[0] in devices and COLLECTIVE.match(e[2]) and (
            (e[0], e[1]) in ops_lines or not any(p == e[0] for p, _ in ops_lines))]
        return sum(_per_plane_instances(chosen)) / 1e9
    chosen = [e for e in events if e[0] == "/host:CPU" and e[1].startswith("tf_XLA") and COLLECTIVE.match(e[2])]
    return sum(_instances_by_end(chosen, max(1, local_devices))) / 1e9


def _per_plane_instances(events) -> list[int]:
    """The last-arriving device's time of each instance: the minimum over planes of an op's Nth run."""
    runs: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for plane, _, name, start, duration in events:
        runs.setdefault((name, plane), []).append((start, duration))
    instances: dict[tuple[str, int], int] = {}
    for (name, _), found in runs.items():
        for n, (_, duration) in enumerate(sorted(found)):
            instances[name, n] = min(duration, instances.get((name, n), duration))
    return list(instances.values())


def _instances_by_end(events, per_instance: int) -> list[int]:
    """The shortest run of each instance, the runs of one op grouped by when they ended."""
    by_name: dict[str, list[tuple[int, int]]] = {}
    for _, _, name, start, duration in events:
        by_name.setdefault(name, []).append((start + duration, duration))
    shortest = []
    for runs in by_name.values():
        runs.sort()
        count = max(1, round(len(runs) / per_instance))
        gaps = sorted(range(1, len(runs)), key=lambda i: runs[i][0] - runs[i - 1][0], reverse=True)
        cuts = [0, *sorted(gaps[:count - 1]), len(runs)]
        shortest += [min(d for _, d in runs[a:b]) for a, b in zip(cuts, cuts[1:])]
    return shortest


@dataclass(frozen=True)
class Verdict:
    waited_for: int | None   # the rank that waited least in this capture (None: one rank)
    others_wait: float       # the others' mean share of a step in collectives, minus that rank's
    named: int | None        # the rank named slow over the last STREAK captures, or None
    named_wait: float = 0.0  # how long the others waited for it, over those captures


def judge_capture(shares: list[float]) -> tuple[int | None, float]:
    """(the rank that waited least, the others' mean share minus its share)."""
    if len(shares) < 2:
        return None, 0.0
    slowest = min(range(len(shares)), key=shares.__getitem__)
    others = [s for r, s in enumerate(shares) if r != slowest]
    return slowest, sum(others) / len(others) - shares[slowest]


class Judge:
    """Process 0's judgement over the last STREAK captures: a rank is named when it waited
    least in every one of them and the others waited at least SLOW_SHARE for it on
    average (a single capture may miss a straggler's pauses: it traces only a few steps).
    The name is cleared when the others' average wait drops under SLOW_SHARE."""

    def __init__(self) -> None:
        self.recent: list[list[float]] = []
        self.named: int | None = None

    def __call__(self, shares: list[float]) -> Verdict:
        waited_for, others_wait = judge_capture(shares)
        self.recent = (self.recent + [shares])[-STREAK:]
        mean = [sum(column) / len(self.recent) for column in zip(*self.recent)]
        candidate, mean_wait = judge_capture(mean)
        if candidate is not None and mean_wait < SLOW_SHARE:
            self.named = None
        elif len(self.recent) == STREAK and all(judge_capture(c)[0] == candidate for c in self.recent):
            self.named = candidate
        return Verdict(waited_for, others_wait, self.named, mean_wait if self.named is not None else 0.0)


def describe(verdict: Verdict, hosts: list[str]) -> str:
    """What rank 0's progress line says; empty while no rank is named."""
    if verdict.named is None:
        return ""
    return (f"slow: rank {verdict.named} on {hosts[verdict.named]}, "
            f"others wait {round(100 * verdict.named_wait)} % of each step for it")


def read_trace(directory: Path) -> list[tuple[str, str, str, int]]:
    from jax.profiler import ProfileData

    found = sorted(directory.rglob("*.xplane.pb"))
    if not found:
        return []
    data = ProfileData.from_file(str(found[-1]))
    return [(plane.name, line.name, event.name, event.start_ns, event.duration_ns)
            for plane in data.planes for line in plane.lines for event in line.events]


class PaceMeter(Stage):
    """Captures, shares and (on process 0) judges; `record` holds the latest capture's
    record for metrics.jsonl until the loop takes it."""

    def __init__(self, client, host: str, every: int, start: int, avoid: tuple[int, int] | None) -> None:
        self.client, self.host, self.every, self.start = client, host, every, start
        self.avoid = avoid  # the user's own profiler range: one trace at a time
        self.process, self.processes = jax.process_index(), jax.process_count()
        self.judge, self.record, self.mine = Judge(), None, None
        self.said: set[str] = set()  # the reasons a capture failed, said once each
        self.trace_dir: Path | None = None
        self.began, self.failure = 0.0, None

    def _captures(self, first: int) -> bool:
        last = first + PACE_STEPS - 1
        # Not in a run's first interval: its first steps compile and warm up at different speeds.
        return (self.every > 0 and (last + 1) % self.every == 0 and first >= self.start + self.every
                and not (self.avoid and first <= self.avoid[1] and last >= self.avoid[0]))

    def before_step(self, step: int) -> None:
        if self._captures(step):
            self.trace_dir, self.failure = Path(tempfile.mkdtemp(prefix="hpcjax-pace-")), None
            try:
                jax.profiler.start_trace(str(self.trace_dir))
            except Exception as error:  # e.g. a capture from TensorBoard is running
                self.failure = f"no trace: {error}"
                self._clean()
            self.began = time.perf_counter()

    def after_step(self, step: int, learning_rate: float, outputs) -> None:
        """After the record writer (a stage outside this one): its clock takes a capture's
        wait as that step's time, so no false tokens/s spike follows."""
        if not self._captures(step - PACE_STEPS + 1):
            return
        if self.trace_dir is None:  # shared anyway: every process shares after the same steps
            self.mine = {"error": self.failure or "no trace"}
            return
        jax.block_until_ready(outputs)  # the traced steps' device work belongs in the trace
        traced_s = time.perf_counter() - self.began
        try:
            jax.profiler.stop_trace()
            collective_s = collective_seconds(read_trace(self.trace_dir), jax.local_device_count(),
                                              jax.devices()[0].platform)
            self.mine = {"collective_s": collective_s, "traced_s": traced_s}
        except Exception as error:  # a trace it cannot read is no reason to stop training
            self.mine = {"error": f"unreadable trace: {error}"}
        self._clean()

    def _clean(self) -> None:
        if self.trace_dir is not None:
            shutil.rmtree(self.trace_dir, ignore_errors=True)
            self.trace_dir = None

    def close(self) -> None:
        if self.trace_dir is not None:  # the run stopped inside a capture
            jax.profiler.stop_trace()
            self._clean()

    def publish(self, step: int) -> bool:
        """Before the stop barrier after `step`: share this process's capture, if one just ended."""
        if self.mine is None:
            return False
        self.client.key_value_set(f"{NAMESPACE}/{step}/{self.process}", json.dumps({**self.mine, "host": self.host}))
        self.mine = None
        return True

    def collect(self, step: int) -> None:
        """After the barrier, on process 0: every process's capture (each was set before it)."""
        if self.process != 0:
            return
        prefix = f"{NAMESPACE}/{step}/"
        entries = {key.rsplit("/", 1)[-1]: json.loads(value) for key, value in self.client.key_value_dir_get(prefix)}
        self.client.key_value_delete(prefix)  # the store lives as long as the job: keep it small
        ranks = [entries.get(str(r), {"error": "no capture shared", "host": "?"}) for r in range(self.processes)]
        errors = sorted({r["error"] for r in ranks if "error" in r})
        if errors:
            if set(errors) - self.said:  # each reason once, not every interval
                say(f"hpcjax: which rank is slow is unknown after step {step}: {'; '.join(errors)}")
                self.said |= set(errors)
            return
        shares = [r["collective_s"] / r["traced_s"] for r in ranks]
        hosts = [r["host"] for r in ranks]
        verdict = self.judge(shares)
        self.record = {"step": step, "pace": {
            "steps": PACE_STEPS, "collective_s": [r["collective_s"] for r in ranks],
            "traced_s": [r["traced_s"] for r in ranks], "hosts": hosts, "waited_for": verdict.waited_for,
            "others_wait": verdict.others_wait, "slow_rank": verdict.named, "named_wait": verdict.named_wait,
            "slow": describe(verdict, hosts)}}

    def take(self) -> dict | None:
        record, self.record = self.record, None
        return record
