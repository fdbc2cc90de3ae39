#!/usr/bin/env bash
# The GPU backend's checks on a machine with NVIDIA GPUs (docs/gpu.md "Run on a GPU"):
#   1. gpu_check_kernels: every Device kernel against the CPU reference;
#   2. gpu_check_nccl: under mpirun with one rank per GPU (2, 4 or 8), else one rank alone;
#   3. validate --backend gpu --emulate-rank 0 of real-size ranks: a 1B model (dp 8) and
#      Llama-2-7B (NeMo's dp 4 x tp 2 recipe, and dp 8 x tp 1), one or two micro-batches per rank, 3 steps;
#   4. calibrate --backend gpu on one rank (GEMMs at Llama-2-7B's shapes, kernels).
# Usage: scripts/gpu_checks.sh [BIN_DIR] [OUT_DIR]
#   BIN_DIR holds paraplan, libparaplan_gpu_module.so, gpu_check_kernels and gpu_check_nccl
#   (default: this checkout's build/ tree); OUT_DIR receives one log per check (default: gpu-checks/).
# Exit status: the number of checks that failed. Every step has a time limit.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${1:-}
out=${2:-gpu-checks}
mkdir -p "$out"
if [[ -z $bin ]]; then
  paraplan=build/paraplan kernels=build/tests/gpu/gpu_check_kernels nccl=build/tests/gpu/gpu_check_nccl
else
  paraplan=$bin/paraplan kernels=$bin/gpu_check_kernels nccl=$bin/gpu_check_nccl
  export PARAPLAN_GPU_MODULE_PATH=$bin/libparaplan_gpu_module.so
fi
export PARAPLAN_PROGRESS=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failed=0
step() {  # name, time limit, command...
  local name=$1 limit=$2
  shift 2
  echo "=== $name"
  local t0=$SECONDS
  timeout -s KILL "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "rc=$rc in $((SECONDS - t0)) s"
  tail -n 12 "$out/$name.log"
  ((rc == 0 || rc == 77)) || failed=$((failed + 1))
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not found"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
cluster=h200-node.yaml  # the predicted runtime and the usable memory follow the GPU
nvidia-smi -L 2>/dev/null | grep -q 'H100' && cluster=dgx-h100.yaml
nvidia-smi -L 2>/dev/null | grep -q 'A100' && cluster=dgx-a100-80gb.yaml
step kernels 300 "$kernels"
if ((gpus >= 2)) && command -v mpirun >/dev/null; then
  n=$((gpus >= 8 ? 8 : gpus >= 4 ? 4 : 2))
  step nccl 300 mpirun --oversubscribe -np "$n" "$nccl"
else
  step nccl 120 "$nccl"  # one rank (an Open MPI singleton): every NCCL call on a world of one
fi

# Real-size emulated ranks: the shipped model and cluster files, a small global batch.
spec() {  # model file, global batch -> a spec in $out
  cat >"$out/$(basename "$1" .yaml).spec.yaml" <<EOF
model: $PWD/configs/models/$1
cluster: $PWD/configs/clusters/$cluster
num_nodes: 1
training: {seq_length: 4096, global_batch_size: $2, precision: bf16, grad_dtype: fp32, optimizer: adam, flash_attention: true}
EOF
  echo "$out/$(basename "$1" .yaml).spec.yaml"
}
step validate-1b 300 "$paraplan" validate "$(spec nanotron-bench-1b.yaml 16)" --backend gpu --emulate-rank 0 --steps 3 \
  --launcher none --layout "dp=8,tp=1,pp=1,zero=1,recompute=none,mbs=1"
step validate-llama2-7b 400 "$paraplan" validate "$(spec llama-2-7b.yaml 8)" --backend gpu --emulate-rank 0 --steps 3 \
  --launcher none --layout "dp=4,tp=2,pp=1,zero=1,recompute=none,mbs=1"
# The same model without tensor parallelism: on the H200 the tp=2 rank's loss turned NaN after step 1.
step validate-llama2-7b-tp1 400 "$paraplan" validate "$(spec llama-2-7b.yaml 8)" --backend gpu --emulate-rank 0 --steps 3 \
  --launcher none --layout "dp=8,tp=1,pp=1,zero=1,recompute=none,mbs=1"
# GEMM throughput at training shapes and the memory-bound kernels on one GPU (docs/calibration.md).
mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
step calibrate 400 "$paraplan" calibrate --backend gpu --ranks 1 --launcher none --memory-gib "$(( ${mib:-81920} / 1024 ))" \
  --output "$out/calibrated-cluster.yaml"
echo "gpu_checks: $failed failed (logs in $out/)"
exit "$failed"
