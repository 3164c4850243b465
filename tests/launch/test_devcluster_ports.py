"""The dev cluster's daemons listen where no coordinator port hpcjax derives can land.

A job whose id maps onto slurmctld's port fails to rendezvous (process 0 cannot
listen); this once failed CI for job 425. The test renders the cluster's
configuration with the default settings and checks every port in it."""
import re
import subprocess
from pathlib import Path

from hpcjax.protocol import contract

DEVCLUSTER = Path(__file__).resolve().parents[2] / "slurm/devcluster"


def test_no_dev_cluster_port_is_a_derived_coordinator_port(tmp_path):
    base = subprocess.run(["bash", "-c", f"source {DEVCLUSTER}/common.sh; echo $PORT_BASE"],
                          capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"}).stdout
    subprocess.run(["bash", str(DEVCLUSTER / "configs.sh"), str(tmp_path)], check=True,
                   env={"PATH": "/usr/bin:/bin", "NODES": "2", "GPUS": "4", "CPUS": "8", "HOST": "vm",
                        "DIR": str(tmp_path), "PORT_BASE": base.strip()})
    text = "\n".join(p.read_text() for p in tmp_path.glob("*.conf"))
    ports = [int(p) for p in re.findall(r"Port=\[?(\d+)", text)]
    ports += [int(p) for p in re.findall(r"Port=\[\d+-(\d+)\]", text)]
    assert len(ports) >= 5, text  # slurmctld, slurmd, accounting, dbd, storage, node range
    lowest = contract.derived_port(0, 0)
    highest = contract.derived_port(contract.PORT_JOBS - 1, contract.PORT_STEPS - 1)
    clashing = [p for p in ports if lowest <= p <= highest]
    assert not clashing, f"dev cluster ports {clashing} fall in the derived range {lowest}-{highest}"
