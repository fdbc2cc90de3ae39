#!/bin/bash
# Instructions per evaluated layout of the benchmark searches, counted by
# valgrind's callgrind (Debian package valgrind): a figure that does not move
# with the load or the clock of a shared VM, unlike the wall times of
# paraplan_bench. Usage: bench/instructions.sh [BUILD_DIR]   (default: build)
# Prints, per workload: layouts evaluated, instructions of the search (less
# loading the spec) and instructions per layout; and for evaluate() alone.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin=$build/bench/paraplan_search_once
command -v valgrind >/dev/null || { echo "valgrind not found (apt install valgrind)" >&2; exit 2; }
[ -x "$bin" ] || { echo "$bin not built (cmake --build $build --target paraplan_search_once)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
count() {  # instructions of one run of $bin "$@"
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$bin" "$@" >"$out/stdout" 2>/dev/null
  callgrind_annotate "$out/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
row() {  # name spec [--all]
  local name=$1 spec=$2; shift 2
  local base all n
  base=$(count "$spec" --load)
  all=$(count "$spec" "$@")
  n=$(awk '{print $1}' "$out/stdout")
  printf '%-28s %9d layouts %14d instructions %8d per layout\n' "$name" "$n" $((all - base)) $(((all - base) / n))
}
row "405B on 16,384 H100" configs/examples/llama3.1-405b-h100.yaml --all
row "Mixtral-8x7B on 64 H100" configs/examples/mixtral-8x7b-h100-64.yaml
row "DeepSeek-V3 on 2,048 H800" configs/examples/deepseek-v3-h800.yaml --all
spec=configs/examples/llama3.1-405b-h100.yaml
base=$(count "$spec" --load)
all=$(count "$spec" --evaluate "tp=8,pp=2,vpp=1,sp=1,zero=1,recompute=selective,mbs=1" 20000)
printf '%-28s %9d calls   %14d instructions %8d per call\n' "evaluate() alone" 20000 $((all - base)) $(((all - base) / 20000))
