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


def release_ports(tmp_path, release: str) -> list[int]:
    """Every port the release's cluster configuration names (releases.sh's row, configs.sh's text)."""
    row = subprocess.run(["bash", "-c", f"source {DEVCLUSTER}/releases.sh; release_row {release}; "
                          "echo $RELEASE_PORT_BASE $RELEASE_CLUSTER $SLURM_VERSION $STRICT"],
                         capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"}).stdout.split()
    out = tmp_path / release
    out.mkdir()
    subprocess.run(["bash", str(DEVCLUSTER / "configs.sh"), str(out)], check=True,
                   env={"PATH": "/usr/bin:/bin", "NODES": "2", "GPUS": "4", "CPUS": "8", "HOST": "vm", "DIR": str(out),
                        "PORT_BASE": row[0], "CLUSTER": row[1], "RELEASE": row[2], "DB_PORT": "7803",
                        "STRICT": row[3] if len(row) > 3 else ""})
    text = (out / "slurm.conf").read_text() + (out / "slurmdbd.conf").read_text()
    ports = {int(p) for p in re.findall(r"Port=\[?(\d+)", text)}
    ports |= {p for low, high in re.findall(r"Port=\[(\d+)-(\d+)\]", text) for p in range(int(low), int(high) + 2)}
    return sorted(ports - {7803})  # the one MariaDB, 22.05's, serves them all


def test_every_releases_cluster_has_ports_of_its_own_outside_the_derived_range(tmp_path):
    """up.sh --release R runs several clusters side by side: no port may be two clusters', nor a
    coordinator port hpcjax derives."""
    releases = ("20.11", "22.05", "24.11", "26.05", "strict")
    owners: dict[int, str] = {}
    lowest = contract.derived_port(0, 0)
    for release in releases:
        for port in release_ports(tmp_path, release):
            assert port not in owners, f"port {port} is both {owners[port]}'s and {release}'s"
            assert port < lowest, f"{release}'s port {port} is in the derived coordinator range"
            owners[port] = release
    strict = (tmp_path / "strict" / "slurm.conf").read_text()
    assert "AccountingStorageEnforce=associations,limits,qos" in strict and "JobSubmitPlugins=lua" in strict
    assert (tmp_path / "24.11" / "cgroup.conf").read_text().strip() == "CgroupPlugin=disabled"
    assert not (tmp_path / "20.11" / "cgroup.conf").exists()  # 20.11's slurmd would not read the key
