"""Bad input and seams, round five (issue 63), on the dev cluster: a job's options that its hold
decides (partition, account, QOS, a time past the hold's end) are refused before the job is queued,
from the CLI and the Python API alike; what the hold can give still runs. The cases without SLURM:
tests/cli/test_bad_input_five.py."""

from __future__ import annotations

import json
import os

import pytest

import hpcjax
from conftest import run_hpcjax
from hpcjax.values.errors import UsageError

pytestmark = pytest.mark.cluster


def test_a_job_in_a_hold_is_refused_what_the_hold_is_not_and_runs_with_what_it_is(tmp_path, slurm_cluster,
                                                                                 hpcjax_home):
    """Issue 63: --partition a100 in a hold of partition gpu, --qos gpu2 --account physics, and
    --time 05:00:00 in a 20-minute hold each ran in the hold without a word (--gpu-type was the only
    one refused)."""
    name = f"f{os.getpid()}"
    done = run_hpcjax("hold", "--name", name, "--nodes", "1", "--gpus-per-node", "1", "--time", "20", cwd=tmp_path,
                      timeout=300)
    assert done.returncode == 0, done.stderr
    held = done.stdout.strip()
    try:
        for argv, words in ((["--partition", "a100"], f"--partition a100: hold {name} (job {held}) runs with "
                                                      "partition gpu"),
                            (["--qos", "gpu2", "--account", "physics"], f"--account physics: hold {name}"),
                            (["--qos", "gpu2"], "--qos gpu2: hold"),
                            (["--time", "05:00:00"], f"--time 05:00:00: hold {name} (job {held}) has ")):
            refused = run_hpcjax("submit", "--on", name, "--nodes", "1", *argv, "--", "true", cwd=tmp_path)
            assert refused.returncode == 2, (argv, refused.stderr)
            assert refused.stderr.startswith(f"error: {words}") and "\n\nhint: " in refused.stderr, refused.stderr
            assert refused.stdout == ""
        assert "left of its 00:20:00; the job would end with the hold" in refused.stderr
        recorded = [run["job_id"] for run in json.loads(run_hpcjax("runs", "--json", cwd=tmp_path).stdout)]
        assert recorded == [held], "a refused job was recorded"

        with pytest.raises(UsageError, match="--partition a100: hold"):  # the Python API's own submit
            hpcjax.remote(on=name, nodes=1, gpus_per_node=1, partition="a100", backend="slurm",
                          storage_path=str(tmp_path / "calls"))(abs).submit(-1)

        fits = run_hpcjax("submit", "--on", name, "--nodes", "1", "--partition", "gpu", "--time", "2", "--wait", "--",
                          "true", cwd=tmp_path, timeout=300)
        assert fits.returncode == 0, fits.stderr
    finally:
        run_hpcjax("release", name, cwd=tmp_path)

