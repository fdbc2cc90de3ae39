// Launchers of the CUDA kernels behind CudaDevice (internal to validate/gpu).
// Plain C++: cuda_device.cpp (g++) calls them, the .cu files (nvcc) define
// them. Every launcher queues work on `st` and returns; arguments mirror
// validate/device.hpp, whose comments give the exact semantics, and every
// kernel reproduces the CPU reference (validate/cpu/) operation by operation:
// the same fp32/double choices, the same summation precision, one rounding
// on store. Pointers are device pointers unless a name says host.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "validate/gpu/kernel_types.hpp"

namespace paraplan::validate::cuda {

// ---- kernels_items.cu ----
void copy(DRef src, DRef dst, i64 n, cudaStream_t st);
void fill(DRef dst, i64 n, float value, cudaStream_t st);
void copy_2d(DRef src, i64 ld_src, DRef dst, i64 ld_dst, i64 rows, i64 cols, cudaStream_t st);
void add(DRef a, DRef b, DRef out, i64 n, cudaStream_t st);
void axpy(float alpha, DRef x, DRef y, i64 n, cudaStream_t st);
void scale(DRef x, i64 n, float alpha, cudaStream_t st);
void add_bias(DRef y, DRef bias, i64 rows, i64 cols, cudaStream_t st);
void bias_backward(DRef dy, DRef dbias, i64 rows, i64 cols, cudaStream_t st);
// C = alpha op(A) op(B) + beta C for any storage types (cuBLAS serves the
// combinations it supports; this serves the rest, e.g. fp32 A with bf16 B).
void gemm_fallback(bool ta, bool tb, i64 m, i64 n, i64 k, float alpha, DRef a, i64 lda, DRef b,
                   i64 ldb, float beta, DRef c, i64 ldc, cudaStream_t st);
void rope(DRef x, i64 ld, i64 col0, i64 heads, i64 d, i64 s, i64 b, float theta, bool inverse,
          cudaStream_t st);
void dropout_forward(DRef x, DRef y, std::uint8_t* mask, i64 rows, i64 cols, float p,
                     std::uint64_t seed, i64 row_key0, i64 col0, cudaStream_t st);
void dropout_backward(DRef dy, const std::uint8_t* mask, DRef dx, i64 n, float p, cudaStream_t st);
void act_forward(bool swiglu, DRef u, DRef g, i64 rows, i64 f, cudaStream_t st);
void act_backward(bool swiglu, DRef u, DRef dg, DRef du, i64 rows, i64 f, cudaStream_t st);
void adam(float* master, float* m, float* v, DRef grad, DRef param, i64 n, float lr, float beta1,
          float beta2, float eps, float bc1, float bc2, float grad_scale, cudaStream_t st);
// Sums of x^2 and x * w(i) in double (kernel_types.hpp: kChecksumParts);
// `partials` holds 2 * kChecksumParts + 2 doubles.
void checksums(DRef x, i64 n, std::uint64_t seed, i64 i0, double* partials, cudaStream_t st);

// ---- kernels_items.cu: embedding, normalisation, cross-entropy ----
void embedding_forward(const std::int32_t* ids, i64 rows, DRef table, i64 v0, i64 vrows, i64 h,
                       DRef out, bool accumulate, cudaStream_t st);
// `link` holds 2 * rows int32 of scratch (next occurrence and first-occurrence
// flag per row), so each table row is summed in row order and rounded once.
void embedding_backward(const std::int32_t* ids, i64 rows, DRef dout, i64 v0, i64 vrows, i64 h,
                        DRef dtable, std::int32_t* link, cudaStream_t st);
void norm_forward(bool rms, DRef x, DRef gamma, DRef beta, DRef y, i64 rows, i64 cols, float eps,
                  cudaStream_t st);
// `stats` holds 2 * rows floats of scratch (each row's mean and rstd).
void norm_backward(bool rms, DRef x, DRef gamma, DRef dy, DRef dx, bool accumulate, DRef dgamma,
                   DRef dbeta, i64 rows, i64 cols, float eps, float* stats, cudaStream_t st);
void ce_row_max(DRef logits, i64 rows, i64 vl, i64 v0, i64 vocab, float* row_max, cudaStream_t st);
void ce_exp_sum(DRef logits, const float* row_max, const std::int32_t* targets, i64 rows, i64 vl,
                i64 v0, i64 vocab, float* softmax, float* row_sum, float* target_logit,
                cudaStream_t st);
void ce_finish(float* softmax, const float* row_sum, const float* target_logit, i64 rows, i64 vl,
               float* loss, cudaStream_t st);
void ce_backward(float* softmax, const std::int32_t* targets, i64 rows, i64 vl, i64 v0,
                 float grad_scale, cudaStream_t st);

// ---- kernels_attention.cu (attention_dropout_forward: kernels_items.cu) ----
void attention_probs(DRef qkv, const Attn& a, DRef probs, cudaStream_t st);
void attention_pv(DRef probs, DRef qkv, const Attn& a, DRef out, cudaStream_t st);
// Head widths up to kMaxAttnHeadDim (kernel_types.hpp; registers: d / 32 values per lane).
// The backwards keep each row's statistic (sum_j dP_ij P_ij, or dO_i . O_i)
// in the first 4 bytes of that row's dQ slot until dQ overwrites it, as the
// CPU does: no scratch beyond the interface's.
void attention_backward(DRef qkv, DRef probs, const std::uint8_t* mask, DRef dropped, float p,
                        DRef dout, const Attn& a, DRef dqkv, cudaStream_t st);
void flash_attention_forward(DRef qkv, const Attn& a, DRef out, float* lse, cudaStream_t st);
void flash_attention_backward(DRef qkv, DRef out, const float* lse, DRef dout, const Attn& a,
                              DRef dqkv, cudaStream_t st);
void attention_dropout_forward(DRef probs, DRef dropped, std::uint8_t* mask, const Attn& a, float p,
                               std::uint64_t seed, i64 seq0, i64 head0, i64 heads_total,
                               cudaStream_t st);

}  // namespace paraplan::validate::cuda
