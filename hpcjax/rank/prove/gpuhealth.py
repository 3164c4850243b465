"""A node's GPUs as `nvidia-smi`'s query interface reports them, and what in that report makes
a node unfit to train on: uncorrectable ECC errors, pages waiting to be retired or rows to be
remapped (a reset is due), a failed remapping, hardware or thermal slowdown, a PCIe link
narrower than it can be. Standard library only; a node without nvidia-smi reports nothing.

The parsing is tested on outputs in nvidia-smi's CSV format (tests/rank/test_preflight_rules.py);
no GPU was at hand to record them from, and the dev cluster's GPUs are emulated.
"""

from __future__ import annotations

import shutil
import subprocess

FIELDS = ("index", "name", "ecc.errors.uncorrected.volatile.total", "retired_pages.pending",
          "remapped_rows.pending", "remapped_rows.failure", "clocks_throttle_reasons.hw_slowdown",
          "clocks_throttle_reasons.hw_thermal_slowdown", "pcie.link.width.current", "pcie.link.width.max")
# Older drivers refuse the fields they do not know: the query is asked again with these.
BASIC_FIELDS = ("index", "name", "ecc.errors.uncorrected.volatile.total", "pcie.link.width.current",
                "pcie.link.width.max")
UNKNOWN = ("[N/A]", "[Not Supported]", "N/A", "")


def query(fields=FIELDS) -> list[str]:
    return ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]


def read() -> tuple[list[dict], str]:
    """(this node's GPUs, '' or why they could not be read); ([], '') without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return [], ""
    for fields in (FIELDS, BASIC_FIELDS):
        try:
            done = subprocess.run(query(fields), capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as error:
            return [], f"nvidia-smi did not answer: {error}"
        if done.returncode == 0:
            return parse(done.stdout, fields), ""
    return [], f"nvidia-smi failed: {(done.stderr or done.stdout).strip()[:200]}"


def parse(text: str, fields=FIELDS) -> list[dict]:
    """One dict per GPU line; values as nvidia-smi wrote them, stripped."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            continue
        gpus.append(dict(zip(fields, values)))
    return gpus


def problems(gpus: list[dict]) -> list[str]:
    """What makes these GPUs unfit, one phrase each, GPU by GPU."""
    found = []
    for gpu in gpus:
        name = f"GPU {gpu.get('index', '?')}"
        ecc = gpu.get("ecc.errors.uncorrected.volatile.total", "")
        if ecc not in UNKNOWN and ecc.isdigit() and int(ecc) > 0:
            found.append(f"{name}: {ecc} uncorrectable ECC error(s)")
        if gpu.get("retired_pages.pending") == "Yes":
            found.append(f"{name}: retired pages pending (the GPU needs a reset)")
        if gpu.get("remapped_rows.pending") == "Yes":
            found.append(f"{name}: row remapping pending (the GPU needs a reset)")
        if gpu.get("remapped_rows.failure") == "Yes":
            found.append(f"{name}: row remapping failed")
        if gpu.get("clocks_throttle_reasons.hw_slowdown") == "Active":
            found.append(f"{name}: hardware slowdown active")
        if gpu.get("clocks_throttle_reasons.hw_thermal_slowdown") == "Active":
            found.append(f"{name}: thermal slowdown active")
        now, most = gpu.get("pcie.link.width.current", ""), gpu.get("pcie.link.width.max", "")
        if now.isdigit() and most.isdigit() and int(now) < int(most):
            found.append(f"{name}: PCIe link x{now} of x{most}")
    return found
