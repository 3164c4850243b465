#!/usr/bin/env bash
# The main job, from a fresh clone: install hpcjax, then run a 2-node x 4-GPU job.
# With SLURM on this machine it is submitted and followed to its end; without
# SLURM the script it would submit is printed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python3 -m pip install -q --disable-pip-version-check -e .
if command -v sbatch >/dev/null; then
  exec hpcjax submit --nodes 2 --gpus-per-node 4 --wait "$@" -- \
    bash -c 'echo "rank $SLURM_PROCID on $SLURMD_NODENAME sees GPU(s) $CUDA_VISIBLE_DEVICES"'
fi
exec hpcjax render --nodes 2 --gpus-per-node 4 "$@" -- python train.py
