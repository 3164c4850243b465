"""The smoke test's table when ranks report nothing (hpcjax.follow.verdicts): their node where the
run knows it, their first cause from their own log, "-" for what no rank said. The same on the dev
cluster, with ranks whose Python cannot start: tests/launch/test_triage_cluster.py."""

from types import SimpleNamespace

from hpcjax.follow import verdicts

LOGS = {0: "Fatal Python error: init_fs_encoding\nModuleNotFoundError: No module named 'encodings'\n",
        1: "python3: error while loading shared libraries: libffi.so.8: cannot open shared object file: No such file "
           "or directory\n"}


class SilentRun:
    def rank_logs(self):
        return {0: "r0", 1: "r1"}

    def read_log(self, path):
        return LOGS[int(path[1])]

    def hosts(self):
        return {1: "node2"}


def test_a_rank_that_reported_nothing_shows_its_node_and_first_cause():
    outcome = SimpleNamespace(failed=(SimpleNamespace(rank=0, host="node1"),))
    silent = verdicts.silent_ranks(SilentRun(), {}, 2, outcome)
    assert silent == {0: ("node1", "ModuleNotFoundError: No module named 'encodings'"),
                      1: ("node2", "python3: error while loading shared libraries: libffi.so.8: cannot open shared "
                                   "object file: No such file or directory")}
    table = verdicts.format_table(verdicts.verdicts({}, 2, False, silent), False)
    assert "None" not in table and "node ?" not in table, table
    assert "node node2\n  rank  local/expected" in table
    assert "        first cause: python3: error while loading shared libraries: libffi.so.8" in table
    assert "     0             -/-              -/-                  - (-)  FAIL (no report: devices, allreduce)" \
        in table


def test_a_rank_stopped_before_it_wrote_points_at_the_rank_that_failed():
    """Under load srun ends the step at rank 1's failure before rank 0 wrote anything (CI of 25b7cb0:
    'slurmstepd ... CANCELLED' or an empty log as rank 0's 'first cause')."""
    class StoppedRun(SilentRun):
        def read_log(self, path):
            return {"r0": "slurmstepd-node1: error: *** STEP 4825.0 ON node1 CANCELLED AT 2026-12-06T20:31:57 ***\n",
                    "r1": LOGS[0]}[path]

    silent = verdicts.silent_ranks(StoppedRun(), {}, 2, SimpleNamespace(failed=()))
    assert silent[1] == ("node2", "ModuleNotFoundError: No module named 'encodings'")
    assert silent[0] == ("?", "none in its own log (slurmstepd-node1: error: *** STEP 4825.0 ON node1 CANCELLED AT "
                              "2026-12-06T20:31:57 ***); rank 1's: ModuleNotFoundError: No module named 'encodings'")


def test_without_any_cause_a_rank_shows_its_last_line_or_an_empty_log():
    class QuietRun(SilentRun):
        def read_log(self, path):
            return {"r0": "", "r1": "something odd\n"}[path]

    silent = verdicts.silent_ranks(QuietRun(), {}, 2, SimpleNamespace(failed=()))
    assert silent == {0: ("?", "its log is empty"), 1: ("node2", "something odd")}
