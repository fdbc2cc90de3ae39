// The attention kernels' bodies (kernels_attention.cu launches them): one warp
// per row — a query row, or a key row for dK/dV — each lane holding d / 32
// elements of the row's vectors in registers; dot products are warp sums (xor
// butterflies, so every lane holds the bit-identical sum and control flow stays
// uniform across the warp).
// The arithmetic follows validate/cpu/cpu_attention.cpp's staged path:
//  * probs: causal softmax of scale q.k, sums in double, P = float(e / sum);
//  * backward: three passes — row statistics into the dQ slots, dK/dV per key
//    summed over the query heads sharing it, then dQ (overwriting the slots);
//    dK, dV and dQ are accumulated in fp32 and rounded once.
// Reference-grade (CUDA cores, no tiling): correct first; the time of these
// phases is not representative of a tuned flash-attention kernel.
//
// Compiled by nvcc for the GPU, and by the host compiler for
// tests/gpu/test_kernels_emulated.cpp, which runs each warp as 32 fibers: the
// few warp primitives used (lane index, grid geometry, xor shuffle, warp sync)
// are the functions of namespace `warp`, defined here for CUDA and by the test
// on the host.
#pragma once

#include <cstring>
#include <stdexcept>
#include <string>

#include "validate/gpu/kernel_items.hpp"

#if defined(__CUDACC__)
#define PP_GLOBAL __global__
#define PP_DEV __device__
#define PP_UNROLL _Pragma("unroll")
#else
#define PP_GLOBAL
#define PP_DEV
#define PP_UNROLL
#endif

namespace paraplan::validate::cuda {

namespace warp {
#if defined(__CUDACC__)
__device__ inline unsigned thread_x() { return threadIdx.x; }
__device__ inline unsigned block_idx_x() { return blockIdx.x; }
__device__ inline unsigned block_x() { return blockDim.x; }
__device__ inline unsigned grid_x() { return gridDim.x; }
__device__ inline float shfl_xor(float v, int lane_mask) { return __shfl_xor_sync(0xffffffffu, v, lane_mask); }
__device__ inline void sync() { __syncwarp(); }
#else
unsigned thread_x();
unsigned block_idx_x();
unsigned block_x();
unsigned grid_x();
float shfl_xor(float v, int lane_mask);
void sync();
#endif
}  // namespace warp

namespace attn {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 4;

struct Geo {
  Attn a;
  PP_DEV i64 group() const { return a.hq / a.hkv; }
  PP_DEV i64 qs() const { return a.b * a.ld; }         // row stride of a head in qkv
  PP_DEV i64 os() const { return a.b * a.hq * a.d; }   // row stride of a head in out
  PP_DEV i64 q(i64 bi, i64 h) const { return bi * a.ld + a.q_off + h * a.d; }
  PP_DEV i64 k(i64 bi, i64 g) const { return bi * a.ld + a.k_off + g * a.d; }
  PP_DEV i64 v(i64 bi, i64 g) const { return bi * a.ld + a.v_off + g * a.d; }
  PP_DEV i64 o(i64 bi, i64 h) const { return bi * a.hq * a.d + h * a.d; }
  PP_DEV i64 p(i64 bi, i64 h) const { return (bi * a.hq + h) * a.s * a.s; }
  PP_DEV i64 lse(i64 bi, i64 h) const { return (bi * a.hq + h) * a.s; }
};

PP_DEV inline float warp_sum(float v) {
  PP_UNROLL
  for (int o = kWarp / 2; o > 0; o >>= 1) v += warp::shfl_xor(v, o);
  return v;
}

// A row of d values spread over the lanes: lane l holds elements l, l + 32, ...
template <int NPL>
struct Row {
  float x[NPL];

