#!/usr/bin/env bash
# The main job, from a fresh clone: install hpcjax, then prove the 2-node x 4-GPU
# layout (device counts and an all-reduce on every rank). With SLURM on this
# machine the job goes to the cluster; without it, it runs on this machine's CPU
# with the GPUs emulated as CPU devices.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -e .
# pyenv only sees a new console script after a rehash.
if command -v pyenv >/dev/null; then pyenv rehash; fi
exec python3 -m hpcjax smoke --nodes 2 --gpus-per-node 4 "$@"
