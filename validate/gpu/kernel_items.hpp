// The bodies of the CUDA device's kernels, as "items": small functors whose
// operator()(i) computes one independent piece of the output (an element, a
// row or a column) with plain sequential loops. The .cu files launch them over
// a grid (for_each in kernels_launch.cuh); tests/gpu/test_kernels_emulated.cpp
// runs the very same code in a host loop against the CPU reference, so the
// arithmetic and the index maps of every kernel here are checked without a
// GPU. Only the attention products (attention_kernels.cuh, one warp per row)
// live elsewhere.
//
// Each item reproduces validate/cpu/ operation by operation: fp32 arithmetic
// where the CPU uses fp32, double sums where it sums in double, the same
// summation order inside a row or column, one rounding on store.
// Items never read what another item of the same launch writes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "validate/gpu/kernel_types.hpp"

#if defined(__CUDACC__)
#define PP_HD __host__ __device__
#else
#define PP_HD
#endif

namespace paraplan::validate::cuda {

// ---------------------------------------------------------------- storage

PP_HD inline float bits_to_float(std::uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
PP_HD inline std::uint32_t float_to_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
// Same rounding as validate/tensor.hpp to_bf16: nearest even, NaN kept quiet.
PP_HD inline std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u = float_to_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return std::uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}
PP_HD inline float bf16_to_f32(std::uint16_t b) { return bits_to_float(std::uint32_t(b) << 16); }

PP_HD inline float ld(const DRef& r, i64 i) {
  return r.bf ? bf16_to_f32(static_cast<const std::uint16_t*>(r.p)[i]) : static_cast<const float*>(r.p)[i];
}
PP_HD inline void st(const DRef& r, i64 i, float v) {
  if (r.bf)
    static_cast<std::uint16_t*>(r.p)[i] = f32_to_bf16(v);
  else
    static_cast<float*>(r.p)[i] = v;
}

// ---------------------------------------------------------------- hashing (validate/hash.cpp)

PP_HD inline std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
PP_HD inline std::uint64_t hash_mix(std::uint64_t seed, i64 row, i64 col) {
  const std::uint64_t rc = std::uint64_t(row) * 0xd6e8feb86659fd93ull ^ mix64(std::uint64_t(col));
  return mix64(seed ^ mix64(rc));
}
PP_HD inline double hash_uniform(std::uint64_t seed, i64 row, i64 col) {
  return double(hash_mix(seed, row, col) >> 11) * 0x1.0p-53;
}

// ---------------------------------------------------------------- elementwise

struct CopyItem {
  DRef src, dst;
  PP_HD void operator()(i64 i) const { st(dst, i, ld(src, i)); }
};

struct FillItem {
  DRef dst;
  float value;
  PP_HD void operator()(i64 i) const { st(dst, i, value); }
};

struct Copy2dItem {  // over rows * cols
  DRef src;
  i64 ld_src;
  DRef dst;
  i64 ld_dst, cols;
  PP_HD void operator()(i64 i) const {
    const i64 r = i / cols, c = i % cols;
    st(dst, r * ld_dst + c, ld(src, r * ld_src + c));
  }
};

struct AddItem {
  DRef a, b, out;
  PP_HD void operator()(i64 i) const { st(out, i, ld(a, i) + ld(b, i)); }
};

struct AxpyItem {
  float alpha;
  DRef x, y;
  PP_HD void operator()(i64 i) const { st(y, i, ld(y, i) + alpha * ld(x, i)); }
};

struct ScaleItem {
  DRef x;
  float alpha;
  PP_HD void operator()(i64 i) const { st(x, i, ld(x, i) * alpha); }
};

struct AddBiasItem {  // over rows * cols
  DRef y, bias;
  i64 cols;
  PP_HD void operator()(i64 i) const { st(y, i, ld(y, i) + ld(bias, i % cols)); }
};

struct BiasBackwardItem {  // over cols
  DRef dy, dbias;
  i64 rows, cols;
  PP_HD void operator()(i64 c) const {
    double acc = 0;
    for (i64 r = 0; r < rows; ++r) acc += ld(dy, r * cols + c);
    st(dbias, c, float(ld(dbias, c) + acc));
  }
};

// C = alpha op(A) op(B) + beta C, one element per item, fp32 accumulation in
// k order (combinations of storage types cuBLAS has no kernel for).
struct GemmItem {  // over m * n
  bool ta, tb;
  i64 n, k;
  float alpha;
  DRef a;
  i64 lda;
  DRef b;
  i64 ldb;
  float beta;
  DRef c;
  i64 ldc;
  PP_HD void operator()(i64 i) const {
    const i64 r = i / n, col = i % n;
    float acc = 0;
    for (i64 q = 0; q < k; ++q)
      acc += ld(a, ta ? q * lda + r : r * lda + q) * ld(b, tb ? col * ldb + q : q * ldb + col);
    const i64 at = r * ldc + col;
    st(c, at, beta != 0.0f ? alpha * acc + beta * ld(c, at) : alpha * acc);
  }
};

// ---------------------------------------------------------------- RoPE

struct RopeItem {  // over s * b * heads * (d / 2)
  DRef x;
  i64 ld, col0, heads, d, b;
  float theta;
  bool inverse;
  PP_HD void operator()(i64 i) const {
    const i64 half = d / 2;
    const i64 e = i % half, h = (i / half) % heads, row = i / (half * heads);
    // Angles in double, as the CPU: positions reach thousands.
    const double inv_freq = pow(double(theta), -2.0 * double(e) / double(d));
    const double ang = double(row / b) * inv_freq;
    const float cs = float(cos(ang));
    const float sn = float(inverse ? -sin(ang) : sin(ang));
    const i64 off = row * ld + col0 + h * d;
    const float x1 = ld_(off + e), x2 = ld_(off + e + half);
    st(x, off + e, x1 * cs - x2 * sn);
    st(x, off + e + half, x1 * sn + x2 * cs);
  }
  PP_HD float ld_(i64 i) const { return cuda::ld(x, i); }
};

// ---------------------------------------------------------------- dropout

struct DropoutItem {  // over rows * cols
  DRef x, y;
  std::uint8_t* mask;
  i64 cols;
  std::uint64_t seed;
  i64 row_key0, col0;
  float p, keep_scale;  // keep_scale = 1 / (1 - p), computed once in fp32
  PP_HD void operator()(i64 i) const {
    const i64 r = i / cols, c = i % cols;
    const bool keep = hash_uniform(seed, row_key0 + r, col0 + c) >= double(p);
    mask[i] = keep ? 1 : 0;
    st(y, i, keep ? ld(x, i) * keep_scale : 0.0f);
  }
};

struct DropoutBackwardItem {
  DRef dy;
  const std::uint8_t* mask;
  DRef dx;
  float keep_scale;
  PP_HD void operator()(i64 i) const { st(dx, i, mask[i] ? ld(dy, i) * keep_scale : 0.0f); }
};

// Attention dropout on P[b, hq, s, s]: one element per item; above the
// diagonal mask and output are 0.
struct AttnDropoutItem {  // over b * hq * s * s
  DRef probs, dropped;
  std::uint8_t* mask;
  i64 s, hq;
  std::uint64_t seed;
  i64 seq0, head0, heads_total;
  float p, keep_scale;
  PP_HD void operator()(i64 idx) const {
    const i64 j = idx % s, i = (idx / s) % s, h = (idx / (s * s)) % hq, bi = idx / (s * s * hq);
    if (j > i) {
      mask[idx] = 0;
      st(dropped, idx, 0.0f);
      return;
    }
    const i64 key = ((seq0 + bi) * heads_total + head0 + h) * s + i;
    const bool keep = hash_uniform(seed, key, j) >= double(p);
    mask[idx] = keep ? 1 : 0;
    st(dropped, idx, keep ? ld(probs, idx) * keep_scale : 0.0f);
  }
};

// ---------------------------------------------------------------- activations

inline constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluA = 0.044715f;
PP_HD inline float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

struct GeluItem {
  DRef u, g;
  PP_HD void operator()(i64 i) const {
    const float x = ld(u, i);
    st(g, i, 0.5f * x * (1.0f + tanhf(kGeluC * (x + kGeluA * x * x * x))));
  }
};

struct GeluBackwardItem {
  DRef u, dg, du;
  PP_HD void operator()(i64 i) const {
    const float x = ld(u, i);
    const float t = tanhf(kGeluC * (x + kGeluA * x * x * x));
    const float grad = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
    st(du, i, ld(dg, i) * grad);
  }
};

struct SwigluItem {  // over rows * f; u is [rows, 2f] = [gate | up]
  DRef u, g;
  i64 f;
  PP_HD void operator()(i64 i) const {
    const i64 r = i / f, c = i % f;
    const float a = ld(u, r * 2 * f + c), up = ld(u, r * 2 * f + f + c);
    st(g, i, a * sigmoidf_(a) * up);
  }
};

struct SwigluBackwardItem {  // over rows * f
  DRef u, dg, du;
  i64 f;
  PP_HD void operator()(i64 i) const {
    const i64 r = i / f, c = i % f, ga = r * 2 * f + c, ua = ga + f;
    const float a = ld(u, ga), up = ld(u, ua), d = ld(dg, i);
    const float sg = sigmoidf_(a);
    st(du, ga, d * up * sg * (1.0f + a * (1.0f - sg)));
    st(du, ua, d * a * sg);
  }
};

// ---------------------------------------------------------------- optimizer, checks

struct AdamItem {
  float *master, *m, *v;
  DRef grad, param;  // param.p may be null
  float lr, beta1, beta2, eps, bc1, bc2, grad_scale;
  PP_HD void operator()(i64 j) const {
    const float g = ld(grad, j) * grad_scale;
    m[j] = beta1 * m[j] + (1.0f - beta1) * g;
    v[j] = beta2 * v[j] + (1.0f - beta2) * g * g;
    master[j] -= lr * (m[j] / bc1) / (sqrtf(v[j] / bc2) + eps);
    if (param.p) st(param, j, master[j]);
  }
};

// Item q sums its slice [q n / parts, (q + 1) n / parts) into partials[2q..2q+1].
struct ChecksumPartItem {  // over parts
  DRef x;
  i64 n, i0, parts;
  std::uint64_t seed;
  double* partials;
  PP_HD void operator()(i64 q) const {
    const i64 lo = q * n / parts, hi = (q + 1) * n / parts;
    double sq = 0, w = 0;
    for (i64 i = lo; i < hi; ++i) {
      const float xi = ld(x, i);
      sq += double(xi) * xi;
      w += double(xi) * (hash_uniform(seed, 0, i0 + i) - 0.5);
    }
    partials[2 * q] = sq;
    partials[2 * q + 1] = w;
  }
};

struct ChecksumTotalItem {  // one item: partials[2 parts..] = the sums
  i64 parts;
  double* partials;
  PP_HD void operator()(i64) const {
    double sq = 0, w = 0;
    for (i64 q = 0; q < parts; ++q) sq += partials[2 * q], w += partials[2 * q + 1];
    partials[2 * parts] = sq;
    partials[2 * parts + 1] = w;
  }
};

// ---------------------------------------------------------------- embedding

struct EmbeddingItem {  // over rows * h
  const std::int32_t* ids;
  DRef table;
  i64 v0, vrows, h;
  DRef out;
  bool accumulate;
  PP_HD void operator()(i64 i) const {
    const i64 r = i / h, c = i % h, local = i64(ids[r]) - v0;
    if (local < 0 || local >= vrows) {
      if (!accumulate) st(out, i, 0.0f);
      return;
    }
    float t = ld(table, local * h + c);
    if (accumulate) t += ld(out, i);
    st(out, i, t);
  }
};

// link[r] = next row with the same (in-range) id or -1; link[rows + r] = 1 if r
// is the first row with its id. Quadratic in rows, but per row, not per column.
struct EmbeddingLinkItem {  // over rows
  const std::int32_t* ids;
  i64 rows, v0, vrows;
  std::int32_t* link;
  PP_HD void operator()(i64 r) const {
    const i64 local = i64(ids[r]) - v0;
    link[r] = -1;
    link[rows + r] = 0;
    if (local < 0 || local >= vrows) return;
    bool first = true;
    for (i64 q = 0; q < r && first; ++q) first = ids[q] != ids[r];
    link[rows + r] = first ? 1 : 0;
    for (i64 q = r + 1; q < rows; ++q)
      if (ids[q] == ids[r]) {
        link[r] = std::int32_t(q);
        break;
      }
  }
};

// dtable[id] += the rows with that id, in row order, summed in fp32 and rounded
// once (the CPU's order: bit-identical in fp32).
struct EmbeddingBackwardItem {  // over rows * h
  const std::int32_t* ids;
  DRef dout;
  i64 rows, v0, h;
  DRef dtable;
  const std::int32_t* link;
  PP_HD void operator()(i64 i) const {
    const i64 r = i / h, c = i % h;
    if (!link[rows + r]) return;
    const i64 at = (i64(ids[r]) - v0) * h + c;
    float acc = ld(dtable, at);
    for (i64 q = r; q >= 0; q = link[q]) acc += ld(dout, q * h + c);
    st(dtable, at, acc);
  }
};

// ---------------------------------------------------------------- normalisation

struct RowStats {
  double mean, rstd;
};
// Two passes in double, as the CPU (mean 0 for RMSNorm).
PP_HD inline RowStats row_stats(bool rms, const DRef& x, i64 row0, i64 cols, float eps) {
  RowStats s{0, 0};
  if (!rms) {
    double sum = 0;
    for (i64 c = 0; c < cols; ++c) sum += ld(x, row0 + c);
    s.mean = sum / double(cols);
  }
  double sq = 0;
  for (i64 c = 0; c < cols; ++c) {
    const double d = ld(x, row0 + c) - s.mean;
    sq += d * d;
  }
  s.rstd = 1.0 / sqrt(sq / double(cols) + double(eps));
  return s;
}

struct NormItem {  // over rows
  bool rms;
  DRef x, gamma, beta, y;  // beta.p null: none
  i64 cols;
  float eps;
  PP_HD void operator()(i64 r) const {
    const bool has_beta = !rms && beta.p;
    const RowStats s = row_stats(rms, x, r * cols, cols, eps);
    const float mean = float(s.mean), rstd = float(s.rstd);
    for (i64 c = 0; c < cols; ++c)
      st(y, r * cols + c,
         (ld(x, r * cols + c) - mean) * rstd * ld(gamma, c) + (has_beta ? ld(beta, c) : 0.0f));
  }
};

// dx of one row, and the row's fp32 mean and rstd into stats[2r..2r+1] for the
// column pass (NormBackwardColItem).
struct NormBackwardRowItem {  // over rows
  bool rms;
  DRef x, gamma, dy, dx;
  bool accumulate;
  i64 cols;
  float eps;
  float* stats;
  PP_HD void operator()(i64 r) const {
    const i64 row0 = r * cols;
    const RowStats s = row_stats(rms, x, row0, cols, eps);
    double sum_g = 0, sum_gxhat = 0;
    for (i64 c = 0; c < cols; ++c) {
      const double g = double(ld(dy, row0 + c)) * ld(gamma, c);
      sum_g += g;
      sum_gxhat += g * (ld(x, row0 + c) - s.mean) * s.rstd;
    }
    const float mean = float(s.mean), rstd = float(s.rstd);
    const float mg = rms ? 0.0f : float(sum_g / double(cols));
    const float mgx = float(sum_gxhat / double(cols));
    for (i64 c = 0; c < cols; ++c) {
      const float xhat = (ld(x, row0 + c) - mean) * rstd;
      const float v = rstd * (ld(dy, row0 + c) * ld(gamma, c) - mg - xhat * mgx);
      st(dx, row0 + c, accumulate ? ld(dx, row0 + c) + v : v);
    }
    stats[2 * r] = mean;
    stats[2 * r + 1] = rstd;
  }
};

struct NormBackwardColItem {  // over cols; rows [0, rows) of x and dy, stats per row
  DRef x, dy, dgamma, dbeta;  // dbeta.p null: none
  i64 rows, cols;
  const float* stats;
  PP_HD void operator()(i64 c) const {
    double dg = 0, db = 0;
    for (i64 r = 0; r < rows; ++r) {
      const float d = ld(dy, r * cols + c);
      const float xhat = (ld(x, r * cols + c) - stats[2 * r]) * stats[2 * r + 1];
      dg += double(d) * xhat;
      db += d;
    }
    st(dgamma, c, float(ld(dgamma, c) + dg));
    if (dbeta.p) st(dbeta, c, float(ld(dbeta, c) + db));
  }
};

// ---------------------------------------------------------------- cross-entropy

// Columns [0, n) of a shard hold real vocabulary ids (the rest is padding).
PP_HD inline i64 ce_valid_cols(i64 vl, i64 v0, i64 vocab) {
  const i64 n = vocab - v0;
  return n < 0 ? 0 : (n > vl ? vl : n);
}

struct CeRowMaxItem {  // over rows
  DRef logits;
  i64 vl, nv;
  float* row_max;
  PP_HD void operator()(i64 r) const {
    float m = -INFINITY;
    for (i64 c = 0; c < nv; ++c) {
      const float x = ld(logits, r * vl + c);
      m = m < x ? x : m;
    }
    row_max[r] = m;
  }
};

struct CeExpSumItem {  // over rows
  DRef logits;
  const float* row_max;
  const std::int32_t* targets;
  i64 vl, v0, nv;
  float *softmax, *row_sum, *target_logit;
  PP_HD void operator()(i64 r) const {
    float* sm = softmax + r * vl;
    double sum = 0;
    for (i64 c = 0; c < nv; ++c) {
      sm[c] = expf(ld(logits, r * vl + c) - row_max[r]);
      sum += sm[c];
    }
    for (i64 c = nv; c < vl; ++c) sm[c] = 0.0f;
    row_sum[r] = float(sum);
    const i64 t = i64(targets[r]) - v0;
    target_logit[r] = (t >= 0 && t < nv) ? ld(logits, r * vl + t) - row_max[r] : 0.0f;
  }
};

struct CeLossItem {  // over rows
  const float *row_sum, *target_logit;
  float* loss;
  PP_HD void operator()(i64 r) const { loss[r] = float(log(double(row_sum[r])) - double(target_logit[r])); }
};

struct CeNormaliseItem {  // over rows * vl
  float* softmax;
  const float* row_sum;
  i64 vl;
  PP_HD void operator()(i64 i) const { softmax[i] /= row_sum[i / vl]; }
};

struct CeBackwardItem {  // over rows * vl
  float* softmax;
  const std::int32_t* targets;
  i64 vl, v0;
  float grad_scale;
  PP_HD void operator()(i64 i) const {
    const i64 r = i / vl, c = i % vl;
    float v = softmax[i];
    if (i64(targets[r]) - v0 == c) v -= 1.0f;
    softmax[i] = v * grad_scale;
  }
};

// ---------------------------------------------------------------- launch plans

// What each launcher of kernels.hpp runs, in order: run(item, n, what) applies
// `item` to every i in [0, n) — a grid on the GPU (kernels_items.cu), a plain
// loop in tests/gpu/test_kernels_emulated.cpp. Arguments as in kernels.hpp.
namespace plan {

template <class Run> void copy(Run&& run, DRef src, DRef dst, i64 n) { run(CopyItem{src, dst}, n, "copy"); }
template <class Run> void fill(Run&& run, DRef dst, i64 n, float value) { run(FillItem{dst, value}, n, "fill"); }
template <class Run> void copy_2d(Run&& run, DRef src, i64 ld_src, DRef dst, i64 ld_dst, i64 rows, i64 cols) {
  run(Copy2dItem{src, ld_src, dst, ld_dst, cols}, rows * cols, "copy_2d");
}
template <class Run> void add(Run&& run, DRef a, DRef b, DRef out, i64 n) { run(AddItem{a, b, out}, n, "add"); }
template <class Run> void axpy(Run&& run, float alpha, DRef x, DRef y, i64 n) { run(AxpyItem{alpha, x, y}, n, "axpy"); }
template <class Run> void scale(Run&& run, DRef x, i64 n, float alpha) { run(ScaleItem{x, alpha}, n, "scale"); }
template <class Run> void add_bias(Run&& run, DRef y, DRef bias, i64 rows, i64 cols) {
  run(AddBiasItem{y, bias, cols}, rows * cols, "add_bias");
}
template <class Run> void bias_backward(Run&& run, DRef dy, DRef dbias, i64 rows, i64 cols) {
  run(BiasBackwardItem{dy, dbias, rows, cols}, cols, "bias_backward");
}
template <class Run>
void gemm_fallback(Run&& run, bool ta, bool tb, i64 m, i64 n, i64 k, float alpha, DRef a, i64 lda, DRef b, i64 ldb,
                   float beta, DRef c, i64 ldc) {
  run(GemmItem{ta, tb, n, k, alpha, a, lda, b, ldb, beta, c, ldc}, m * n, "gemm_fallback");
}
template <class Run>
void rope(Run&& run, DRef x, i64 ld, i64 col0, i64 heads, i64 d, i64 s, i64 b, float theta, bool inverse) {
  run(RopeItem{x, ld, col0, heads, d, b, theta, inverse}, s * b * heads * (d / 2), "rope");
}
template <class Run>
void dropout_forward(Run&& run, DRef x, DRef y, std::uint8_t* mask, i64 rows, i64 cols, float p, std::uint64_t seed,
                     i64 row_key0, i64 col0) {
  const float keep_scale = 1.0f / (1.0f - p);  // as the CPU
  run(DropoutItem{x, y, mask, cols, seed, row_key0, col0, p, keep_scale}, rows * cols, "dropout_forward");
}
template <class Run> void dropout_backward(Run&& run, DRef dy, const std::uint8_t* mask, DRef dx, i64 n, float p) {
  run(DropoutBackwardItem{dy, mask, dx, 1.0f / (1.0f - p)}, n, "dropout_backward");
}
template <class Run>
void attention_dropout_forward(Run&& run, DRef probs, DRef dropped, std::uint8_t* mask, const Attn& a, float p,
                               std::uint64_t seed, i64 seq0, i64 head0, i64 heads_total) {
  run(AttnDropoutItem{probs, dropped, mask, a.s, a.hq, seed, seq0, head0, heads_total, p, 1.0f / (1.0f - p)},
      a.b * a.hq * a.s * a.s, "attention_dropout_forward");
}
template <class Run> void act_forward(Run&& run, bool swiglu, DRef u, DRef g, i64 rows, i64 f) {
  if (swiglu)
    run(SwigluItem{u, g, f}, rows * f, "swiglu");
  else
    run(GeluItem{u, g}, rows * f, "gelu");
}
template <class Run> void act_backward(Run&& run, bool swiglu, DRef u, DRef dg, DRef du, i64 rows, i64 f) {
  if (swiglu)
    run(SwigluBackwardItem{u, dg, du, f}, rows * f, "swiglu_backward");
  else
    run(GeluBackwardItem{u, dg, du}, rows * f, "gelu_backward");
}
template <class Run>
void adam(Run&& run, float* master, float* m, float* v, DRef grad, DRef param, i64 n, float lr, float beta1,
          float beta2, float eps, float bc1, float bc2, float grad_scale) {
  run(AdamItem{master, m, v, grad, param, lr, beta1, beta2, eps, bc1, bc2, grad_scale}, n, "adam");
}
template <class Run> void checksums(Run&& run, DRef x, i64 n, std::uint64_t seed, i64 i0, double* partials) {
  run(ChecksumPartItem{x, n, i0, kChecksumParts, seed, partials}, kChecksumParts, "checksums");
  run(ChecksumTotalItem{kChecksumParts, partials}, 1, "checksums total");
}
template <class Run>
void embedding_forward(Run&& run, const std::int32_t* ids, i64 rows, DRef table, i64 v0, i64 vrows, i64 h, DRef out,
                       bool accumulate) {
  run(EmbeddingItem{ids, table, v0, vrows, h, out, accumulate}, rows * h, "embedding_forward");
}
template <class Run>
void embedding_backward(Run&& run, const std::int32_t* ids, i64 rows, DRef dout, i64 v0, i64 vrows, i64 h,
                        DRef dtable, std::int32_t* link) {
  run(EmbeddingLinkItem{ids, rows, v0, vrows, link}, rows, "embedding_backward links");
  run(EmbeddingBackwardItem{ids, dout, rows, v0, h, dtable, link}, rows * h, "embedding_backward");
}
template <class Run>
void norm_forward(Run&& run, bool rms, DRef x, DRef gamma, DRef beta, DRef y, i64 rows, i64 cols, float eps) {
  run(NormItem{rms, x, gamma, beta, y, cols, eps}, rows, "norm_forward");
}
template <class Run>
void norm_backward(Run&& run, bool rms, DRef x, DRef gamma, DRef dy, DRef dx, bool accumulate, DRef dgamma,
                   DRef dbeta, i64 rows, i64 cols, float eps, float* stats) {
  run(NormBackwardRowItem{rms, x, gamma, dy, dx, accumulate, cols, eps, stats}, rows, "norm_backward rows");
  run(NormBackwardColItem{x, dy, dgamma, rms ? DRef{} : dbeta, rows, cols, stats}, cols, "norm_backward columns");
}
template <class Run> void ce_row_max(Run&& run, DRef logits, i64 rows, i64 vl, i64 v0, i64 vocab, float* row_max) {
  run(CeRowMaxItem{logits, vl, ce_valid_cols(vl, v0, vocab), row_max}, rows, "ce_row_max");
}
template <class Run>
void ce_exp_sum(Run&& run, DRef logits, const float* row_max, const std::int32_t* targets, i64 rows, i64 vl, i64 v0,
                i64 vocab, float* softmax, float* row_sum, float* target_logit) {
  run(CeExpSumItem{logits, row_max, targets, vl, v0, ce_valid_cols(vl, v0, vocab), softmax, row_sum, target_logit},
      rows, "ce_exp_sum");
}
template <class Run>
void ce_finish(Run&& run, float* softmax, const float* row_sum, const float* target_logit, i64 rows, i64 vl,
               float* loss) {
  run(CeLossItem{row_sum, target_logit, loss}, rows, "ce_finish loss");
  run(CeNormaliseItem{softmax, row_sum, vl}, rows * vl, "ce_finish softmax");
}
template <class Run>
void ce_backward(Run&& run, float* softmax, const std::int32_t* targets, i64 rows, i64 vl, i64 v0, float grad_scale) {
  run(CeBackwardItem{softmax, targets, vl, v0, grad_scale}, rows * vl, "ce_backward");
}

}  // namespace plan

}  // namespace paraplan::validate::cuda
