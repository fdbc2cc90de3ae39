// Grid launch of the item functors (kernel_items.hpp) and launch checking.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "validate/gpu/kernel_items.hpp"
#include "validate/gpu/kernels.hpp"

namespace paraplan::validate::cuda {

inline constexpr int kThreads = 256;
inline constexpr i64 kMaxBlocks = 65535 * 16;

inline void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA kernel ") + what + ": " + cudaGetErrorString(e));
}

// Grid-stride loop: item i for every i in [0, n).
template <class F>
__global__ void for_each_kernel(F f, i64 n) {
  const i64 stride = i64(gridDim.x) * blockDim.x;
  for (i64 i = i64(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

inline unsigned grid_for(i64 threads) {
  const i64 blocks = (threads + kThreads - 1) / kThreads;
  return unsigned(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

template <class F>
void for_each(const F& f, i64 n, cudaStream_t st, const char* what) {
  if (n <= 0) return;
  for_each_kernel<<<grid_for(n), kThreads, 0, st>>>(f, n);
  check_launch(what);
}

}  // namespace paraplan::validate::cuda
