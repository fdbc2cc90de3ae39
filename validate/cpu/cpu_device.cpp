// CPU kernels other than attention (see cpu_attention.cpp). Conventions are
// those of validate/device.hpp; helpers in cpu_util.hpp.
#include "validate/cpu/cpu_device.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "validate/cpu/cpu_util.hpp"

namespace paraplan::validate {

using namespace cpu;

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

// ---------------------------------------------------------------- data movement

void CpuDevice::copy(CRef src, Ref dst, i64 n) {
  if (src.dtype == dst.dtype) {
    std::memmove(dst.data, src.data, std::size_t(n) * std::size_t(storage_bytes(src.dtype)));
    return;
  }
  float buf[kChunk];
  chunked(n, [&](i64 o, i64 len) {
    load(src, o, len, buf);
    store(buf, dst, o, len);
  });
}

void CpuDevice::fill(Ref dst, i64 n, float value) {
  float buf[kChunk];
  std::fill(buf, buf + kChunk, value);
  chunked(n, [&](i64 o, i64 len) { store(buf, dst, o, len); });
}

void CpuDevice::to_host(CRef src, float* host, i64 n) { load(src, 0, n, host); }
void CpuDevice::from_host(const float* host, Ref dst, i64 n) { store(host, dst, 0, n); }

void CpuDevice::copy_2d(CRef src, i64 ld_src, Ref dst, i64 ld_dst, i64 rows, i64 cols) {
  for (i64 r = 0; r < rows; ++r) copy(src.at(r * ld_src), dst.at(r * ld_dst), cols);
}

// ---------------------------------------------------------------- elementwise

void CpuDevice::add(CRef a, CRef b, Ref out, i64 n) {
  float x[kChunk], y[kChunk];
  chunked(n, [&](i64 o, i64 len) {  // both chunks are read before out is written: aliasing is safe
    load(a, o, len, x);
    load(b, o, len, y);
    for (i64 i = 0; i < len; ++i) x[i] += y[i];
    store(x, out, o, len);
  });
}

void CpuDevice::axpy(float alpha, CRef x, Ref y, i64 n) {
  float xs[kChunk], ys[kChunk];
  chunked(n, [&](i64 o, i64 len) {
    load(x, o, len, xs);
    load(y, o, len, ys);
    cpu::axpy(alpha, xs, ys, len);
    store(ys, y, o, len);
  });
}

void CpuDevice::scale(Ref x, i64 n, float alpha) {
  float xs[kChunk];
  chunked(n, [&](i64 o, i64 len) {
    load(x, o, len, xs);
    for (i64 i = 0; i < len; ++i) xs[i] *= alpha;
    store(xs, x, o, len);
  });
}

void CpuDevice::add_bias(Ref y, CRef bias, i64 rows, i64 cols) {
  float bs[kChunk], ys[kChunk];
  chunked(cols, [&](i64 c0, i64 len) {
    load(bias, c0, len, bs);
    for (i64 r = 0; r < rows; ++r) {
      load(y, r * cols + c0, len, ys);
      for (i64 i = 0; i < len; ++i) ys[i] += bs[i];
      store(ys, y, r * cols + c0, len);
    }
  });
}

void CpuDevice::bias_backward(CRef dy, Ref dbias, i64 rows, i64 cols) {
  // Column windows outer so each window's sums stay on the stack and dbias is
  // rounded once.
  float ys[kChunk];
  double acc[kChunk];
  chunked(cols, [&](i64 c0, i64 len) {
    std::fill(acc, acc + len, 0.0);
    for (i64 r = 0; r < rows; ++r) {
      load(dy, r * cols + c0, len, ys);
      for (i64 i = 0; i < len; ++i) acc[i] += ys[i];
    }
    load(dbias, c0, len, ys);
    for (i64 i = 0; i < len; ++i) ys[i] = float(ys[i] + acc[i]);
    store(ys, dbias, c0, len);
  });
}

// ---------------------------------------------------------------- GEMM

namespace {

inline float to_f(float x) { return x; }
inline float to_f(bf16 x) { return to_float(x); }

// out[r * ldo + c] = op(X)[r0 + r, c0 + c] for a rows x cols block, where
// op(X) = X (row stride ldx) or X^T.
template <class T>
void load_block_t(const T* x, i64 ldx, bool trans, i64 r0, i64 c0, i64 rows, i64 cols, float* out,
                  i64 ldo) {
  if (!trans) {
    for (i64 r = 0; r < rows; ++r) {
      const T* src = x + (r0 + r) * ldx + c0;
      for (i64 c = 0; c < cols; ++c) out[r * ldo + c] = to_f(src[c]);
    }
  } else {
    for (i64 c = 0; c < cols; ++c) {
      const T* src = x + (c0 + c) * ldx + r0;
      for (i64 r = 0; r < rows; ++r) out[r * ldo + c] = to_f(src[r]);
    }
  }
}

void load_block(CRef x, i64 ldx, bool trans, i64 r0, i64 c0, i64 rows, i64 cols, float* out,
                i64 ldo) {
  if (is_f32(x))
    load_block_t(x.f32(), ldx, trans, r0, c0, rows, cols, out, ldo);
  else
    load_block_t(x.b16(), ldx, trans, r0, c0, rows, cols, out, ldo);
}

// C[r, c] = alpha * acc[r, c] + beta * C[r, c] (C not read when beta is 0).
void store_block(const float* acc, i64 ld_acc, float alpha, float beta, Ref c, i64 ldc, i64 r0,
                 i64 c0, i64 rows, i64 cols) {
  float row[kChunk];
  for (i64 r = 0; r < rows; ++r) {
    chunked(cols, [&](i64 o, i64 len) {
      const i64 at = (r0 + r) * ldc + c0 + o;
      if (beta != 0.0f) {
        load(c, at, len, row);
        for (i64 i = 0; i < len; ++i) row[i] = alpha * acc[r * ld_acc + o + i] + beta * row[i];
      } else {
        for (i64 i = 0; i < len; ++i) row[i] = alpha * acc[r * ld_acc + o + i];
      }
      store(row, c, at, len);
    });
  }
}

// fp32: Eigen over the operands in place, in blocks small enough that Eigen's
// packed copies stay on the stack (EIGEN_STACK_ALLOCATION_LIMIT, 128 KiB), so
// nothing is allocated behind the tracking allocator.
constexpr i64 kFm = 256, kFn = 256, kFk = 128;

void gemm_f32(bool ta, bool tb, i64 m, i64 n, i64 k, float alpha, const float* a, i64 lda,
              const float* b, i64 ldb, float beta, float* c, i64 ldc) {
  for (i64 i0 = 0; i0 < m; i0 += kFm) {
    const i64 mb = std::min(kFm, m - i0);
    for (i64 j0 = 0; j0 < n; j0 += kFn) {
      const i64 nb = std::min(kFn, n - j0);
      MatMap C = mat(c + i0 * ldc + j0, mb, nb, ldc);
      if (beta == 0.0f)
        C.setZero();
      else if (beta != 1.0f)
        C *= beta;
      for (i64 k0 = 0; k0 < k; k0 += kFk) {
        const i64 kb = std::min(kFk, k - k0);
        const CMatMap A =
            ta ? cmat(a + k0 * lda + i0, kb, mb, lda) : cmat(a + i0 * lda + k0, mb, kb, lda);
        const CMatMap B =
            tb ? cmat(b + j0 * ldb + k0, nb, kb, ldb) : cmat(b + k0 * ldb + j0, kb, nb, ldb);
        if (!ta && !tb)
          C.noalias() += alpha * A * B;
        else if (ta && !tb)
          C.noalias() += alpha * A.transpose() * B;
        else if (!ta && tb)
          C.noalias() += alpha * A * B.transpose();
        else
          C.noalias() += alpha * A.transpose() * B.transpose();
      }
    }
  }
}

// Any storage types: op(A) and op(B) are staged block by block as fp32 on the
// stack and multiplied by Eigen; the C block accumulates over all of k in fp32
// and is rounded once when stored.
constexpr i64 kGm = 64, kGn = 64, kGk = 128;

void gemm_staged(bool ta, bool tb, i64 m, i64 n, i64 k, float alpha, CRef a, i64 lda, CRef b,
                 i64 ldb, float beta, Ref c, i64 ldc) {
  alignas(64) float ab[kGm * kGk], bb[kGk * kGn], cb[kGm * kGn];
  for (i64 i0 = 0; i0 < m; i0 += kGm) {
    const i64 mb = std::min(kGm, m - i0);
    for (i64 j0 = 0; j0 < n; j0 += kGn) {
      const i64 nb = std::min(kGn, n - j0);
      MatMap C = mat(cb, mb, nb, kGn);
      C.setZero();
      for (i64 k0 = 0; k0 < k; k0 += kGk) {
        const i64 kb = std::min(kGk, k - k0);
        load_block(a, lda, ta, i0, k0, mb, kb, ab, kGk);
        load_block(b, ldb, tb, k0, j0, kb, nb, bb, kGn);
        C.noalias() += cmat(ab, mb, kb, kGk) * cmat(bb, kb, nb, kGn);
      }
      store_block(cb, kGn, alpha, beta, c, ldc, i0, j0, mb, nb);
    }
  }
}

}  // namespace

void CpuDevice::gemm(bool trans_a, bool trans_b, i64 m, i64 n, i64 k, float alpha, CRef a, i64 lda,
                     CRef b, i64 ldb, float beta, Ref c, i64 ldc) {
  if (m <= 0 || n <= 0) return;
  if (is_f32(a) && is_f32(b) && is_f32(c))
    gemm_f32(trans_a, trans_b, m, n, k, alpha, a.f32(), lda, b.f32(), ldb, beta, c.f32(), ldc);
  else
    gemm_staged(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// ---------------------------------------------------------------- normalisation

namespace {

struct RowStats {
  double mean = 0;  // 0 for RMSNorm
  double rstd = 0;  // 1 / sqrt(var + eps), var biased; RMSNorm: 1 / sqrt(mean(x^2) + eps)
};

RowStats row_stats(NormKind kind, CRef x, i64 row0, i64 cols, float eps) {
  float xs[kChunk];
  RowStats st;
  if (kind == NormKind::kLayerNorm) {
    double sum = 0;
    chunked(cols, [&](i64 o, i64 len) {
      load(x, row0 + o, len, xs);
      for (i64 i = 0; i < len; ++i) sum += xs[i];
    });
    st.mean = sum / double(cols);
  }
  double sq = 0;  // centred second moment (two passes: no cancellation)
  chunked(cols, [&](i64 o, i64 len) {
    load(x, row0 + o, len, xs);
    for (i64 i = 0; i < len; ++i) {
      const double c = xs[i] - st.mean;
      sq += c * c;
    }
  });
  st.rstd = 1.0 / std::sqrt(sq / double(cols) + double(eps));
  return st;
}

// dgamma/dbeta sums stay on the stack for a window of this many columns, so
// they are rounded once into their storage; rows wider than this redo the row
// statistics once per window.
constexpr i64 kNormWindow = 2048;

}  // namespace

void CpuDevice::norm_forward(NormKind kind, CRef x, CRef gamma, CRef beta, Ref y, i64 rows,
                             i64 cols, float eps) {
  const bool has_beta = kind == NormKind::kLayerNorm && beta;
  float xs[kChunk], gs[kChunk], bs[kChunk];
  for (i64 r = 0; r < rows; ++r) {
    const RowStats st = row_stats(kind, x, r * cols, cols, eps);
    const float mean = float(st.mean), rstd = float(st.rstd);
    chunked(cols, [&](i64 o, i64 len) {
      load(x, r * cols + o, len, xs);
      load(gamma, o, len, gs);
      if (has_beta) load(beta, o, len, bs);
      for (i64 i = 0; i < len; ++i)
        xs[i] = (xs[i] - mean) * rstd * gs[i] + (has_beta ? bs[i] : 0.0f);
      store(xs, y, r * cols + o, len);
    });
  }
}

// xhat = (x - mean) rstd, g = dy gamma: dx = rstd (g - mean(g) - xhat mean(g xhat))
// (LayerNorm) or rstd (g - xhat mean(g xhat)) (RMSNorm); dgamma += dy xhat,
// dbeta += dy.
void CpuDevice::norm_backward(NormKind kind, CRef x, CRef gamma, CRef dy, Ref dx, bool accumulate,
                              Ref dgamma, Ref dbeta, i64 rows, i64 cols, float eps) {
  // Rows wider than one window re-read x and dy after dx is written.
  require(cols <= kNormWindow || (dx.data != dy.data && dx.data != x.data),
          "norm_backward: dx may alias x or dy only for rows of at most 2048");
  const bool ln = kind == NormKind::kLayerNorm;
  const bool has_dbeta = ln && dbeta;
  float xs[kChunk], gs[kChunk], ds[kChunk], os[kChunk];
  double dg[kNormWindow], db[kNormWindow];
  for (i64 w0 = 0; w0 < cols; w0 += kNormWindow) {
    const i64 wn = std::min(kNormWindow, cols - w0);
    std::fill(dg, dg + wn, 0.0);
    std::fill(db, db + wn, 0.0);
    for (i64 r = 0; r < rows; ++r) {
      const i64 row0 = r * cols;
      const RowStats st = row_stats(kind, x, row0, cols, eps);
      double sum_g = 0, sum_gxhat = 0;
      chunked(cols, [&](i64 o, i64 len) {
        load(x, row0 + o, len, xs);
        load(gamma, o, len, gs);
        load(dy, row0 + o, len, ds);
        for (i64 i = 0; i < len; ++i) {
          const double g = double(ds[i]) * gs[i];
          sum_g += g;
          sum_gxhat += g * (xs[i] - st.mean) * st.rstd;
        }
      });
      const float mean = float(st.mean), rstd = float(st.rstd);
      const float mg = ln ? float(sum_g / double(cols)) : 0.0f;
      const float mgx = float(sum_gxhat / double(cols));
      for (i64 o = 0; o < wn; o += kChunk) {
        const i64 len = std::min(kChunk, wn - o), c0 = w0 + o;
        load(x, row0 + c0, len, xs);
        load(gamma, c0, len, gs);
        load(dy, row0 + c0, len, ds);
        if (accumulate) load(dx, row0 + c0, len, os);
        for (i64 i = 0; i < len; ++i) {
          const float xhat = (xs[i] - mean) * rstd;
          const float v = rstd * (ds[i] * gs[i] - mg - xhat * mgx);
          os[i] = accumulate ? os[i] + v : v;
          dg[o + i] += double(ds[i]) * xhat;
          db[o + i] += ds[i];
        }
        store(os, dx, row0 + c0, len);
      }
    }
    for (i64 o = 0; o < wn; o += kChunk) {
      const i64 len = std::min(kChunk, wn - o);
      load(dgamma, w0 + o, len, os);
      for (i64 i = 0; i < len; ++i) os[i] = float(os[i] + dg[o + i]);
      store(os, dgamma, w0 + o, len);
      if (!has_dbeta) continue;
      load(dbeta, w0 + o, len, os);
      for (i64 i = 0; i < len; ++i) os[i] = float(os[i] + db[o + i]);
      store(os, dbeta, w0 + o, len);
    }
  }
}

// ---------------------------------------------------------------- RoPE

void CpuDevice::rope(Ref x, i64 ld, i64 col0, i64 heads, i64 d, i64 s, i64 b, float theta,
                     bool inverse) {
  require(d % 2 == 0 && d <= kMaxHeadDim, "rope: head width must be even and at most 1024");
  const i64 half = d / 2;
  double inv_freq[kMaxHeadDim / 2];
  for (i64 e = 0; e < half; ++e)
    inv_freq[e] = std::pow(double(theta), -2.0 * double(e) / double(d));
  float cs[kMaxHeadDim / 2], sn[kMaxHeadDim / 2], buf[kMaxHeadDim];
  for (i64 i = 0; i < s; ++i) {
    // Angles in double: positions reach thousands, fp32 angles would be off by ~1e-4 rad.
    for (i64 e = 0; e < half; ++e) {
      const double ang = double(i) * inv_freq[e];
      cs[e] = float(std::cos(ang));
      sn[e] = float(inverse ? -std::sin(ang) : std::sin(ang));
    }
    for (i64 bi = 0; bi < b; ++bi) {
      const i64 row = i * b + bi;
      for (i64 h = 0; h < heads; ++h) {
        const i64 off = row * ld + col0 + h * d;
        load(x, off, d, buf);
        for (i64 e = 0; e < half; ++e) {
          const float x1 = buf[e], x2 = buf[e + half];
          buf[e] = x1 * cs[e] - x2 * sn[e];
          buf[e + half] = x1 * sn[e] + x2 * cs[e];
        }
        store(buf, x, off, d);
      }
    }
  }
}

// ---------------------------------------------------------------- dropout

void CpuDevice::dropout_forward(CRef x, Ref y, std::uint8_t* mask, i64 rows, i64 cols, float p,
                                const DropoutKey& key) {
  const float keep_scale = 1.0f / (1.0f - p);
  float xs[kChunk];
  for (i64 r = 0; r < rows; ++r) {
    chunked(cols, [&](i64 o, i64 len) {
      const i64 at = r * cols + o;
      load(x, at, len, xs);
      for (i64 i = 0; i < len; ++i) {
        const bool keep = hash_uniform(key.seed, key.row_key0 + r, key.col0 + o + i) >= double(p);
        mask[at + i] = keep ? 1 : 0;
        xs[i] = keep ? xs[i] * keep_scale : 0.0f;
      }
      store(xs, y, at, len);
    });
  }
}

void CpuDevice::dropout_backward(CRef dy, const std::uint8_t* mask, Ref dx, i64 n, float p) {
  const float keep_scale = 1.0f / (1.0f - p);
  float xs[kChunk];
  chunked(n, [&](i64 o, i64 len) {
    load(dy, o, len, xs);
    for (i64 i = 0; i < len; ++i) xs[i] = mask[o + i] ? xs[i] * keep_scale : 0.0f;
    store(xs, dx, o, len);
  });
}

// ---------------------------------------------------------------- activations

namespace {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// 0.5 x (1 + tanh z) = x sigmoid(2z), z = c (x + a x^3): the same function,
// without tanh's cost or cancellation in 1 + tanh z for negative x.
inline float gelu(float x) { return x * sigmoid(2.0f * kGeluC * (x + kGeluA * x * x * x)); }
// d/dx of 0.5 x (1 + tanh z) = 0.5 (1 + t) + 0.5 x (1 - t^2) z', with
// 1 + t = 2 sg and 1 - t^2 = 4 sg (1 - sg), sg = sigmoid(2z).
inline float gelu_grad(float x) {
  const float sg = sigmoid(2.0f * kGeluC * (x + kGeluA * x * x * x));
  return sg + 2.0f * x * sg * (1.0f - sg) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
}

}  // namespace

void CpuDevice::act_forward(ActKind kind, CRef u, Ref g, i64 rows, i64 f) {
  float a[kChunk], up[kChunk];
  if (kind == ActKind::kGelu) {
    chunked(rows * f, [&](i64 o, i64 len) {
      load(u, o, len, a);
      for (i64 i = 0; i < len; ++i) a[i] = gelu(a[i]);
      store(a, g, o, len);
    });
    return;
  }
  for (i64 r = 0; r < rows; ++r) {
    chunked(f, [&](i64 o, i64 len) {
      load(u, r * 2 * f + o, len, a);
      load(u, r * 2 * f + f + o, len, up);
      for (i64 i = 0; i < len; ++i) a[i] = a[i] * sigmoid(a[i]) * up[i];
      store(a, g, r * f + o, len);
    });
  }
}

void CpuDevice::act_backward(ActKind kind, CRef u, CRef dg, Ref du, i64 rows, i64 f) {
  float a[kChunk], up[kChunk], d[kChunk];
  if (kind == ActKind::kGelu) {
    chunked(rows * f, [&](i64 o, i64 len) {
      load(u, o, len, a);
      load(dg, o, len, d);
      for (i64 i = 0; i < len; ++i) a[i] = d[i] * gelu_grad(a[i]);
      store(a, du, o, len);
    });
    return;
  }
  // g = silu(a) up: da = dg up sigma(a) (1 + a (1 - sigma(a))), dup = dg silu(a).
  for (i64 r = 0; r < rows; ++r) {
    chunked(f, [&](i64 o, i64 len) {
      const i64 ga = r * 2 * f + o, ua = ga + f;
      load(u, ga, len, a);
      load(u, ua, len, up);
      load(dg, r * f + o, len, d);
      for (i64 i = 0; i < len; ++i) {
        const float sg = sigmoid(a[i]);
        const float da = d[i] * up[i] * sg * (1.0f + a[i] * (1.0f - sg));
        up[i] = d[i] * a[i] * sg;
        a[i] = da;
      }
      store(a, du, ga, len);
      store(up, du, ua, len);
    });
  }
}

// ---------------------------------------------------------------- embedding

void CpuDevice::embedding_forward(const std::int32_t* ids, i64 rows, CRef table, i64 v0, i64 vrows,
                                  i64 h, Ref out, bool accumulate) {
  float ts[kChunk], os[kChunk];
  for (i64 r = 0; r < rows; ++r) {
    const i64 local = i64(ids[r]) - v0;
    const bool mine = local >= 0 && local < vrows;
    if (!mine) {
      if (!accumulate) zero(out, r * h, h);
      continue;
    }
    chunked(h, [&](i64 o, i64 len) {
      load(table, local * h + o, len, ts);
      if (accumulate) {
        load(out, r * h + o, len, os);
        for (i64 i = 0; i < len; ++i) ts[i] += os[i];
      }
      store(ts, out, r * h + o, len);
    });
  }
}

void CpuDevice::embedding_backward(const std::int32_t* ids, i64 rows, CRef dout, i64 v0, i64 vrows,
                                   i64 h, Ref dtable) {
  auto mine = [&](i64 r) { return ids[r] >= v0 && ids[r] < v0 + vrows; };
  if (is_f32(dtable)) {
    for (i64 r = 0; r < rows; ++r)
      if (mine(r)) CpuDevice::axpy(1.0f, dout.at(r * h), dtable.at((ids[r] - v0) * h), h);
    return;
  }
  // bf16 table: every row with the same id is summed in fp32 at the id's first
  // occurrence, so the table row is rounded once (no workspace for a sort). A
  // clear bit in `seen` (a 65536-bit filter of handled ids) proves a first
  // occurrence without scanning the rows before.
  constexpr i64 kWindow = 2048;
  float acc[kWindow], ds[kWindow];
  std::uint64_t seen[1024] = {};
  for (i64 r = 0; r < rows; ++r) {
    if (!mine(r)) continue;
    const std::uint32_t bit = (std::uint32_t(ids[r]) * 2654435761u) >> 16;
    if ((seen[bit >> 6] >> (bit & 63)) & 1u) {
      if (std::find(ids, ids + r, ids[r]) != ids + r) continue;
    }
    seen[bit >> 6] |= std::uint64_t(1) << (bit & 63);
    const i64 row = (ids[r] - v0) * h;
    for (i64 w0 = 0; w0 < h; w0 += kWindow) {
      const i64 len = std::min(kWindow, h - w0);
      load(dtable, row + w0, len, acc);
      for (i64 q = r; q < rows; ++q) {
        if (ids[q] != ids[r]) continue;
        load(dout, q * h + w0, len, ds);
        for (i64 i = 0; i < len; ++i) acc[i] += ds[i];
      }
      store(acc, dtable, row + w0, len);
    }
  }
}

// ---------------------------------------------------------------- cross-entropy

namespace {
// Columns [0, valid_cols) of a shard hold real vocabulary ids.
inline i64 valid_cols(i64 vl, i64 v0, i64 vocab) { return std::clamp(vocab - v0, i64(0), vl); }
}  // namespace

void CpuDevice::ce_row_max(CRef logits, i64 rows, i64 vl, i64 v0, i64 vocab, float* row_max) {
  const i64 nv = valid_cols(vl, v0, vocab);
  float xs[kChunk];
  for (i64 r = 0; r < rows; ++r) {
    float m = -std::numeric_limits<float>::infinity();
    chunked(nv, [&](i64 o, i64 len) {
      load(logits, r * vl + o, len, xs);
      for (i64 i = 0; i < len; ++i) m = std::max(m, xs[i]);
    });
    row_max[r] = m;
  }
}

void CpuDevice::ce_exp_sum(CRef logits, const float* row_max, const std::int32_t* targets, i64 rows,
                           i64 vl, i64 v0, i64 vocab, float* softmax, float* row_sum,
                           float* target_logit) {
  const i64 nv = valid_cols(vl, v0, vocab);
  for (i64 r = 0; r < rows; ++r) {
    float* sm = softmax + r * vl;
    load(logits, r * vl, nv, sm);
    double sum = 0;
    for (i64 c = 0; c < nv; ++c) {
      sm[c] = std::exp(sm[c] - row_max[r]);
      sum += sm[c];
    }
    std::fill(sm + nv, sm + vl, 0.0f);
    row_sum[r] = float(sum);
    const i64 t = i64(targets[r]) - v0;
    target_logit[r] = (t >= 0 && t < nv) ? get(logits, r * vl + t) - row_max[r] : 0.0f;
  }
}

void CpuDevice::ce_finish(float* softmax, const float* row_sum, const float* target_logit, i64 rows,
                          i64 vl, float* loss) {
  for (i64 r = 0; r < rows; ++r) {
    loss[r] = float(std::log(double(row_sum[r])) - double(target_logit[r]));
    float* sm = softmax + r * vl;
    for (i64 c = 0; c < vl; ++c) sm[c] /= row_sum[r];
  }
}

void CpuDevice::ce_backward(float* softmax, const std::int32_t* targets, i64 rows, i64 vl, i64 v0,
                            float grad_scale) {
  for (i64 r = 0; r < rows; ++r) {
    float* sm = softmax + r * vl;
    const i64 t = i64(targets[r]) - v0;
    if (t >= 0 && t < vl) sm[t] -= 1.0f;
    for (i64 c = 0; c < vl; ++c) sm[c] *= grad_scale;
  }
}

// ---------------------------------------------------------------- optimizer

void CpuDevice::adam(float* master, float* m, float* v, CRef grad, Ref param, i64 n, float lr,
                     float beta1, float beta2, float eps, int step, float grad_scale) {
  const float bc1 = float(1.0 - std::pow(double(beta1), step));
  const float bc2 = float(1.0 - std::pow(double(beta2), step));
  float gs[kChunk];
  chunked(n, [&](i64 o, i64 len) {
    load(grad, o, len, gs);
    for (i64 i = 0; i < len; ++i) {
      const i64 j = o + i;
      const float g = gs[i] * grad_scale;
      m[j] = beta1 * m[j] + (1.0f - beta1) * g;
      v[j] = beta2 * v[j] + (1.0f - beta2) * g * g;
      master[j] -= lr * (m[j] / bc1) / (std::sqrt(v[j] / bc2) + eps);
    }
    if (param) store(master + o, param, o, len);
  });
}

// ---------------------------------------------------------------- checks

void CpuDevice::checksums(CRef x, i64 n, std::uint64_t seed, i64 i0, double* sum_sq,
                          double* sum_w) {
  float xs[kChunk];
  double sq = 0, w = 0;
  chunked(n, [&](i64 o, i64 len) {
    load(x, o, len, xs);
    for (i64 i = 0; i < len; ++i) {
      sq += double(xs[i]) * xs[i];
      w += double(xs[i]) * (hash_uniform(seed, 0, i0 + o + i) - 0.5);
    }
  });
  *sum_sq = sq;
  *sum_w = w;
}

}  // namespace paraplan::validate
