import shutil
import subprocess

import pytest

from hpcjax.values.nodelist import HostlistError, expand_hostlist, ranges

CASES = [
    ("node1", ["node1"]),
    ("node[5]", ["node5"]),
    ("node[1-3]", ["node1", "node2", "node3"]),
    ("node[1-2]-ib", ["node1-ib", "node2-ib"]),
    ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
    ("gpu[008-011]", ["gpu008", "gpu009", "gpu010", "gpu011"]),
    ("n[9-11]", ["n9", "n10", "n11"]),
    ("n[001-3]", ["n001", "n002", "n003"]),
    ("a[1-3],b,c[01,05-06]", ["a1", "a2", "a3", "b", "c01", "c05", "c06"]),
    ("a,b", ["a", "b"]),
    ("n[1,3-4]x[7-8]", ["n1x7", "n1x8", "n3x7", "n3x8", "n4x7", "n4x8"]),
    ("x-[1-2].ib", ["x-1.ib", "x-2.ib"]),
    ("cn-0[1-2],gn[3]", ["cn-01", "cn-02", "gn3"]),
]


@pytest.mark.parametrize("hostlist, hosts", CASES)
def test_expand(hostlist, hosts):
    assert expand_hostlist(hostlist) == hosts


@pytest.mark.cluster
@pytest.mark.parametrize("hostlist, hosts", CASES)
def test_agrees_with_slurm_where_slurm_can_parse(hostlist, hosts):
    assert shutil.which("scontrol"), "SLURM's scontrol is the oracle; the test command installs it"
    out = subprocess.run(["scontrol", "show", "hostnames", hostlist], capture_output=True, text=True)
    if "Invalid hostlist" not in out.stderr:  # SLURM 22.05 rejects suffixes after a bracket; we do not
        assert out.stdout.split() == hosts


@pytest.mark.parametrize("bad", ["", "node[1-2", "node]1[", "node[a-b]", "node[3-1]", "a,,b", "n[[1]]"])
def test_malformed(bad):
    with pytest.raises(HostlistError) as err:
        expand_hostlist(bad)
    assert "hint" not in err.value.message and err.value.hint


@pytest.mark.parametrize("numbers, text", [([0, 1, 2, 4, 5, 7], "0-2,4-5,7"), ([3], "3"), ([0, 2], "0,2"), ([], "")])
def test_numbers_in_slurms_range_notation(numbers, text):
    """One writer of ranges, for the login side's reports and the rank side's rendezvous alike."""
    assert ranges(numbers) == text
    assert ranges(numbers, ", ") == text.replace(",", ", ")