  PP_DEV void zero() {
    PP_UNROLL
    for (int t = 0; t < NPL; ++t) x[t] = 0.0f;
  }
  PP_DEV void load(const DRef& r, i64 base, i64 d, int lane) {
    PP_UNROLL
    for (int t = 0; t < NPL; ++t) {
      const i64 e = lane + i64(kWarp) * t;
      x[t] = e < d ? ld(r, base + e) : 0.0f;
    }
  }
  PP_DEV void store(const DRef& r, i64 base, i64 d, int lane) const {
    PP_UNROLL
    for (int t = 0; t < NPL; ++t) {
      const i64 e = lane + i64(kWarp) * t;
      if (e < d) st(r, base + e, x[t]);
    }
  }
  // this += alpha * y
  PP_DEV void axpy(float alpha, const Row& y) {
    PP_UNROLL
    for (int t = 0; t < NPL; ++t) x[t] += alpha * y.x[t];
  }
  PP_DEV float dot(const Row& y) const {
    float s = 0.0f;
    PP_UNROLL
    for (int t = 0; t < NPL; ++t) s += x[t] * y.x[t];
    return warp_sum(s);
  }
};

// The 4 bytes at element `idx` of the dQ block hold a row statistic between
// the passes of a backward (as the CPU's put_slot/get_slot).
PP_DEV inline void put_slot(const DRef& r, i64 idx, float v) {
  memcpy(static_cast<char*>(r.p) + idx * (r.bf ? 2 : 4), &v, sizeof v);
}
PP_DEV inline float get_slot(const DRef& r, i64 idx) {
  float v;
  memcpy(&v, static_cast<const char*>(r.p) + idx * (r.bf ? 2 : 4), sizeof v);
  return v;
}

// Warp-per-item loop: every lane of a warp walks the same items.
#define FOR_EACH_WARP_ITEM(item, n)                                                      \
  const int lane = int(warp::thread_x() % kWarp);                                        \
  const i64 warps = i64(warp::grid_x()) * warp::block_x() / kWarp;                        \
  for (i64 item = (i64(warp::block_idx_x()) * warp::block_x() + warp::thread_x()) / kWarp; \
       item < (n); item += warps)

// ---------------------------------------------------------------- forward

// Item (bi, h, i): row i of P. Online max and sum in one pass, then the
// probabilities in a second.
template <int NPL>
PP_GLOBAL void probs_kernel(DRef qkv, Geo g, DRef probs) {
  const Attn& a = g.a;
  FOR_EACH_WARP_ITEM(item, a.b * a.hq * a.s) {
    const i64 i = item % a.s, h = (item / a.s) % a.hq, bi = item / (a.s * a.hq);
    const i64 k0 = g.k(bi, h / g.group()), qs = g.qs(), pr = g.p(bi, h) + i * a.s;
    Row<NPL> q, kr;
    q.load(qkv, g.q(bi, h) + i * qs, a.d, lane);
    float m = -INFINITY;
    double l = 0;
    for (i64 j = 0; j <= i; ++j) {
      kr.load(qkv, k0 + j * qs, a.d, lane);
      const float x = a.scale * q.dot(kr);
      if (x > m) {
        l *= exp(double(m) - double(x));
        m = x;
      }
      l += expf(x - m);
    }
    for (i64 j = 0; j <= i; ++j) {
      kr.load(qkv, k0 + j * qs, a.d, lane);
      const float e = expf(a.scale * q.dot(kr) - m);
      if (lane == j % kWarp) st(probs, pr + j, float(e / l));
    }
    for (i64 j = i + 1 + lane; j < a.s; j += kWarp) st(probs, pr + j, 0.0f);
  }
}

// Item (bi, h, i): O_i = sum_j P_ij V_j (zeros skipped, as the CPU).
template <int NPL>
PP_GLOBAL void pv_kernel(DRef probs, DRef qkv, Geo g, DRef out) {
  const Attn& a = g.a;
  FOR_EACH_WARP_ITEM(item, a.b * a.hq * a.s) {
    const i64 i = item % a.s, h = (item / a.s) % a.hq, bi = item / (a.s * a.hq);
    const i64 v0 = g.v(bi, h / g.group()), qs = g.qs(), pr = g.p(bi, h) + i * a.s;
    Row<NPL> acc, vr;
    acc.zero();
    for (i64 j = 0; j <= i; ++j) {
      const float pj = ld(probs, pr + j);
      if (pj == 0.0f) continue;
      vr.load(qkv, v0 + j * qs, a.d, lane);
      acc.axpy(pj, vr);
    }
    acc.store(out, g.o(bi, h) + i * g.os(), a.d, lane);
  }
}

// Item (bi, h, i), flash: two passes (max, then exp / sum / P V), as the CPU's
// staged path; saves O and lse = max + log(sum).
template <int NPL>
PP_GLOBAL void flash_forward_kernel(DRef qkv, Geo g, DRef out, float* lse) {
  const Attn& a = g.a;
  FOR_EACH_WARP_ITEM(item, a.b * a.hq * a.s) {
    const i64 i = item % a.s, h = (item / a.s) % a.hq, bi = item / (a.s * a.hq);
    const i64 kv = h / g.group(), k0 = g.k(bi, kv), v0 = g.v(bi, kv), qs = g.qs();
    Row<NPL> q, kr, acc;
    q.load(qkv, g.q(bi, h) + i * qs, a.d, lane);
    float m = -INFINITY;
    for (i64 j = 0; j <= i; ++j) {
      kr.load(qkv, k0 + j * qs, a.d, lane);
      const float x = a.scale * q.dot(kr);
      m = x > m ? x : m;
    }
    double l = 0;
    acc.zero();
    for (i64 j = 0; j <= i; ++j) {
      kr.load(qkv, k0 + j * qs, a.d, lane);
      const float e = expf(a.scale * q.dot(kr) - m);
      l += e;
      kr.load(qkv, v0 + j * qs, a.d, lane);
      acc.axpy(e, kr);
    }
    PP_UNROLL
    for (int t = 0; t < NPL; ++t) acc.x[t] = float(acc.x[t] / l);
    acc.store(out, g.o(bi, h) + i * g.os(), a.d, lane);
    if (lane == 0) lse[g.lse(bi, h) + i] = float(double(m) + log(l));
  }
}

// ---------------------------------------------------------------- backward

// What differs between the materialised and the flash backward, per (row i of
// head h, key j): the probability P_ij, dP_ij, and the weight of dO_i in dV_j.
struct Materialised {
  DRef probs, dropped;
  const std::uint8_t* mask;  // null: no dropout
  float keep_scale;          // 1 / (1 - p), or 1 without mask
  PP_DEV bool kept(i64 idx) const { return !mask || mask[idx]; }
};
struct Flash {
  const float* lse;
};

// Pass 1, item (bi, h, i): the row statistic into the dQ slot — sum_j dP_ij P_ij
// (materialised) or dO_i . O_i (flash).
template <int NPL>
PP_GLOBAL void rowstat_kernel(DRef qkv, Materialised mt, DRef dout, Geo g, DRef dqkv) {
  const Attn& a = g.a;
  FOR_EACH_WARP_ITEM(item, a.b * a.hq * a.s) {
    const i64 i = item % a.s, h = (item / a.s) % a.hq, bi = item / (a.s * a.hq);
    const i64 v0 = g.v(bi, h / g.group()), qs = g.qs(), pr = g.p(bi, h) + i * a.s;
    Row<NPL> dO, vr;
    dO.load(dout, g.o(bi, h) + i * g.os(), a.d, lane);
    double rowdot = 0;
    for (i64 j = 0; j <= i; ++j) {
      if (!mt.kept(pr + j)) continue;
      vr.load(qkv, v0 + j * qs, a.d, lane);
      rowdot += double(dO.dot(vr) * mt.keep_scale) * ld(mt.probs, pr + j);
    }
    if (lane == 0) put_slot(dqkv, g.q(bi, h) + i * qs, float(rowdot));
  }
}

template <int NPL>
PP_GLOBAL void flash_rowstat_kernel(DRef out, DRef dout, Geo g, DRef dqkv) {
  const Attn& a = g.a;
  FOR_EACH_WARP_ITEM(item, a.b * a.hq * a.s) {
    const i64 i = item % a.s, h = (item / a.s) % a.hq, bi = item / (a.s * a.hq);
    Row<NPL> dO, o;
    dO.load(dout, g.o(bi, h) + i * g.os(), a.d, lane);
    o.load(out, g.o(bi, h) + i * g.os(), a.d, lane);
    const float D = dO.dot(o);
    if (lane == 0) put_slot(dqkv, g.q(bi, h) + i * g.qs(), D);
  }
}

// Pass 2, item (bi, kv, j): dK_j and dV_j summed over the query heads of kv
// head `kv` and the rows i >= j.
template <int NPL, bool kFlash>
PP_GLOBAL void dkdv_kernel(DRef qkv, Materialised mt, Flash fl, DRef dout, Geo g, DRef dqkv) {
  const Attn& a = g.a;
  FOR_EACH_WARP_ITEM(item, a.b * a.hkv * a.s) {
    const i64 j = item % a.s, kv = (item / a.s) % a.hkv, bi = item / (a.s * a.hkv);
    const i64 qs = g.qs(), os = g.os(), k0 = g.k(bi, kv), v0 = g.v(bi, kv);
    Row<NPL> kt, vt, ak, av, q, dO;
    kt.load(qkv, k0 + j * qs, a.d, lane);
    vt.load(qkv, v0 + j * qs, a.d, lane);
    ak.zero();
    av.zero();
    for (i64 h = kv * g.group(); h < (kv + 1) * g.group(); ++h)
      for (i64 i = j; i < a.s; ++i) {
        q.load(qkv, g.q(bi, h) + i * qs, a.d, lane);
        dO.load(dout, g.o(bi, h) + i * os, a.d, lane);
        const float rd = get_slot(dqkv, g.q(bi, h) + i * qs);
        if constexpr (kFlash) {
          const float pij = expf(a.scale * q.dot(kt) - fl.lse[g.lse(bi, h) + i]);
          const float ds = pij * (dO.dot(vt) - rd);
          ak.axpy(a.scale * ds, q);
          av.axpy(pij, dO);
        } else {
          const i64 idx = g.p(bi, h) + i * a.s + j;
          const float pij = ld(mt.probs, idx);
          const float dp = mt.kept(idx) ? dO.dot(vt) * mt.keep_scale : 0.0f;
          ak.axpy(a.scale * pij * (dp - rd), q);
          const float dij = mt.mask ? (mt.mask[idx] ? ld(mt.dropped, idx) : 0.0f) : pij;
          if (dij != 0.0f) av.axpy(dij, dO);
        }
      }
    ak.store(dqkv, k0 + j * qs, a.d, lane);
    av.store(dqkv, v0 + j * qs, a.d, lane);
  }
}

// Pass 3, item (bi, h, i): dQ_i = scale sum_j dS_ij K_j, overwriting the slot.
template <int NPL, bool kFlash>
PP_GLOBAL void dq_kernel(DRef qkv, Materialised mt, Flash fl, DRef dout, Geo g, DRef dqkv) {
  const Attn& a = g.a;
  FOR_EACH_WARP_ITEM(item, a.b * a.hq * a.s) {
    const i64 i = item % a.s, h = (item / a.s) % a.hq, bi = item / (a.s * a.hq);
    const i64 kv = h / g.group(), qs = g.qs(), k0 = g.k(bi, kv), v0 = g.v(bi, kv);
    const i64 qi = g.q(bi, h) + i * qs, pr = g.p(bi, h) + i * a.s;
    const float rd = get_slot(dqkv, qi);
    warp::sync();  // every lane has read the slot before any lane overwrites it
    Row<NPL> q, dO, kr, vr, acc;
    if constexpr (kFlash) q.load(qkv, qi, a.d, lane);
    dO.load(dout, g.o(bi, h) + i * g.os(), a.d, lane);
    acc.zero();
    for (i64 j = 0; j <= i; ++j) {
      kr.load(qkv, k0 + j * qs, a.d, lane);
      vr.load(qkv, v0 + j * qs, a.d, lane);
      if constexpr (kFlash) {
        const float pij = expf(a.scale * q.dot(kr) - fl.lse[g.lse(bi, h) + i]);
        acc.axpy(a.scale * pij * (dO.dot(vr) - rd), kr);
      } else {
        const float dp = mt.kept(pr + j) ? dO.dot(vr) * mt.keep_scale : 0.0f;
        const float ds = ld(mt.probs, pr + j) * (dp - rd);
        if (ds == 0.0f) continue;
        acc.axpy(a.scale * ds, kr);
      }
    }
    acc.store(dqkv, qi, a.d, lane);
  }
}

// ---------------------------------------------------------------- launch plans

// What each attention launcher runs, in order: launch(kernel, items, args...)
// runs `kernel` over `items` warp items — a grid on the GPU
// (kernels_attention.cu), one emulated warp on the host (the tests).

inline void check_shape(const Attn& a) {
  if (a.hkv <= 0 || a.hq % a.hkv != 0) throw std::invalid_argument("cuda attention: hq must be a multiple of hkv");
  if (a.d < 2 || a.d > kMaxAttnHeadDim)
    throw std::invalid_argument("cuda attention: head width must be in [2, " + std::to_string(kMaxAttnHeadDim) + "]");
}

// Calls f.template operator()<NPL>() with the smallest lane width that fits d.
template <class F>
void with_npl(i64 d, F&& f) {
  if (d <= 64) f.template operator()<2>();
  else if (d <= 128) f.template operator()<4>();
  else f.template operator()<8>();
}

template <class Launch>
void probs_plan(Launch&& launch, DRef qkv, const Attn& a, DRef probs) {
  check_shape(a);
  with_npl(a.d, [&]<int N>() { launch(&probs_kernel<N>, a.b * a.hq * a.s, qkv, Geo{a}, probs); });
}

template <class Launch>
void pv_plan(Launch&& launch, DRef probs, DRef qkv, const Attn& a, DRef out) {
  check_shape(a);
  with_npl(a.d, [&]<int N>() { launch(&pv_kernel<N>, a.b * a.hq * a.s, probs, qkv, Geo{a}, out); });
}

template <class Launch>
void backward_plan(Launch&& launch, DRef qkv, DRef probs, const std::uint8_t* mask, DRef dropped, float p, DRef dout,
                   const Attn& a, DRef dqkv) {
  check_shape(a);
  const i64 rows = a.b * a.hq * a.s, keys = a.b * a.hkv * a.s;
  const Materialised mt{probs, mask ? dropped : DRef{}, mask, mask ? 1.0f / (1.0f - p) : 1.0f};
  const Flash fl{nullptr};
  const Geo g{a};
  with_npl(a.d, [&]<int N>() {
    launch(&rowstat_kernel<N>, rows, qkv, mt, dout, g, dqkv);
    launch(&dkdv_kernel<N, false>, keys, qkv, mt, fl, dout, g, dqkv);
    launch(&dq_kernel<N, false>, rows, qkv, mt, fl, dout, g, dqkv);
  });
}

template <class Launch>
void flash_forward_plan(Launch&& launch, DRef qkv, const Attn& a, DRef out, float* lse) {
  check_shape(a);
  with_npl(a.d, [&]<int N>() { launch(&flash_forward_kernel<N>, a.b * a.hq * a.s, qkv, Geo{a}, out, lse); });
}

template <class Launch>
void flash_backward_plan(Launch&& launch, DRef qkv, DRef out, const float* lse, DRef dout, const Attn& a, DRef dqkv) {
  check_shape(a);
  const i64 rows = a.b * a.hq * a.s, keys = a.b * a.hkv * a.s;
  const Materialised mt{DRef{}, DRef{}, nullptr, 1.0f};
  const Flash fl{lse};
  const Geo g{a};
  with_npl(a.d, [&]<int N>() {
    launch(&flash_rowstat_kernel<N>, rows, out, dout, g, dqkv);
    launch(&dkdv_kernel<N, true>, keys, qkv, mt, fl, dout, g, dqkv);
    launch(&dq_kernel<N, true>, rows, qkv, mt, fl, dout, g, dqkv);
  });
}

}  // namespace attn
}  // namespace paraplan::validate::cuda
