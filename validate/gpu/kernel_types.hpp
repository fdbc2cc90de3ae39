// Plain types shared by the CUDA kernels' launchers (kernels.hpp), their item
// bodies (kernel_items.hpp) and the host tests; no CUDA headers, so the item
// bodies compile without the toolkit.
#pragma once

#include <cstdint>

namespace paraplan::validate::cuda {

using i64 = std::int64_t;

// A device pointer and its storage type (fp32 or bf16).
struct DRef {
  void* p = nullptr;
  bool bf = false;
};

// The attention geometry (AttnShape) without the project headers.
struct Attn {
  i64 s, b, hq, hkv, d, ld, q_off, k_off, v_off;
  float scale;
};

// checksums: this many partial sums in double, then their totals at
// partials[2 * kChecksumParts] and [2 * kChecksumParts + 1].
inline constexpr i64 kChecksumParts = 4096;

// Widest attention head the GPU kernels take: a warp holds a row in
// registers, d / 32 values per lane (the CPU takes 1024).
inline constexpr i64 kMaxAttnHeadDim = 256;

}  // namespace paraplan::validate::cuda
