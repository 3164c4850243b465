"""Bad input and seams, round five (issue 63), on the dev cluster: a job's options that its hold
decides (partition, account, QOS, a time past the hold's end) are refused before the job is queued,
from the CLI and the Python API alike; what the hold can give still runs. The cases without SLURM:
tests/cli/test_bad_input_five.py."""

from __future__ import annotations

import json
import os
import time

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

        # Issue 63: a cancelled job in a hold was "exit code 1" and "failed on node2" (srun's line of the cancel)
        working = run_hpcjax("submit", "--on", name, "--nodes", "1", "--", "python3", "-c",
                             "import time; print('working', flush=True); time.sleep(300)", cwd=tmp_path).stdout.strip()
        deadline = time.monotonic() + 120
        while "working" not in run_hpcjax("logs", working, cwd=tmp_path).stdout:
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(1)
        assert run_hpcjax("cancel", working, cwd=tmp_path).returncode == 0
        said = ""
        while "ended CANCELLED" not in said:
            assert time.monotonic() < deadline + 60, said
            said = run_hpcjax("status", working, cwd=tmp_path).stdout
            time.sleep(1)
        assert f"job {working} ended CANCELLED\n" in said and "failed on" not in said and "(exit code" not in said, said
    finally:
        run_hpcjax("release", name, cwd=tmp_path)



def test_free_says_never_where_submit_would_refuse_and_names_a_partition_slurm_lacks(tmp_path, slurm_cluster,
                                                                                    hpcjax_home):
    """Issue 63: `free --time 02:00:00` said "now" for partition a100 (its limit: 1 hour), where submit
    refuses the same request; `--partition nosuch` exited 0 with nothing."""
    done = run_hpcjax("free", "--time", "02:00:00", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = {row["partition"]: row for row in json.loads(done.stdout)}
    assert rows["a100"]["start"] == "never: --time 02:00:00 is over partition a100's limit of 01:00:00", rows
    assert not rows["gpu"]["start"].startswith("never"), rows  # SLURM's own estimate there
    refused = run_hpcjax("submit", "--partition", "a100", "--time", "02:00:00", "--dry-run", "--", "true", cwd=tmp_path)
    assert refused.returncode == 2 and "is over partition a100's limit of 01:00:00" in refused.stderr  # the one rule
    missing = run_hpcjax("free", "--partition", "nosuch", cwd=tmp_path)
    assert missing.returncode == 2 and missing.stderr.startswith("error: --partition 'nosuch': ") and \
        "it has gpu (default), a100" in missing.stderr, missing.stderr
