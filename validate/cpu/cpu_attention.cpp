// CPU attention kernels: materialised probabilities (probs, P V, backward),
// flash style (saves O and log-sum-exp), and attention dropout.
//
// Every product is an Eigen product per (batch, head) over blocks of query
// rows and tiles of keys. Token i of batch bi is row i * b + bi, so a head is a
// matrix with row stride b * ld; the causal structure is used by multiplying
// query block [i0, i0 + bs) only with keys < i0 + bs. fp32 operands are mapped
// in place; bf16 ones are staged (converted) into fp32 stack tiles, and results
// are accumulated in fp32 and rounded once when stored.
//
// Backward: with every operand fp32, gradients accumulate straight into dQKV
// (query blocks outer). Otherwise dK and dV are accumulated per tile of keys on
// the stack over every query head that shares them (keys outer) and dQ per
// query block, so each is rounded once.
#include <cmath>
#include <cstring>
#include <limits>

#include "validate/cpu/cpu_device.hpp"
#include "validate/cpu/cpu_util.hpp"

namespace paraplan::validate {

using namespace cpu;

namespace {

constexpr i64 kRowBlock = 64;   // query rows per block
constexpr i64 kStage = 4096;    // fp32 elements per staged tile (16 KiB)
constexpr i64 kAttnBuf = 8192;  // fp32 elements of a block of full score rows (32 KiB)
// Keys x d of a key tile multiplied in place (fp32): small enough that Eigen's
// packed copy of it stays on the stack (EIGEN_STACK_ALLOCATION_LIMIT, 128 KiB),
// so no product allocates behind the tracking allocator.
constexpr i64 kMapElems = 16384;

i64 map_keys(i64 d) { return std::max(i64(1), kMapElems / d); }

// Element offsets of one (batch, head) slice; row i of the slice is a stride further.
struct Geo {
  AttnShape a;
  i64 group() const { return a.hq / a.hkv; }
  i64 qkv_stride() const { return a.b * a.ld; }
  i64 out_stride() const { return a.b * a.hq * a.d; }
  i64 q(i64 bi, i64 h) const { return bi * a.ld + a.q_off + h * a.d; }
  i64 k(i64 bi, i64 g) const { return bi * a.ld + a.k_off + g * a.d; }
  i64 v(i64 bi, i64 g) const { return bi * a.ld + a.v_off + g * a.d; }
  i64 o(i64 bi, i64 h) const { return bi * a.hq * a.d + h * a.d; }
  i64 p(i64 bi, i64 h) const { return (bi * a.hq + h) * a.s * a.s; }
  i64 lse(i64 bi, i64 h) const { return (bi * a.hq + h) * a.s; }
};

Geo checked(const AttnShape& a) {
  require(a.hkv > 0 && a.hq % a.hkv == 0, "attention: hq must be a multiple of hkv");
  require(a.d > 0 && a.d <= kMaxHeadDim, "attention: head width must be in [1, 1024]");
  return Geo{a};
}

// Query rows per block and keys per tile such that staged blocks (rows x d,
// keys x d, rows x keys) each fit in kStage.
struct Tiles {
  i64 q, k;
};
Tiles tiles(i64 d) {
  const i64 q = std::min(kRowBlock, kStage / d);
  return {q, std::min(kStage / d, kStage / q)};
}

// fp32 view of a rows x cols block at element `off` with row stride `ld`: the
// memory itself when fp32, else a converted copy in `stage` (rows * cols floats).
CMatMap view(CRef x, i64 off, i64 ld, i64 rows, i64 cols, float* stage) {
  if (is_f32(x)) return cmat(x.f32() + off, rows, cols, ld);
  for (i64 r = 0; r < rows; ++r) load(x, off + r * ld, cols, stage + r * cols);
  return cmat(stage, rows, cols, cols);
}

// y rows [off + r * ld, + cols) = src rows (row stride cols).
void store_rows(const float* src, Ref y, i64 off, i64 ld, i64 rows, i64 cols) {
  for (i64 r = 0; r < rows; ++r) store(src + r * cols, y, off + r * ld, cols);
}

struct RowSoftmax {
  float max;
  double sum;  // sum of exp(scale x - max)
};
// x[0, n) = softmax(scale * x[0, n)) in place.
RowSoftmax softmax_row(float* x, i64 n, float scale) {
  float m = -std::numeric_limits<float>::infinity();
  for (i64 j = 0; j < n; ++j) m = std::max(m, scale * x[j]);
  double sum = 0;
  for (i64 j = 0; j < n; ++j) {
    x[j] = std::exp(scale * x[j] - m);
    sum += x[j];
  }
  for (i64 j = 0; j < n; ++j) x[j] = float(x[j] / sum);
  return {m, sum};
}

// dQ, dK and dV column blocks of every token row, before the in-place
// accumulating paths add into them.
void zero_grads(Ref dqkv, const AttnShape& a) {
  for (i64 r = 0; r < a.s * a.b; ++r) {
    zero(dqkv, r * a.ld + a.q_off, a.hq * a.d);
    zero(dqkv, r * a.ld + a.k_off, a.hkv * a.d);
    zero(dqkv, r * a.ld + a.v_off, a.hkv * a.d);
  }
}

// The keys-outer backward needs each row's sum_j dP_ij P_ij before it can form
// dS; it keeps it in the first 4 bytes of that row's own dQ slot (d >= 2 in
// bf16), the one per-(head, row) place the interface leaves. dQ overwrites it last.
void put_slot(Ref dqkv, i64 idx, float v) {
  std::memcpy(static_cast<char*>(dqkv.data) + idx * storage_bytes(dqkv.dtype), &v, sizeof v);
}
float get_slot(CRef dqkv, i64 idx) {
  float v;
  std::memcpy(&v, static_cast<const char*>(dqkv.data) + idx * storage_bytes(dqkv.dtype), sizeof v);
  return v;
}

// Score-block buffers of the fp32 backward paths: blocks of full rows on the
// stack, or one row at a time in the caller's scratch when a row does not fit.
struct Blocks {
  float* buf[2];
  i64 rows;
};
Blocks blocks(i64 s, float* stack, float* scratch) {
  if (s <= kAttnBuf) return {{stack, stack + kAttnBuf}, std::min(kRowBlock, kAttnBuf / s)};
  return {{scratch, scratch + s}, 1};
}

// ---------------------------------------------------------------- forward

void probs_tiled(CRef qkv, const Geo& g, Ref probs) {
  const AttnShape& a = g.a;
  const i64 s = a.s, d = a.d, qs = g.qkv_stride();
  const bool direct = is_f32(probs);  // scores are computed in place
  i64 bq = is_f32(qkv) ? kRowBlock : tiles(d).q;
  if (!direct) bq = std::clamp(kAttnBuf / s, i64(1), bq);
  // bf16 probs with rows longer than kAttnBuf: max and sum first, then write.
  const bool two_pass = !direct && s > kAttnBuf;
  const i64 tk = std::min(is_f32(qkv) ? map_keys(d) : kStage / d, two_pass ? kAttnBuf : s);
  alignas(64) float qst[kStage], kst[kStage], sbuf[kAttnBuf];
  for (i64 bi = 0; bi < a.b; ++bi)
    for (i64 h = 0; h < a.hq; ++h) {
      const i64 pb = g.p(bi, h), k0 = g.k(bi, h / g.group());
      for (i64 i0 = 0; i0 < s; i0 += bq) {
        const i64 bs = std::min(bq, s - i0), cols = i0 + bs;
        const CMatMap Q = view(qkv, g.q(bi, h) + i0 * qs, qs, bs, d, qst);
        auto scores = [&](i64 j0, i64 n, float* dst, i64 ld) {
          mat(dst, bs, n, ld).noalias() = Q * view(qkv, k0 + j0 * qs, qs, n, d, kst).transpose();
        };
        if (!two_pass) {
          float* S = direct ? probs.f32() + pb + i0 * s : sbuf;
          const i64 ld = direct ? s : cols;
          for (i64 j0 = 0; j0 < cols; j0 += tk) scores(j0, std::min(tk, cols - j0), S + j0, ld);
          for (i64 i = i0; i < i0 + bs; ++i) {
            float* row = S + (i - i0) * ld;
            softmax_row(row, i + 1, a.scale);
            if (direct) {
              std::fill(row + i + 1, row + s, 0.0f);
            } else {
              store(row, probs, pb + i * s, i + 1);
              zero(probs, pb + i * s + i + 1, s - i - 1);
            }
          }
          continue;
        }
        const i64 i = i0;  // two passes, one row (bs = 1)
        float m = -std::numeric_limits<float>::infinity();
        double l = 0;
        for (i64 j0 = 0; j0 <= i; j0 += tk) {
          const i64 n = std::min(tk, i + 1 - j0);
          scores(j0, n, sbuf, n);
          for (i64 j = 0; j < n; ++j) {
            const float x = a.scale * sbuf[j];
            if (x > m) {  // rescale the running sum to the new max
              l *= std::exp(double(m) - x);
              m = x;
            }
            l += std::exp(double(x) - m);
          }
        }
        for (i64 j0 = 0; j0 <= i; j0 += tk) {
          const i64 n = std::min(tk, i + 1 - j0);
          scores(j0, n, sbuf, n);
          for (i64 j = 0; j < n; ++j) sbuf[j] = float(std::exp(double(a.scale * sbuf[j]) - m) / l);
          store(sbuf, probs, pb + i * s + j0, n);
        }
        zero(probs, pb + i * s + i + 1, s - i - 1);
      }
    }
}

void pv_tiled(CRef probs, CRef qkv, const Geo& g, Ref out) {
  const AttnShape& a = g.a;
  const i64 s = a.s, d = a.d, qs = g.qkv_stride(), os = g.out_stride();
  const bool direct = is_f32(out);
  const bool mapped = is_f32(probs) && is_f32(qkv);  // nothing to stage
  const i64 bq = direct && mapped ? kRowBlock : tiles(d).q, tk = mapped ? map_keys(d) : tiles(d).k;
  alignas(64) float pst[kStage], vst[kStage], ost[kStage];
  for (i64 bi = 0; bi < a.b; ++bi)
    for (i64 h = 0; h < a.hq; ++h) {
      const i64 v0 = g.v(bi, h / g.group());
      for (i64 i0 = 0; i0 < s; i0 += bq) {
        const i64 bs = std::min(bq, s - i0), cols = i0 + bs;
        MatMap O = direct ? mat(out.f32() + g.o(bi, h) + i0 * os, bs, d, os) : mat(ost, bs, d, d);
        O.setZero();
        for (i64 j0 = 0; j0 < cols; j0 += tk) {
          const i64 n = std::min(tk, cols - j0);
          O.noalias() += view(probs, g.p(bi, h) + i0 * s + j0, s, bs, n, pst) *
                         view(qkv, v0 + j0 * qs, qs, n, d, vst);
        }
        if (!direct) store_rows(ost, out, g.o(bi, h) + i0 * os, os, bs, d);
      }
    }
}

// Online softmax over key tiles (Dao et al. 2022, Algorithm 1): running max m
// and sum l per row; O is rescaled when the max grows.
void flash_forward_tiled(CRef qkv, const Geo& g, Ref out, float* lse) {
  const AttnShape& a = g.a;
  const i64 s = a.s, d = a.d, qs = g.qkv_stride(), os = g.out_stride();
  const Tiles t = tiles(d);
  alignas(64) float qst[kStage], kst[kStage], vst[kStage], sb[kStage], ob[kStage];
  float m[kRowBlock];
  double l[kRowBlock];
  for (i64 bi = 0; bi < a.b; ++bi)
    for (i64 h = 0; h < a.hq; ++h) {
      const i64 k0 = g.k(bi, h / g.group()), v0 = g.v(bi, h / g.group());
      for (i64 i0 = 0; i0 < s; i0 += t.q) {
        const i64 bs = std::min(t.q, s - i0), cols = i0 + bs;
        const CMatMap Q = view(qkv, g.q(bi, h) + i0 * qs, qs, bs, d, qst);
        MatMap O = mat(ob, bs, d, d);
        O.setZero();
        std::fill(m, m + bs, -std::numeric_limits<float>::infinity());
        std::fill(l, l + bs, 0.0);
        for (i64 j0 = 0; j0 < cols; j0 += t.k) {
          const i64 n = std::min(t.k, cols - j0);
          mat(sb, bs, n, n).noalias() = Q * view(qkv, k0 + j0 * qs, qs, n, d, kst).transpose();
          for (i64 r = 0; r < bs; ++r) {
            float* row = sb + r * n;
            const i64 valid = std::clamp(i0 + r + 1 - j0, i64(0), n);  // keys j <= i
            std::fill(row + valid, row + n, 0.0f);
            if (valid == 0) continue;
            float mx = m[r];
            for (i64 j = 0; j < valid; ++j) mx = std::max(mx, a.scale * row[j]);
            const float corr = std::exp(m[r] - mx);  // 0 on the first tile
            l[r] *= corr;
            O.row(r) *= corr;
            for (i64 j = 0; j < valid; ++j) {
              row[j] = std::exp(a.scale * row[j] - mx);
              l[r] += row[j];
            }
            m[r] = mx;
          }
          O.noalias() += cmat(sb, bs, n, n) * view(qkv, v0 + j0 * qs, qs, n, d, vst);
        }
        for (i64 r = 0; r < bs; ++r) {
          for (i64 e = 0; e < d; ++e) ob[r * d + e] = float(ob[r * d + e] / l[r]);
          lse[g.lse(bi, h) + i0 + r] = float(double(m[r]) + std::log(l[r]));
        }
        store_rows(ob, out, g.o(bi, h) + i0 * os, os, bs, d);
      }
    }
}

// ---------------------------------------------------------------- backward (materialised)

// All fp32: query blocks outer, their full score rows in one buffer (dS needs
// the whole row's sum_j dP_ij P_ij), accumulating straight into dQKV (zeroed first).
void backward_eigen(const float* qkv, const float* probs, const std::uint8_t* mask,
                    const float* dropped, float p, const float* dout, const Geo& g, float* dqkv,
                    float* scratch) {
  const AttnShape& a = g.a;
  const float keep_scale = mask ? 1.0f / (1.0f - p) : 1.0f;
  const i64 qs = g.qkv_stride(), tk = map_keys(a.d);
  alignas(64) float stack[kAttnBuf];
  const Blocks blk = blocks(a.s, stack, scratch);
  for (i64 bi = 0; bi < a.b; ++bi)
    for (i64 h = 0; h < a.hq; ++h) {
      const i64 kv = h / g.group();
      const CMatMap Q = cmat(qkv + g.q(bi, h), a.s, a.d, qs);
      const CMatMap K = cmat(qkv + g.k(bi, kv), a.s, a.d, qs);
      const CMatMap V = cmat(qkv + g.v(bi, kv), a.s, a.d, qs);
      const CMatMap dO = cmat(dout + g.o(bi, h), a.s, a.d, g.out_stride());
      const float* pp = probs + g.p(bi, h);
      const CMatMap D = cmat((mask ? dropped : probs) + g.p(bi, h), a.s, a.s, a.s);
      const std::uint8_t* mk = mask ? mask + g.p(bi, h) : nullptr;
      MatMap dQ = mat(dqkv + g.q(bi, h), a.s, a.d, qs);
      MatMap dK = mat(dqkv + g.k(bi, kv), a.s, a.d, qs);
      MatMap dV = mat(dqkv + g.v(bi, kv), a.s, a.d, qs);
      for (i64 i0 = 0; i0 < a.s; i0 += blk.rows) {
        const i64 bs = std::min(blk.rows, a.s - i0), cols = i0 + bs;
        MatMap W = mat(blk.buf[0], bs, cols, cols);
        for (i64 j0 = 0; j0 < cols; j0 += tk) {  // d(dropped)
          const i64 n = std::min(tk, cols - j0);
          W.middleCols(j0, n).noalias() = dO.middleRows(i0, bs) * V.middleRows(j0, n).transpose();
        }
        for (i64 i = i0; i < i0 + bs; ++i) {
          float* w = blk.buf[0] + (i - i0) * cols;
          const float* pr = pp + i * a.s;
          double rowdot = 0;  // sum_j dP_ij P_ij
          for (i64 j = 0; j <= i; ++j) {
            w[j] = mk ? (mk[i * a.s + j] ? w[j] * keep_scale : 0.0f) : w[j];
            rowdot += double(w[j]) * pr[j];
          }
          const float rd = float(rowdot);
          for (i64 j = 0; j <= i; ++j) w[j] = pr[j] * (w[j] - rd);  // dS
          std::fill(w + i + 1, w + cols, 0.0f);
        }
        for (i64 j0 = 0; j0 < cols; j0 += tk) {
          const i64 n = std::min(tk, cols - j0);
          const auto Wt = W.middleCols(j0, n);
          dQ.middleRows(i0, bs).noalias() += a.scale * Wt * K.middleRows(j0, n);
          dK.middleRows(j0, n).noalias() += a.scale * Wt.transpose() * Q.middleRows(i0, bs);
          dV.middleRows(j0, n).noalias() +=
              D.block(i0, j0, bs, n).transpose() * dO.middleRows(i0, bs);
        }
      }
    }
}

// W holds dO V^T for rows [i0, i0 + bs) and keys [j0, j0 + n) of one head, P
// the probabilities of that block; W becomes dS = P (dP - rowdot) with
// dP = W * mask / (1 - p), zero above the diagonal. mask: this head's mask at
// (i0, j0) with row stride s, or null without dropout.
void materialised_ds(float* W, const CMatMap& P, const std::uint8_t* mask, i64 s, float keep_scale,
                     i64 bs, i64 n, i64 i0, i64 j0, const float* rowdot) {
  for (i64 r = 0; r < bs; ++r) {
    const i64 valid = std::clamp(i0 + r + 1 - j0, i64(0), n);  // keys j <= i
    float* w = W + r * n;
    for (i64 j = 0; j < valid; ++j) {
      const float dp = mask ? (mask[r * s + j] ? w[j] * keep_scale : 0.0f) : w[j];
      w[j] = P(r, j) * (dp - rowdot[r]);
    }
    std::fill(w + valid, w + n, 0.0f);
  }
}

// Any storage types, in three passes per (batch, kv head): 1. each row's
// sum_j dP_ij P_ij into its dQ slot; 2. keys outer: dK, dV of a key tile over
// all query heads of the group, on the stack; 3. query blocks outer: dQ.
void backward_tiled(CRef qkv, CRef probs, const std::uint8_t* mask, CRef dropped, float p,
                    CRef dout, const Geo& g, Ref dqkv) {
  const AttnShape& a = g.a;
  require(a.d * storage_bytes(dqkv.dtype) >= 4, "attention_backward: bf16 dqkv needs d >= 2");
  const i64 s = a.s, d = a.d, qs = g.qkv_stride(), os = g.out_stride();
  const float ks = mask ? 1.0f / (1.0f - p) : 1.0f;
  const Tiles t = tiles(d);
  alignas(64) float qst[kStage], dost[kStage], kst[kStage], vst[kStage], pst[kStage], wst[kStage],
      ak[kStage], av[kStage];
  float rd[kRowBlock];
  for (i64 bi = 0; bi < a.b; ++bi)
    for (i64 kv = 0; kv < a.hkv; ++kv) {
      const i64 h0 = kv * g.group(), h1 = h0 + g.group(), k0 = g.k(bi, kv), v0 = g.v(bi, kv);
      auto mask_at = [&](i64 h, i64 i0, i64 j0) {
        return mask ? mask + g.p(bi, h) + i0 * s + j0 : nullptr;
      };
      auto P_at = [&](CRef x, i64 h, i64 i0, i64 bs, i64 j0, i64 n) {
        return view(x, g.p(bi, h) + i0 * s + j0, s, bs, n, pst);
      };
      auto slots = [&](i64 h, i64 i0, i64 bs) {
        for (i64 r = 0; r < bs; ++r) rd[r] = get_slot(dqkv, g.q(bi, h) + (i0 + r) * qs);
      };
      // 1. Row statistics.
      for (i64 h = h0; h < h1; ++h)
        for (i64 i0 = 0; i0 < s; i0 += t.q) {
          const i64 bs = std::min(t.q, s - i0), cols = i0 + bs;
          const CMatMap dO = view(dout, g.o(bi, h) + i0 * os, os, bs, d, dost);
          double acc[kRowBlock] = {};
          for (i64 j0 = 0; j0 < cols; j0 += t.k) {
            const i64 n = std::min(t.k, cols - j0);
            MatMap W = mat(wst, bs, n, n);
            W.noalias() = dO * view(qkv, v0 + j0 * qs, qs, n, d, vst).transpose();
            const CMatMap P = P_at(probs, h, i0, bs, j0, n);
            const std::uint8_t* mk = mask_at(h, i0, j0);
            for (i64 r = 0; r < bs; ++r) {
              const i64 valid = std::clamp(i0 + r + 1 - j0, i64(0), n);  // keys j <= i
              for (i64 j = 0; j < valid; ++j) {
                const float dp = mk ? (mk[r * s + j] ? W(r, j) * ks : 0.0f) : W(r, j);
                acc[r] += double(dp) * P(r, j);
              }
            }
          }
          for (i64 r = 0; r < bs; ++r) put_slot(dqkv, g.q(bi, h) + (i0 + r) * qs, float(acc[r]));
        }
      // 2. dK = scale dS^T Q and dV = dropped^T dO per key tile.
      for (i64 j0 = 0; j0 < s; j0 += t.k) {
        const i64 n = std::min(t.k, s - j0);
        const CMatMap V = view(qkv, v0 + j0 * qs, qs, n, d, vst);
        MatMap AK = mat(ak, n, d, d), AV = mat(av, n, d, d);
        AK.setZero();
        AV.setZero();
        for (i64 h = h0; h < h1; ++h)
          for (i64 i0 = j0 / t.q * t.q; i0 < s; i0 += t.q) {  // rows i >= j0
            const i64 bs = std::min(t.q, s - i0);
            const CMatMap Q = view(qkv, g.q(bi, h) + i0 * qs, qs, bs, d, qst);
            const CMatMap dO = view(dout, g.o(bi, h) + i0 * os, os, bs, d, dost);
            slots(h, i0, bs);
            MatMap W = mat(wst, bs, n, n);
            W.noalias() = dO * V.transpose();
            materialised_ds(wst, P_at(probs, h, i0, bs, j0, n), mask_at(h, i0, j0), s, ks, bs, n,
                            i0, j0, rd);
            AK.noalias() += a.scale * W.transpose() * Q;
            AV.noalias() += P_at(mask ? dropped : probs, h, i0, bs, j0, n).transpose() * dO;
          }
        store_rows(ak, dqkv, k0 + j0 * qs, qs, n, d);
        store_rows(av, dqkv, v0 + j0 * qs, qs, n, d);
      }
      // 3. dQ = scale dS K per query block (overwriting the slots).
      for (i64 h = h0; h < h1; ++h)
        for (i64 i0 = 0; i0 < s; i0 += t.q) {
          const i64 bs = std::min(t.q, s - i0), cols = i0 + bs;
          const CMatMap dO = view(dout, g.o(bi, h) + i0 * os, os, bs, d, dost);
          slots(h, i0, bs);
          MatMap AQ = mat(ak, bs, d, d);
          AQ.setZero();
          for (i64 j0 = 0; j0 < cols; j0 += t.k) {
            const i64 n = std::min(t.k, cols - j0);
            MatMap W = mat(wst, bs, n, n);
            W.noalias() = dO * view(qkv, v0 + j0 * qs, qs, n, d, vst).transpose();
            materialised_ds(wst, P_at(probs, h, i0, bs, j0, n), mask_at(h, i0, j0), s, ks, bs, n,
                            i0, j0, rd);
            AQ.noalias() += a.scale * W * view(qkv, k0 + j0 * qs, qs, n, d, kst);
          }
          store_rows(ak, dqkv, g.q(bi, h) + i0 * qs, qs, bs, d);
        }
    }
}

// ---------------------------------------------------------------- flash backward

// D_i = dO_i . O_i; P_ij = exp(scale q_i.k_j - lse_i); dS = P (dO_i.v_j - D_i).
void flash_backward_eigen(const float* qkv, const float* out, const float* lse, const float* dout,
                          const Geo& g, float* dqkv, float* scratch) {
  const AttnShape& a = g.a;
  const i64 qs = g.qkv_stride(), os = g.out_stride(), tk = map_keys(a.d);
  alignas(64) float stack[2 * kAttnBuf];
  const Blocks blk = blocks(a.s, stack, scratch);
  for (i64 bi = 0; bi < a.b; ++bi)
    for (i64 h = 0; h < a.hq; ++h) {
      const i64 kv = h / g.group();
      const CMatMap Q = cmat(qkv + g.q(bi, h), a.s, a.d, qs);
      const CMatMap K = cmat(qkv + g.k(bi, kv), a.s, a.d, qs);
      const CMatMap V = cmat(qkv + g.v(bi, kv), a.s, a.d, qs);
      const CMatMap dO = cmat(dout + g.o(bi, h), a.s, a.d, os);
      MatMap dQ = mat(dqkv + g.q(bi, h), a.s, a.d, qs);
      MatMap dK = mat(dqkv + g.k(bi, kv), a.s, a.d, qs);
      MatMap dV = mat(dqkv + g.v(bi, kv), a.s, a.d, qs);
      for (i64 i0 = 0; i0 < a.s; i0 += blk.rows) {
        const i64 bs = std::min(blk.rows, a.s - i0), cols = i0 + bs;
        MatMap P = mat(blk.buf[0], bs, cols, cols), S = mat(blk.buf[1], bs, cols, cols);
        for (i64 j0 = 0; j0 < cols; j0 += tk) {
          const i64 n = std::min(tk, cols - j0);
          P.middleCols(j0, n).noalias() = Q.middleRows(i0, bs) * K.middleRows(j0, n).transpose();
          S.middleCols(j0, n).noalias() = dO.middleRows(i0, bs) * V.middleRows(j0, n).transpose();
        }
        for (i64 i = i0; i < i0 + bs; ++i) {
          float* pr = blk.buf[0] + (i - i0) * cols;
          float* sr = blk.buf[1] + (i - i0) * cols;
          const float* o = out + g.o(bi, h) + i * os;
          const float* dor = dout + g.o(bi, h) + i * os;
          double di = 0;
          for (i64 e = 0; e < a.d; ++e) di += double(o[e]) * dor[e];
          const float D = float(di), L = lse[g.lse(bi, h) + i];
          for (i64 j = 0; j <= i; ++j) {
            pr[j] = std::exp(a.scale * pr[j] - L);
            sr[j] = pr[j] * (sr[j] - D);
          }
          std::fill(pr + i + 1, pr + cols, 0.0f);
          std::fill(sr + i + 1, sr + cols, 0.0f);
        }
        for (i64 j0 = 0; j0 < cols; j0 += tk) {
          const i64 n = std::min(tk, cols - j0);
          const auto Pt = P.middleCols(j0, n);
          const auto St = S.middleCols(j0, n);
          dV.middleRows(j0, n).noalias() += Pt.transpose() * dO.middleRows(i0, bs);
          dQ.middleRows(i0, bs).noalias() += a.scale * St * K.middleRows(j0, n);
          dK.middleRows(j0, n).noalias() += a.scale * St.transpose() * Q.middleRows(i0, bs);
        }
      }
    }
}

// S (= Q K^T) becomes P = exp(scale S - lse_i) and W (= dO V^T) becomes
// dS = P (W - D_i), both zero above the diagonal.
void flash_ds(float* S, float* W, i64 bs, i64 n, i64 i0, i64 j0, float scale, const float* L,
              const float* D) {
  for (i64 r = 0; r < bs; ++r) {
    const i64 valid = std::clamp(i0 + r + 1 - j0, i64(0), n);
    float* sr = S + r * n;
    float* wr = W + r * n;
    for (i64 j = 0; j < valid; ++j) {
      sr[j] = std::exp(scale * sr[j] - L[r]);
      wr[j] = sr[j] * (wr[j] - D[r]);
    }
    std::fill(sr + valid, sr + n, 0.0f);
    std::fill(wr + valid, wr + n, 0.0f);
  }
}

// Any storage types, two passes per (batch, kv head): keys outer for dK, dV
// (summed over the query heads of the group on the stack), then query blocks
// outer for dQ. P is recomputed from Q, K and lse in both.
void flash_backward_tiled(CRef qkv, CRef out, const float* lse, CRef dout, const Geo& g, Ref dqkv) {
  const AttnShape& a = g.a;
  const i64 s = a.s, d = a.d, qs = g.qkv_stride(), os = g.out_stride();
  const Tiles t = tiles(d);
  alignas(64) float qst[kStage], dost[kStage], kst[kStage], vst[kStage], sst[kStage], wst[kStage],
      ak[kStage], av[kStage];
  float L[kRowBlock], D[kRowBlock], orow[kMaxHeadDim], drow[kMaxHeadDim];
  for (i64 bi = 0; bi < a.b; ++bi)
    for (i64 kv = 0; kv < a.hkv; ++kv) {
      const i64 h0 = kv * g.group(), h1 = h0 + g.group(), k0 = g.k(bi, kv), v0 = g.v(bi, kv);
      auto stats = [&](i64 h, i64 i0, i64 bs) {  // D_i = dO_i . O_i and lse_i
        for (i64 r = 0; r < bs; ++r) {
          load(out, g.o(bi, h) + (i0 + r) * os, d, orow);
          load(dout, g.o(bi, h) + (i0 + r) * os, d, drow);
          double di = 0;
          for (i64 e = 0; e < d; ++e) di += double(orow[e]) * drow[e];
          D[r] = float(di);
          L[r] = lse[g.lse(bi, h) + i0 + r];
        }
      };
      // P and dS of query block i0 against key tile j0 (K, V already viewed).
      auto block = [&](const CMatMap& Q, const CMatMap& dO, const CMatMap& K, const CMatMap& V,
                       i64 bs, i64 n, i64 i0, i64 j0) {
        mat(sst, bs, n, n).noalias() = Q * K.transpose();
        mat(wst, bs, n, n).noalias() = dO * V.transpose();
        flash_ds(sst, wst, bs, n, i0, j0, a.scale, L, D);
      };
      for (i64 j0 = 0; j0 < s; j0 += t.k) {
        const i64 n = std::min(t.k, s - j0);
        const CMatMap K = view(qkv, k0 + j0 * qs, qs, n, d, kst);
        const CMatMap V = view(qkv, v0 + j0 * qs, qs, n, d, vst);
        MatMap AK = mat(ak, n, d, d), AV = mat(av, n, d, d);
        AK.setZero();
        AV.setZero();
        for (i64 h = h0; h < h1; ++h)
          for (i64 i0 = j0 / t.q * t.q; i0 < s; i0 += t.q) {  // rows i >= j0
            const i64 bs = std::min(t.q, s - i0);
            const CMatMap Q = view(qkv, g.q(bi, h) + i0 * qs, qs, bs, d, qst);
            const CMatMap dO = view(dout, g.o(bi, h) + i0 * os, os, bs, d, dost);
            stats(h, i0, bs);
            block(Q, dO, K, V, bs, n, i0, j0);
            AV.noalias() += cmat(sst, bs, n, n).transpose() * dO;
            AK.noalias() += a.scale * cmat(wst, bs, n, n).transpose() * Q;
          }
        store_rows(ak, dqkv, k0 + j0 * qs, qs, n, d);
        store_rows(av, dqkv, v0 + j0 * qs, qs, n, d);
      }
      for (i64 h = h0; h < h1; ++h)
        for (i64 i0 = 0; i0 < s; i0 += t.q) {
          const i64 bs = std::min(t.q, s - i0), cols = i0 + bs;
          const CMatMap Q = view(qkv, g.q(bi, h) + i0 * qs, qs, bs, d, qst);
          const CMatMap dO = view(dout, g.o(bi, h) + i0 * os, os, bs, d, dost);
          stats(h, i0, bs);
          MatMap AQ = mat(ak, bs, d, d);
          AQ.setZero();
          for (i64 j0 = 0; j0 < cols; j0 += t.k) {
            const i64 n = std::min(t.k, cols - j0);
            const CMatMap K = view(qkv, k0 + j0 * qs, qs, n, d, kst);
            block(Q, dO, K, view(qkv, v0 + j0 * qs, qs, n, d, vst), bs, n, i0, j0);
            AQ.noalias() += a.scale * cmat(wst, bs, n, n) * K;
          }
          store_rows(ak, dqkv, g.q(bi, h) + i0 * qs, qs, bs, d);
        }
    }
}

}  // namespace

// ---------------------------------------------------------------- Device entry points

void CpuDevice::attention_probs(CRef qkv, const AttnShape& a, Ref probs) {
  probs_tiled(qkv, checked(a), probs);
}

void CpuDevice::attention_pv(CRef probs, CRef qkv, const AttnShape& a, Ref out) {
  pv_tiled(probs, qkv, checked(a), out);
}

void CpuDevice::attention_backward(CRef qkv, CRef probs, const std::uint8_t* mask, CRef dropped,
                                   float p, CRef dout, const AttnShape& a, Ref dqkv,
                                   float* scratch) {
  const Geo g = checked(a);
  if (!mask) p = 0.0f;
  if (is_f32(qkv) && is_f32(probs) && is_f32(dout) && is_f32(dqkv) && (!mask || is_f32(dropped))) {
    zero_grads(dqkv, a);
    backward_eigen(qkv.f32(), probs.f32(), mask, mask ? dropped.f32() : nullptr, p, dout.f32(), g,
                   dqkv.f32(), scratch);
  } else {
    backward_tiled(qkv, probs, mask, dropped, p, dout, g, dqkv);
  }
}

// The online softmax needs no scratch.
void CpuDevice::flash_attention_forward(CRef qkv, const AttnShape& a, Ref out, float* lse,
                                        float* /*scratch*/) {
  flash_forward_tiled(qkv, checked(a), out, lse);
}

void CpuDevice::flash_attention_backward(CRef qkv, CRef out, const float* lse, CRef dout,
                                         const AttnShape& a, Ref dqkv, float* scratch) {
  const Geo g = checked(a);
  if (is_f32(qkv) && is_f32(out) && is_f32(dout) && is_f32(dqkv)) {
    zero_grads(dqkv, a);
    flash_backward_eigen(qkv.f32(), out.f32(), lse, dout.f32(), g, dqkv.f32(), scratch);
  } else {
    flash_backward_tiled(qkv, out, lse, dout, g, dqkv);
  }
}

void CpuDevice::attention_dropout_forward(CRef probs, Ref dropped, std::uint8_t* mask,
                                          const AttnShape& a, float p, std::uint64_t seed, i64 seq0,
                                          i64 head0, i64 heads_total) {
  const Geo g = checked(a);
  const float keep_scale = 1.0f / (1.0f - p);
  float ps[kChunk];
  for (i64 bi = 0; bi < a.b; ++bi)
    for (i64 h = 0; h < a.hq; ++h)
      for (i64 i = 0; i < a.s; ++i) {
        const i64 key = ((seq0 + bi) * heads_total + head0 + h) * a.s + i;
        const i64 pr = g.p(bi, h) + i * a.s;
        chunked(i + 1, [&](i64 o, i64 len) {
          load(probs, pr + o, len, ps);
          for (i64 j = 0; j < len; ++j) {
            const bool keep = hash_uniform(seed, key, o + j) >= double(p);
            mask[pr + o + j] = keep ? 1 : 0;
            ps[j] = keep ? ps[j] * keep_scale : 0.0f;
          }
          store(ps, dropped, pr + o, len);
        });
        std::memset(mask + pr + i + 1, 0, std::size_t(a.s - i - 1));
        zero(dropped, pr + i + 1, a.s - i - 1);
      }
}

}  // namespace paraplan::validate
