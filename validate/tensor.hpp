// Typed references to device memory. The executor stores tensors in fp32 or
// bf16 (weights, gradients, activations under mixed precision) and computes in
// fp32; a Ref says which, so one kernel signature serves both.
#pragma once

#include <cstdint>
#include <cstring>

#include "costmodel/model.hpp"

namespace paraplan::validate {

// bf16 as the top 16 bits of an IEEE fp32; conversion rounds to nearest even.
struct bf16 {
  std::uint16_t bits;
};
inline float to_float(bf16 x) {
  const std::uint32_t u = std::uint32_t(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline bf16 to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return bf16{std::uint16_t((u >> 16) | 0x40)};  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{std::uint16_t(u >> 16)};
}

// Storage types the executor uses: fp32 and bf16 (paraplan::DType); fp16 is
// not supported by the validator.
inline int storage_bytes(DType t) { return t == DType::kFp32 ? 4 : 2; }

// A pointer plus its element type. Element i is at data + i * storage_bytes(dtype).
struct Ref {
  void* data = nullptr;
  DType dtype = DType::kFp32;

  Ref() = default;
  Ref(void* d, DType t) : data(d), dtype(t) {}
  Ref(float* d) : data(d), dtype(DType::kFp32) {}
  Ref(bf16* d) : data(d), dtype(DType::kBf16) {}
  // The same storage starting `elems` elements later.
  Ref at(std::int64_t elems) const {
    return Ref(static_cast<char*>(data) + elems * storage_bytes(dtype), dtype);
  }
  float* f32() const { return static_cast<float*>(data); }
  bf16* b16() const { return static_cast<bf16*>(data); }
  explicit operator bool() const { return data != nullptr; }
};

// Read-only view (kernels take inputs as CRef and outputs as Ref).
using CRef = Ref;

}  // namespace paraplan::validate
