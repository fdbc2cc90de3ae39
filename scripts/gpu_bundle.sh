#!/usr/bin/env bash
# Packs this build's GPU programs with the Debian libraries they link, for a GPU
# machine that has CUDA, cuBLAS and NCCL but not Debian's yaml-cpp, fmt or Open MPI
# (how the H200 run of docs/gpu.md was made). Usage: scripts/gpu_bundle.sh DIR
# On the GPU machine: source DIR/env.sh, then scripts/gpu_checks.sh DIR/bin.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=${1:?usage: scripts/gpu_bundle.sh DIR}
rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/lib" "$dir/sys/usr/lib/x86_64-linux-gnu/openmpi" "$dir/sys/usr/share"
progs=(build/paraplan build/validate/gpu/libparaplan_gpu_module.so build/tests/gpu/gpu_check_kernels
       build/tests/gpu/gpu_check_nccl)
cp "${progs[@]}" "$dir/bin/"
ompi=/usr/lib/x86_64-linux-gnu/openmpi
# Every library the programs, Open MPI's plugins and orted load, except the C and C++ runtimes
# and CUDA's own (the GPU machine's driver and toolkit provide those).
{ for f in "${progs[@]}" /usr/bin/orted "$ompi"/lib/openmpi3/*.so; do ldd "$f"; done; } 2>/dev/null |
  awk '/=> \//{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|cuda|libnccl|libcublas' |
  xargs -r -I{} cp -L {} "$dir/lib/"
cp -a "$ompi/lib" "$dir/sys/usr/lib/x86_64-linux-gnu/openmpi/"
[[ -d /usr/lib/x86_64-linux-gnu/pmix2 ]] && cp -a /usr/lib/x86_64-linux-gnu/pmix2 "$dir/sys/usr/lib/x86_64-linux-gnu/"
cp -a /usr/share/openmpi "$dir/sys/usr/share/"
[[ -d /usr/share/pmix ]] && cp -a /usr/share/pmix "$dir/sys/usr/share/"
mkdir -p "$dir/sys/usr/bin" && cp /usr/bin/orted "$dir/sys/usr/bin/"
cat >"$dir/env.sh" <<'ENV'
# Source on the GPU machine (as root: Open MPI's plugins go where Debian's build looks for them).
b=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cp -a "$b/sys/usr/lib/x86_64-linux-gnu/." /usr/lib/x86_64-linux-gnu/ && cp -a "$b/sys/usr/share/." /usr/share/
[[ -e /usr/bin/orted ]] || cp "$b/sys/usr/bin/orted" /usr/bin/
nccl=$(dirname "$(find / -xdev -name 'libnccl.so.2' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$nccl:${LD_LIBRARY_PATH:-}
export PARAPLAN_GPU_MODULE_PATH=$b/bin/libparaplan_gpu_module.so
ENV
du -sh "$dir"
