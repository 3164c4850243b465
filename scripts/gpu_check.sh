#!/usr/bin/env bash
# The GPU paths, proven on one machine with a GPU in a few minutes (no SLURM there: each rank is
# started as an srun task of a one-node step would be, with SLURM's variables set by hand):
#   1. the GPU as nvidia-smi sees it, and as JAX does;
#   2. the smoke of the one-process-per-GPU layout on every GPU of the machine (hpcjax check all),
#      and, with 2 GPUs or more, of one process owning them all (with one GPU the two layouts are
#      the same job: said, not run);
#   3. the preflight's figures, beside nvidia-smi's view of the same GPU;
#   4. the exit of an unmodified script (tests/data/exit_stall_program.py: a collective in flight
#      when it returns) under the exit guard's hook, its time, and its exit status every way a
#      program ends against bare Python's (tests/data/program_ends.py);
#   5. the training bench's throughput (bench/train_speed.py) on the GPU;
#   6. what `hpcjax site` reads of a GPU node (its node probe: GPUs, driver, CUDA, runtimes, modules).
# Needs JAX with CUDA, NumPy and optax in $PYTHON (default python3); hpcjax itself comes from this
# checkout (PYTHONPATH). Writes its figures to $OUT (default ./gpu-check) and prints a summary.
#   bash scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$(pwd)
PYTHON=${PYTHON:-python3}
OUT=${OUT:-$REPO/gpu-check}
mkdir -p "$OUT"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
host=$(hostname)
say() { echo "== $*" | tee -a "$OUT/summary.txt"; }
: >"$OUT/summary.txt"

say "1. the GPU"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version,clocks.max.sm --format=csv | tee -a "$OUT/summary.txt"
  gpus=$(nvidia-smi -L | grep -c '^GPU ')
else
  say "no nvidia-smi here: JAX runs on the CPU (a rehearsal of this script, not a GPU proof)"
  gpus=1
fi
"$PYTHON" -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, jax.devices())" 2>&1 |
  tail -1 | tee -a "$OUT/summary.txt"

# An srun task of a one-node step: task $1 of $2, owning GPUs $3 (comma-separated), job $4.
step_env() {
  local rank=$1 tasks=$2 devices=$3 job=$4 per_process=$5
  echo SLURM_JOB_ID="$job" SLURM_STEP_ID=0 SLURM_PROCID="$rank" SLURM_LOCALID="$rank" SLURM_NODEID=0 \
    SLURM_NTASKS="$tasks" SLURM_STEP_NUM_TASKS="$tasks" SLURM_NNODES=1 SLURM_JOB_NUM_NODES=1 SLURM_STEP_NUM_NODES=1 \
    SLURM_TASKS_PER_NODE="$tasks" SLURM_STEP_TASKS_PER_NODE="$tasks" SLURM_JOB_NODELIST="$host" \
    SLURM_STEP_NODELIST="$host" SLURMD_NODENAME="$host" CUDA_VISIBLE_DEVICES="$devices" SLURM_STEP_GPUS="$devices" \
    HPCJAX_NODES=1 HPCJAX_GPUS_PER_NODE="$gpus" HPCJAX_GPUS_PER_PROCESS="$per_process" \
    HPCJAX_LOG_DIR="$OUT" JAX_COORDINATOR_ADDRESS="$host:$((20000 + job % 1000))"
}

# Every task of a one-node step at once; the step fails if one does.
run_step() {
  local name=$1 per_process=$2 job=$3; shift 3
  local tasks=$((gpus / per_process)) pids=() rc=0
  for ((rank = 0; rank < tasks; rank++)); do
    devices=$(seq -s, $((rank * per_process)) $((rank * per_process + per_process - 1)))
    env $(step_env "$rank" "$tasks" "$devices" "$job" "$per_process") "$@" >"$OUT/$name-rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
  return $rc
}

say "2. smoke: one process per GPU ($gpus process(es))"
if run_step smoke-k1 1 101 "$PYTHON" -m hpcjax check all; then say "smoke one process per GPU: PASSED"
else say "smoke one process per GPU: FAILED (see $OUT/smoke-k1-rank*.log)"; fi
tail -n 5 "$OUT/smoke-k1-rank0.log" | tee -a "$OUT/summary.txt"
if [ "$gpus" -ge 2 ]; then
  if run_step smoke-kall "$gpus" 102 "$PYTHON" -m hpcjax check all; then say "smoke one process owning $gpus GPUs: PASSED"
  else say "smoke one process owning $gpus GPUs: FAILED (see $OUT/smoke-kall-rank0.log)"; fi
else
  say "smoke one process owning several GPUs: not run (one GPU here: the same job as the one above)"
fi

say "3. preflight's figures, then nvidia-smi's view"
run_step preflight 1 103 "$PYTHON" -m hpcjax preflight; echo "preflight exit $?" | tee -a "$OUT/summary.txt"
grep -hE "preflight|TFLOP|GB/s|GiB|memory|health|PASS|FAIL" "$OUT"/preflight-rank*.log | head -n 20 | tee -a "$OUT/summary.txt"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,memory.total,memory.used,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,ecc.errors.uncorrected.volatile.total \
    --format=csv | tee -a "$OUT/summary.txt"
fi

say "4. the exit of an unmodified script (its last collective in flight), under the guard's hook"
hook="$REPO/hpcjax/rank/watch/exithook"
for how in return exit3 raise3 main4 error hooked interrupt os_exit5 kill; do
  "$PYTHON" "$REPO/tests/data/program_ends.py" "$how" >/dev/null 2>&1; bare=$?
  began=$EPOCHREALTIME
  PYTHONPATH="$hook:$PYTHONPATH" END=$how run_step "exit-$how" 1 $((110 + RANDOM % 500)) "$PYTHON" \
    "$REPO/tests/data/exit_stall_program.py"
  got=$?
  took=$(awk -v a="$began" -v b="$EPOCHREALTIME" 'BEGIN{print b - a}')
  armed=$(grep -c "guard armed: True" "$OUT/exit-$how-rank0.log")
  verdict=$([ "$got" -eq "$bare" ] && echo same || echo DIFFERS)
  printf 'exit %-9s status %3d (bare Python %3d: %s), %.1f s from start to end, guard armed in %s of %s process(es)\n' \
    "$how" "$got" "$bare" "$verdict" "$took" "$armed" "$gpus" | tee -a "$OUT/summary.txt"
done

say "5. training throughput (bench/train_speed.py, every GPU in one process)"
HPCJAX_GPUS_PER_PROCESS=$gpus timeout 240 "$PYTHON" "$REPO/bench/train_speed.py" --steps 20 2>&1 | tail -n 12 |
  tee -a "$OUT/summary.txt"
say "6. what hpcjax site reads of a GPU node (its node probe, here without srun)"
"$PYTHON" -c "import subprocess; from hpcjax.slurm.site import NODE_PROBE, read_node
print(read_node(subprocess.run(['bash', '-lc', NODE_PROBE], capture_output=True, text=True).stdout))" 2>&1 |
  tee -a "$OUT/summary.txt"
say "done: $OUT/summary.txt"
