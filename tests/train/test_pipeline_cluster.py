"""A pipeline across the dev cluster's two nodes: each node is a stage (the stage axis is
outermost), data parallel within it; the losses agree with data parallelism."""

from __future__ import annotations

import numpy as np
import pytest

from test_train import STRATEGY_RTOL
from test_train_scale_cluster import submit, wait_for

pytestmark = pytest.mark.cluster


def test_stages_across_two_nodes_agree_with_data_parallel(tmp_path, slurm_cluster, hpcjax_home):
    layers = ["--layers", "2"]
    pipelined = submit(tmp_path, "pp", "--strategy", "dp_pp", "--stages", "2", "--microbatches", "2", *layers)
    plain = submit(tmp_path, "dp", "--strategy", "dp", *layers)
    (pp_summary, pp_log), (dp_summary, _) = wait_for(tmp_path, pipelined), wait_for(tmp_path, plain)
    assert "mesh stage 2 (across 2 nodes) x replica 1 x data 2 (within a node) x tensor 1" in pp_log
    assert "1 layer(s) on each of 2 stages, 2 micro-batches per step (GPipe): bubble 33.3%" in pp_log
    np.testing.assert_allclose(pp_summary["losses"], dp_summary["losses"], rtol=STRATEGY_RTOL)
    assert pp_summary["val_loss"] == pytest.approx(dp_summary["val_loss"], rel=STRATEGY_RTOL)
