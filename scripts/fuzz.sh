#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, clang with ASan + UBSan) into
# build-fuzz/ and runs each for SECONDS (default 20) on a seed corpus made from
# the repo's specs, layouts and configs, plus every input kept in
# fuzz/regressions/<harness>/ (former findings). Exits non-zero on a finding:
# the input is left in build-fuzz/artifacts/. Skips, saying why, without clang.
#   bash scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs=${1:-20}
if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz.sh: clang++ not found; fuzzing skipped (install clang and libclang-rt-14-dev)"
  exit 0
fi
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DPARAPLAN_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$(nproc)" >build-fuzz/build.log 2>&1 ||
  { tail -40 build-fuzz/build.log; echo "fuzz.sh: the fuzz build failed"; exit 1; }
seeds=build-fuzz/seeds
rm -rf "$seeds" && mkdir -p "$seeds"/{fuzz_spec,fuzz_layout,fuzz_hf_config} build-fuzz/artifacts
cp configs/examples/*.yaml tests/data/validate/*.yaml "$seeds/fuzz_spec/"
for f in tests/data/hf/*/config.json; do cp "$f" "$seeds/fuzz_hf_config/$(basename "$(dirname "$f")").json"; done
i=0
while IFS= read -r line; do  # first byte: 0 layout string, 1 Megatron arguments, 2 DeepSpeed JSON
  printf '%b' "$line" >"$seeds/fuzz_layout/seed-$i"
  i=$((i + 1))
done <<'SEEDS'
\x00dp=8,tp=1,pp=1,zero=1,mbs=1
\x00tp=2,pp=2,vpp=4,sp=1,zero=1,recompute=selective,mbs=2,schedule=1f1b
\x00tp=8,pp=1,zero=3,recompute=full,mbs=4
\x00pp=4,schedule=gpipe,mbs=1
\x01--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 4 --micro-batch-size 2 --sequence-parallel --use-distributed-optimizer
\x01--recompute-granularity full --micro-batch-size 1 --global-batch-size 512 --seq-length 4096
\x02{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, "zero_optimization": {"stage": 2}, "bf16": {"enabled": true}}
\x02{"train_batch_size": 512, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "none"}}}
SEEDS
status=0
for h in fuzz_spec fuzz_layout fuzz_hf_config; do
  corpus=build-fuzz/corpus/$h
  mkdir -p "$corpus" "fuzz/regressions/$h"
  # Former findings first: each must now pass (a regression test).
  if compgen -G "fuzz/regressions/$h/*" >/dev/null; then
    build-fuzz/fuzz/$h -runs=0 fuzz/regressions/$h/* >/dev/null 2>&1 || { echo "fuzz.sh: $h: a kept regression input fails again"; status=1; }
  fi
  log=build-fuzz/$h.log
  if build-fuzz/fuzz/$h "$corpus" "$seeds/$h" "fuzz/regressions/$h" -max_total_time="$secs" -timeout=10 \
      -rss_limit_mb=4096 -max_len=16384 -artifact_prefix="build-fuzz/artifacts/$h-" -print_final_stats=1 >"$log" 2>&1; then
    echo "fuzz.sh: $h: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') executions in ${secs} s, no finding"
  else
    echo "fuzz.sh: $h: FINDING (see $log and build-fuzz/artifacts/)"
    tail -30 "$log"
    status=1
  fi
done
exit "$status"
