// Internal to the CPU device (cpu_device.cpp, cpu_attention.cpp): staging of
// fp32/bf16 storage through fp32 stack buffers, and Eigen views over the
// caller's strided memory. Not part of the Device interface.
#pragma once

#include <Eigen/Dense>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "validate/tensor.hpp"

namespace paraplan::validate::cpu {

using i64 = std::int64_t;

// Elements staged on the stack per step of the elementwise and row kernels.
inline constexpr i64 kChunk = 256;
// Widest attention head / RoPE head the row kernels stage on the stack.
inline constexpr i64 kMaxHeadDim = 1024;

inline bool is_f32(CRef r) { return r.dtype == DType::kFp32; }

// out[0, n) = x[off, off + n) as fp32.
inline void load(CRef x, i64 off, i64 n, float* out) {
  if (is_f32(x)) {
    std::memcpy(out, x.f32() + off, std::size_t(n) * sizeof(float));
    return;
  }
  const bf16* p = x.b16() + off;
  for (i64 i = 0; i < n; ++i) out[i] = to_float(p[i]);
}

// y[off, off + n) = in[0, n), rounded to y's storage type.
inline void store(const float* in, Ref y, i64 off, i64 n) {
  if (is_f32(y)) {
    std::memcpy(y.f32() + off, in, std::size_t(n) * sizeof(float));
    return;
  }
  bf16* p = y.b16() + off;
  for (i64 i = 0; i < n; ++i) p[i] = to_bf16(in[i]);
}

// Zero bits are +0 in both storage types.
inline void zero(Ref y, i64 off, i64 n) {
  std::memset(static_cast<char*>(y.data) + off * storage_bytes(y.dtype), 0,
              std::size_t(n) * std::size_t(storage_bytes(y.dtype)));
}

inline float get(CRef x, i64 i) { return is_f32(x) ? x.f32()[i] : to_float(x.b16()[i]); }
inline void put(Ref y, i64 i, float v) {
  if (is_f32(y))
    y.f32()[i] = v;
  else
    y.b16()[i] = to_bf16(v);
}

// f(offset, length) over [0, n) in steps of kChunk.
template <class F>
void chunked(i64 n, F&& f) {
  for (i64 o = 0; o < n; o += kChunk) f(o, std::min(kChunk, n - o));
}

// Dot product with eight independent partial sums (vectorisable, and no
// single long dependency chain).
inline float dot(const float* a, const float* b, i64 n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  i64 e = 0;
  for (; e + 8 <= n; e += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[e + l] * b[e + l];
  float tail = 0;
  for (; e < n; ++e) tail += a[e] * b[e];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

// y += alpha * x.
inline void axpy(float alpha, const float* x, float* y, i64 n) {
  for (i64 e = 0; e < n; ++e) y[e] += alpha * x[e];
}

inline void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("cpu device: ") + what);
}

// Row-major fp32 matrices over strided memory (outer stride = row stride).
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
using CMatMap = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;

inline MatMap mat(float* p, i64 rows, i64 cols, i64 ld) {
  return MatMap(p, rows, cols, Eigen::OuterStride<>(ld));
}
inline CMatMap cmat(const float* p, i64 rows, i64 cols, i64 ld) {
  return CMatMap(p, rows, cols, Eigen::OuterStride<>(ld));
}

}  // namespace paraplan::validate::cpu
