// CPU kernels other than attention (validate/cpu/cpu_device.cpp): values worked
// out by hand, central differences of each forward pass for every backward,
// and consistency (Eigen vs staged GEMM, sharded vs whole, bf16 vs fp32).
// Attention: test_attention_kernels.cpp.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <vector>

#include "kernel_test_util.hpp"

using namespace paraplan::kernel_test;

// ================================================================ basics

TEST_CASE("hash: deterministic, uniform in 0..1, row and column not interchangeable",
          "[kernels]") {
  CHECK(hash_mix(1, 2, 3) == hash_mix(1, 2, 3));
  CHECK(hash_mix(1, 2, 3) != hash_mix(1, 3, 2));
  CHECK(hash_mix(1, 2, 3) != hash_mix(2, 2, 3));
  CHECK(hash_mix(1, 3, 2) != hash_mix(1, 2, 3));
  CHECK(hash_mix(1, 0, 1) != hash_mix(1, 1, 0));
  double lo = 1, hi = 0, mean = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double u = hash_uniform(5, i / 100, i % 100);
    lo = std::min(lo, u), hi = std::max(hi, u), mean += u / n;
  }
  CHECK(lo >= 0.0);
  CHECK(hi < 1.0);
  CHECK(mean == Approx(0.5).margin(0.01));  // sd of the mean: 0.29 / sqrt(2e4) = 0.002
}

TEST_CASE("bf16: round to nearest, ties to even", "[kernels]") {
  // 1 + 2^-8 lies halfway between 1 (0x3f80, even) and 1 + 2^-7 (0x3f81).
  CHECK(to_bf16(1.0f).bits == 0x3f80);
  CHECK(to_bf16(1.0f + 0x1p-8f).bits == 0x3f80);
  CHECK(to_bf16(1.0f + 3 * 0x1p-8f).bits == 0x3f82);         // halfway 0x3f81 / 0x3f82: even
  CHECK(to_bf16(1.0f + 0x1p-8f + 0x1p-20f).bits == 0x3f81);  // past halfway: up
  CHECK(to_bf16(-2.0f).bits == 0xc000);
  CHECK(to_float(to_bf16(0.99f)) == 0.98828125f);  // 253 * 2^-8, the nearest below 1
  CHECK(std::isnan(to_float(to_bf16(std::nanf("")))));
  // The device converts the same way.
  Vec x = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0.99f};
  B16 y(3);
  dev().copy(x.data(), y.data(), 3);
  CHECK(y[0].bits == 0x3f80);
  CHECK(y[1].bits == 0x3f82);
  CHECK(to_float(y[2]) == 0.98828125f);
}

TEST_CASE("data movement: copy, fill, host transfers and copy_2d convert types", "[kernels]") {
  Vec a = {1.5f, -2.0f, 3.25f, 1000.0f};
  B16 b(4);
  Vec c(4);
  dev().copy(a.data(), b.data(), 4);
  dev().copy(b.data(), c.data(), 4);
  CHECK(c == a);  // all representable in bf16
  dev().fill(b.data(), 4, 0.5f);
  dev().to_host(b.data(), c.data(), 4);
  CHECK(c == Vec{0.5f, 0.5f, 0.5f, 0.5f});
  dev().from_host(a.data(), b.data(), 4);
  CHECK(to_f32(b) == a);
  // A 2 x 2 block out of a 3-wide source into a 4-wide destination.
  Vec src = {1, 2, 3, 4, 5, 6}, dst(8, -1.0f);
  dev().copy_2d(src.data(), 3, dst.data(), 4, 2, 2);
  CHECK(dst == Vec{1, 2, -1, -1, 4, 5, -1, -1});
}

TEST_CASE("elementwise: add, axpy, scale, add_bias, bias_backward", "[kernels]") {
  Vec a = {1, 2, 3}, b = {10, 20, 30};
  dev().add(a.data(), b.data(), a.data(), 3);  // out aliases a
  CHECK(a == Vec{11, 22, 33});
  dev().axpy(2.0f, b.data(), a.data(), 3);
  CHECK(a == Vec{31, 62, 93});
  dev().scale(a.data(), 3, 0.5f);
  CHECK(a == Vec{15.5f, 31, 46.5f});
  Vec y = {1, 2, 3, 4, 5, 6}, bias = {10, 100, 1000};
  dev().add_bias(y.data(), bias.data(), 2, 3);
  CHECK(y == Vec{11, 102, 1003, 14, 105, 1006});
  Vec db = {1, 1, 1};
  dev().bias_backward(y.data(), db.data(), 2, 3);
  CHECK(db == Vec{26, 208, 2010});
  B16 dbh = to_b16({1, 1, 1});
  dev().bias_backward(y.data(), dbh.data(), 2, 3);
  CHECK(to_f32(dbh) == Vec{26, 208, 2008});  // 2010 rounds to 2008 in bf16 (spacing 8)
}

// ================================================================ GEMM

TEST_CASE("gemm: 2x3 times 3x2 by hand, every transpose, beta 0 and 1, strided", "[kernels]") {
  // A = [1 2 3; 4 5 6], B = [7 8; 9 10; 11 12]: AB = [58 64; 139 154].
  Vec A = {1, 2, 3, 4, 5, 6}, At = {1, 4, 2, 5, 3, 6};
  Vec B = {7, 8, 9, 10, 11, 12}, Bt = {7, 9, 11, 8, 10, 12};
  const Vec AB = {58, 64, 139, 154};
  for (bool bf : {false, true}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      INFO("bf16 " << bf << " trans_a " << ta << " trans_b " << tb);
      Vec a = ta ? At : A, b = tb ? Bt : B;
      B16 ah = to_b16(a), bh = to_b16(b);
      const Ref ra = bf ? Ref(ah.data()) : Ref(a.data()), rb = bf ? Ref(bh.data()) : Ref(b.data());
      Vec c(4, std::nanf(""));  // beta 0 must not read C
      dev().gemm(ta, tb, 2, 2, 3, 1.0f, ra, ta ? 2 : 3, rb, tb ? 3 : 2, 0.0f, c.data(), 2);
      CHECK(c == AB);
      Vec acc = {1, 2, 3, 4};
      dev().gemm(ta, tb, 2, 2, 3, 0.5f, ra, ta ? 2 : 3, rb, tb ? 3 : 2, 1.0f, acc.data(), 2);
      CHECK(acc == Vec{30, 34, 72.5f, 81});
      B16 ch = to_b16({1, 2, 3, 4});
      dev().gemm(ta, tb, 2, 2, 3, 0.5f, ra, ta ? 2 : 3, rb, tb ? 3 : 2, 1.0f, ch.data(), 2);
      CHECK(to_f32(ch) == Vec{30, 34, 72.5f, 81});
    }
    // k = 0: C = beta C.
    Vec c0 = {1, 2, 3, 4};
    dev().gemm(false, false, 2, 2, 0, 1.0f, A.data(), 3, B.data(), 2, 1.0f, c0.data(), 2);
    CHECK(c0 == Vec{1, 2, 3, 4});
    dev().gemm(false, false, 2, 2, 0, 1.0f, A.data(), 3, B.data(), 2, 0.0f, c0.data(), 2);
    CHECK(c0 == Vec{0, 0, 0, 0});
    // lda = 5 (two junk columns), ldc = 4 (two pad columns left alone).
    Vec a = {1, 2, 3, 1e3f, 1e3f, 4, 5, 6, 1e3f, 1e3f}, c(8, -7.0f);
    B16 ah = to_b16(a), bh = to_b16(B);
    const Ref ra = bf ? Ref(ah.data()) : Ref(a.data()), rb = bf ? Ref(bh.data()) : Ref(B.data());
    dev().gemm(false, false, 2, 2, 3, 1.0f, ra, 5, rb, 2, 0.0f, c.data(), 4);
    CHECK(c == Vec{58, 64, -7, -7, 139, 154, -7, -7});
  }
}

TEST_CASE("gemm: Eigen fp32 path equals the staged path and a double reference", "[kernels]") {
  // Sizes spanning several 64 x 64 x 128 staging blocks; bf16-exact inputs so the
  // staged path (A stored as bf16) sees the same numbers.
  const i64 m = 70, n = 130, k = 300;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    INFO("trans_a " << ta << " trans_b " << tb);
    const i64 lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
    Vec a = bf16_exact(random_vec((ta ? k : m) * lda, 1)),
        b = bf16_exact(random_vec((tb ? n : k) * ldb, 2));
    auto A = [&](i64 i, i64 l) {
      return double(ta ? a[std::size_t(l * lda + i)] : a[std::size_t(i * lda + l)]);
    };
    auto B = [&](i64 l, i64 j) {
      return double(tb ? b[std::size_t(j * ldb + l)] : b[std::size_t(l * ldb + j)]);
    };
    Vec ref(std::size_t(m * ldc), 0.0f), c0 = random_vec(m * ldc, 3);
    for (i64 i = 0; i < m; ++i)
      for (i64 j = 0; j < n; ++j) {
        double s = 0;
        for (i64 l = 0; l < k; ++l) s += A(i, l) * B(l, j);
        ref[std::size_t(i * ldc + j)] = float(c0[std::size_t(i * ldc + j)] + 1.5 * s);
      }
    Vec fast = c0, staged = c0;
    B16 ah = to_b16(a);
    dev().gemm(ta, tb, m, n, k, 1.5f, a.data(), lda, b.data(), ldb, 1.0f, fast.data(), ldc);
    dev().gemm(ta, tb, m, n, k, 1.5f, ah.data(), lda, b.data(), ldb, 1.0f, staged.data(), ldc);
    for (i64 i = 0; i < m; ++i)  // pad columns of C untouched
      for (i64 j = n; j < ldc; ++j) ref[std::size_t(i * ldc + j)] = c0[std::size_t(i * ldc + j)];
    CHECK(rel_err(fast, ref) < 1e-6);
    CHECK(rel_err(staged, ref) < 1e-6);
    CHECK(rel_err(staged, fast) < 1e-6);
    // All-bf16 storage (C rounded once) within 1e-2.
    B16 bh = to_b16(b), ch(std::size_t(m * ldc));
    dev().gemm(ta, tb, m, n, k, 1.5f, ah.data(), lda, bh.data(), ldb, 0.0f, ch.data(), ldc);
    Vec cb = to_f32(ch), cf(std::size_t(m * ldc), 0.0f);
    dev().gemm(ta, tb, m, n, k, 1.5f, a.data(), lda, b.data(), ldb, 0.0f, cf.data(), ldc);
    CHECK(rel_err(cb, cf) < 1e-2);
  }
}

// ================================================================ normalisation

TEST_CASE("norm: LayerNorm and RMSNorm of a short row by hand", "[kernels]") {
  // x = [1 2 3 4]: mean 2.5, biased var 1.25; eps 0.75 makes var + eps = 2.
  Vec x = {1, 2, 3, 4}, gamma = {1, 2, 1, 1}, beta = {0, 0, 1, 0}, y(4);
  dev().norm_forward(NormKind::kLayerNorm, x.data(), gamma.data(), beta.data(), y.data(), 1, 4,
                     0.75f);
  const double r = 1 / std::sqrt(2.0);
  const double ln[] = {-1.5 * r, -0.5 * 2 * r, 0.5 * r + 1, 1.5 * r};
  for (int i = 0; i < 4; ++i) CHECK(y[i] == Approx(ln[i]).epsilon(1e-6));
  // RMSNorm: mean(x^2) = 7.5, eps 0.5: rstd = 1 / sqrt(8); beta ignored.
  Vec g2 = {1, 1, 2, 1};
  dev().norm_forward(NormKind::kRmsNorm, x.data(), g2.data(), beta.data(), y.data(), 1, 4, 0.5f);
  const double rs = 1 / std::sqrt(8.0);
  const double rms[] = {rs, 2 * rs, 6 * rs, 4 * rs};
  for (int i = 0; i < 4; ++i) CHECK(y[i] == Approx(rms[i]).epsilon(1e-6));
}

TEST_CASE("norm: backward matches finite differences (dx, dgamma, dbeta, accumulate)",
          "[kernels]") {
  const i64 rows = 3, cols = 7;
  for (NormKind kind : {NormKind::kLayerNorm, NormKind::kRmsNorm}) {
    const bool ln = kind == NormKind::kLayerNorm;
    INFO((ln ? "LayerNorm" : "RMSNorm"));
    Vec x = random_vec(rows * cols, 11), gamma = random_vec(cols, 12, 0.5f, 1.5f);
    Vec beta = random_vec(cols, 13), w = random_vec(rows * cols, 14);
    auto loss = [&] {
      Vec y(std::size_t(rows * cols));
      dev().norm_forward(kind, x.data(), gamma.data(), beta.data(), y.data(), rows, cols, 1e-5f);
      return wsum(y, w);
    };
    Vec dx(std::size_t(rows * cols), 1.0f), dg(std::size_t(cols), 0.25f),
        db(std::size_t(cols), 0.5f);
    dev().norm_backward(kind, x.data(), gamma.data(), w.data(), dx.data(), true, dg.data(),
                        db.data(), rows, cols, 1e-5f);
    for (auto& v : dx) v -= 1.0f;  // accumulate = true added to 1
    for (auto& v : dg) v -= 0.25f;
    check_grad("dx", x, dx, loss, 5e-3);
    check_grad("dgamma", gamma, dg, loss, 5e-3);
    if (ln) {
      for (auto& v : db) v -= 0.5f;
      check_grad("dbeta", beta, db, loss, 5e-3);
    } else {
      CHECK(db == Vec(std::size_t(cols), 0.5f));  // RMSNorm leaves dbeta alone
    }
    Vec dx2(std::size_t(rows * cols), 123.0f), dg2(std::size_t(cols), 0.0f),
        db2(std::size_t(cols), 0.0f);
    dev().norm_backward(kind, x.data(), gamma.data(), w.data(), dx2.data(), false, dg2.data(),
                        db2.data(), rows, cols, 1e-5f);
    CHECK(rel_err(dx2, dx) < 1e-6);  // accumulate = false overwrites
  }
}

TEST_CASE("norm: rows wider than one dgamma window (4100 columns)", "[kernels]") {
  const i64 rows = 2, cols = 4100;
  Vec x = random_vec(rows * cols, 15), gamma = random_vec(cols, 16, 0.5f, 1.5f),
      beta = random_vec(cols, 17);
  Vec w = random_vec(rows * cols, 18);
  Vec dx(x.size()), dg(std::size_t(cols), 0.0f), db(std::size_t(cols), 0.0f);
  dev().norm_backward(NormKind::kLayerNorm, x.data(), gamma.data(), w.data(), dx.data(), false,
                      dg.data(), db.data(), rows, cols, 1e-5f);
  auto loss = [&] {
    Vec y(x.size());
    dev().norm_forward(NormKind::kLayerNorm, x.data(), gamma.data(), beta.data(), y.data(), rows,
                       cols, 1e-5f);
    return wsum(y, w);
  };
  check_grad("dx", x, dx, loss, 1e-2, 2e-3, 97);
  check_grad("dgamma", gamma, dg, loss, 1e-2, 2e-3, 97);
  bool dbeta_ok = true;  // dbeta = column sums of dy
  for (i64 c = 0; c < cols; ++c)
    dbeta_ok = dbeta_ok &&
               db[std::size_t(c)] == Approx(double(w[std::size_t(c)]) + w[std::size_t(cols + c)]);
  CHECK(dbeta_ok);
}

TEST_CASE("bf16 gradients are rounded once per call (bias, embedding, norm)", "[kernels]") {
  // 256 + 1 is a tie in bf16 (spacing 2 above 256) that rounds back to 256: eight
  // additions of 1 rounded one by one leave 256; summed first they give 264.
  Vec ones(16, 1.0f);
  B16 db = to_b16({256});
  dev().bias_backward(ones.data(), db.data(), 8, 1);
  CHECK(to_float(db[0]) == 264.0f);
  const std::vector<std::int32_t> ids(8, 5);
  B16 dt = to_b16({256, 256});
  dev().embedding_backward(ids.data(), 8, ones.data(), 5, 1, 2, dt.data());
  CHECK(to_f32(dt) == Vec{264, 264});
  // LayerNorm rows [1, -1], eps 0: mean 0, var 1, xhat = [1, -1]; dgamma += dy xhat.
  Vec x, gamma = {1, 1}, dx(16);
  for (int r = 0; r < 8; ++r) x.push_back(1.0f), x.push_back(-1.0f);
  B16 dg = to_b16({256, 256});
  dev().norm_backward(NormKind::kLayerNorm, x.data(), gamma.data(), ones.data(), dx.data(), false,
                      dg.data(), Ref(), 8, 2, 0.0f);
  CHECK(to_f32(dg) == Vec{264, 248});
}

// ================================================================ activations

TEST_CASE("act: GeLU (tanh form) and SwiGLU by hand", "[kernels]") {
  // 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))); gelu(-x) = gelu(x) - x.
  Vec u = {0, 1, -1}, g(3);
  dev().act_forward(ActKind::kGelu, u.data(), g.data(), 1, 3);
  CHECK(g[0] == 0.0f);
  CHECK(g[1] == Approx(0.8411919906).epsilon(1e-6));
  CHECK(g[2] == Approx(-0.1588080094).epsilon(1e-6));
  // [gate | up] = [1 0 -2 | 2 5 1]: silu(1) 2, silu(0) 5, silu(-2) 1; silu(a) = a / (1 + e^-a).
  Vec s = {1, 0, -2, 2, 5, 1}, o(3);
  dev().act_forward(ActKind::kSwiglu, s.data(), o.data(), 1, 3);
  CHECK(o[0] == Approx(2 / (1 + std::exp(-1.0))).epsilon(1e-6));  // 1.4621171573
  CHECK(o[1] == 0.0f);
  CHECK(o[2] == Approx(-2 / (1 + std::exp(2.0))).epsilon(1e-6));  // -0.2384058440
}

TEST_CASE("act: backward matches finite differences", "[kernels]") {
  const i64 rows = 3, f = 5;
  for (ActKind kind : {ActKind::kGelu, ActKind::kSwiglu}) {
    const bool glu = kind == ActKind::kSwiglu;
    INFO((glu ? "SwiGLU" : "GeLU"));
    Vec u = random_vec(rows * f * (glu ? 2 : 1), 21, -3, 3), w = random_vec(rows * f, 22);
    auto loss = [&] {
      Vec g(std::size_t(rows * f));
      dev().act_forward(kind, u.data(), g.data(), rows, f);
      return wsum(g, w);
    };
    Vec du(u.size(), 99.0f);
    dev().act_backward(kind, u.data(), w.data(), du.data(), rows, f);
    check_grad("du", u, du, loss, 1e-2);
  }
}

// ================================================================ RoPE

TEST_CASE("rope: 90-degree rotation by hand, inverse undoes forward, backward by FD", "[kernels]") {
  // d = 4, theta = 4 / pi^2: pair (0, 2) turns by pos rad, pair (1, 3) by
  // pos * theta^(-1/2) = pos * pi / 2. b = 2: rows 2, 3 are position 1.
  // Columns 1..4 of a 6-wide buffer hold the head.
  const float theta = float(4 / (std::numbers::pi * std::numbers::pi));
  Vec x(4 * 6);
  for (i64 r = 0; r < 4; ++r)
    for (i64 c = 0; c < 6; ++c)
      x[std::size_t(r * 6 + c)] = c == 0 || c == 5 ? -9.0f : float(c);  // [1 2 3 4]
  Vec y = x;
  dev().rope(y.data(), 6, 1, 1, 4, 2, 2, theta, false);
  for (i64 r = 0; r < 2; ++r)
    for (i64 c = 0; c < 6; ++c)
      CHECK(y[std::size_t(r * 6 + c)] == x[std::size_t(r * 6 + c)]);  // position 0
  for (i64 r = 2; r < 4; ++r) {
    const float* row = &y[std::size_t(r * 6)];
    CHECK(row[0] == -9.0f);
    CHECK(row[5] == -9.0f);
    CHECK(row[1] == Approx(std::cos(1.0) - 3 * std::sin(1.0)).epsilon(1e-6));  // -1.9841106486
    CHECK(row[3] == Approx(std::sin(1.0) + 3 * std::cos(1.0)).epsilon(1e-6));  // 2.4623779024
    CHECK(row[2] == Approx(-4.0).epsilon(1e-6));                               // (2, 4) -> (-4, 2)
    CHECK(row[4] == Approx(2.0).epsilon(1e-6));
  }
  // Several heads, many positions: inverse(forward(x)) = x; backward = inverse.
  const i64 s = 9, b = 2, heads = 3, d = 8, ld = 30;
  Vec z = random_vec(s * b * ld, 91), z0 = z;
  dev().rope(z.data(), ld, 2, heads, d, s, b, 10000.0f, false);
  dev().rope(z.data(), ld, 2, heads, d, s, b, 10000.0f, true);
  CHECK(rel_err(z, z0) < 1e-6);
  Vec w = random_vec(s * b * ld, 92), g = w;
  dev().rope(g.data(), ld, 2, heads, d, s, b, 10000.0f, true);
  for (i64 i = 0; i < s * b * ld; ++i) {
    const i64 c = i % ld;
    if (c < 2 || c >= 2 + heads * d)
      g[std::size_t(i)] = w[std::size_t(i)];  // untouched columns: identity
  }
  check_grad("dx", z, g, [&] {
    Vec t = z;
    dev().rope(t.data(), ld, 2, heads, d, s, b, 10000.0f, false);
    return wsum(t, w);
  });
}

// ================================================================ dropout

TEST_CASE("dropout: deterministic, column shards reproduce, kept fraction, backward", "[kernels]") {
  const i64 rows = 300, cols = 400;
  const float p = 0.1f;
  Vec x = random_vec(rows * cols, 101), y(x.size()), y2(x.size());
  Mask m(x.size()), m2(x.size());
  const DropoutKey key{1234, 5000, 0};
  dev().dropout_forward(x.data(), y.data(), m.data(), rows, cols, p, key);
  dev().dropout_forward(x.data(), y2.data(), m2.data(), rows, cols, p, key);
  CHECK(m == m2);
  i64 kept = 0;
  bool values = true;
  for (std::size_t i = 0; i < x.size(); ++i) {
    kept += m[i];
    values = values && std::abs(y[i] - (m[i] ? x[i] / (1.0f - p) : 0.0f)) <= 1e-6f * std::abs(x[i]);
  }
  CHECK(values);
  CHECK(double(kept) / double(x.size()) == Approx(0.9).margin(0.01));  // sd 0.0009
  // Columns [150, 400) as a shard (col0 = 150), rows 10.. as row_key0 + 10.
  const i64 c0 = 150, cw = cols - c0, r0 = 10, rw = 20;
  Vec xs(std::size_t(rw * cw)), ys(xs.size());
  Mask ms(xs.size());
  for (i64 r = 0; r < rw; ++r)
    for (i64 c = 0; c < cw; ++c)
      xs[std::size_t(r * cw + c)] = x[std::size_t((r0 + r) * cols + c0 + c)];
  dev().dropout_forward(xs.data(), ys.data(), ms.data(), rw, cw, p,
                        DropoutKey{1234, 5000 + r0, c0});
  bool same = true;
  for (i64 r = 0; r < rw; ++r)
    for (i64 c = 0; c < cw; ++c) {
      const std::size_t k = std::size_t((r0 + r) * cols + c0 + c);
      same = same && ms[std::size_t(r * cw + c)] == m[k] && ys[std::size_t(r * cw + c)] == y[k];
    }
  CHECK(same);
  Vec other(x.size());
  dev().dropout_forward(x.data(), other.data(), m2.data(), rows, cols, p,
                        DropoutKey{1235, 5000, 0});
  CHECK(m2 != m);  // another seed, another mask
  // In place, and the backward by finite differences on a small block.
  Vec inplace = x;
  dev().dropout_forward(inplace.data(), inplace.data(), m2.data(), rows, cols, p, key);
  CHECK(inplace == y);
  Vec xb = random_vec(40, 102), wb = random_vec(40, 103), dx(40);
  Mask mb(40);
  auto loss = [&] {
    Vec t(40);
    dev().dropout_forward(xb.data(), t.data(), mb.data(), 4, 10, 0.5f, key);
    return wsum(t, wb);
  };
  loss();
  dev().dropout_backward(wb.data(), mb.data(), dx.data(), 40, 0.5f);
  check_grad("dx", xb, dx, loss);
}

// ================================================================ embedding

TEST_CASE("embedding: ids outside the shard, accumulate, backward", "[kernels]") {
  // Rows [10, 13) of the vocabulary live here.
  Vec table = {1, 2, 3, 4, 5, 6};
  const std::vector<std::int32_t> ids = {9, 10, 12, 13, 11, 10};
  Vec out(12, -5.0f);
  dev().embedding_forward(ids.data(), 6, table.data(), 10, 3, 2, out.data(), false);
  CHECK(out == Vec{0, 0, 1, 2, 5, 6, 0, 0, 3, 4, 1, 2});
  Vec acc(12, 1.0f);
  dev().embedding_forward(ids.data(), 6, table.data(), 10, 3, 2, acc.data(), true);
  CHECK(acc == Vec{1, 1, 2, 3, 6, 7, 1, 1, 4, 5, 2, 3});
  // dout row r = [r, 10 r]: id 10 from rows 1 and 5, 11 from row 4, 12 from row 2.
  Vec dout;
  for (int r = 0; r < 6; ++r) dout.push_back(float(r)), dout.push_back(10.0f * r);
  for (bool bf : {false, true}) {
    Vec dt = {1, 1, 1, 1, 1, 1};
    B16 dth = to_b16(dt);
    dev().embedding_backward(ids.data(), 6, dout.data(), 10, 3, 2,
                             bf ? Ref(dth.data()) : Ref(dt.data()));
    CHECK((bf ? to_f32(dth) : dt) == Vec{7, 61, 5, 41, 3, 21});
  }
  // Finite differences of sum(w * out) in the table.
  Vec w = random_vec(12, 111), dt(6, 0.0f);
  dev().embedding_backward(ids.data(), 6, w.data(), 10, 3, 2, dt.data());
  check_grad("dtable", table, dt, [&] {
    Vec o(12);
    dev().embedding_forward(ids.data(), 6, table.data(), 10, 3, 2, o.data(), false);
    return wsum(o, w);
  });
}

// ================================================================ cross-entropy

namespace {
struct CeResult {
  Vec loss, grad;  // grad: the softmax buffer after ce_backward
};
// The three-step vocab-parallel cross-entropy over `shards` equal column shards
// of a [rows, vocab] logit matrix, the all-reduces done here by hand.
CeResult ce_sharded(const Vec& logits, const std::vector<std::int32_t>& targets, i64 rows,
                    i64 vocab, int shards, float grad_scale) {
  const i64 vl = (vocab + shards - 1) / shards;  // the last shard is padded
  std::vector<Vec> part(static_cast<std::size_t>(shards)), sm(static_cast<std::size_t>(shards));
  std::vector<Vec> mx(std::size_t(shards), Vec(static_cast<std::size_t>(rows))), sum = mx, tl = mx,
                                                                                 loss = mx;
  for (int t = 0; t < shards; ++t) {
    part[std::size_t(t)].assign(std::size_t(rows * vl), 50.0f);  // padding: large, must be ignored
    for (i64 r = 0; r < rows; ++r)
      for (i64 c = 0; c < vl && t * vl + c < vocab; ++c)
        part[std::size_t(t)][std::size_t(r * vl + c)] = logits[std::size_t(r * vocab + t * vl + c)];
    dev().ce_row_max(part[std::size_t(t)].data(), rows, vl, t * vl, vocab,
                     mx[std::size_t(t)].data());
  }
  Vec gmax(std::size_t(rows), -std::numeric_limits<float>::infinity()),
      gsum(std::size_t(rows), 0.0f), gtl(std::size_t(rows), 0.0f);
  for (int t = 0; t < shards; ++t)
    for (i64 r = 0; r < rows; ++r)
      gmax[std::size_t(r)] = std::max(gmax[std::size_t(r)], mx[std::size_t(t)][std::size_t(r)]);
  for (int t = 0; t < shards; ++t) {
    sm[std::size_t(t)].assign(std::size_t(rows * vl), -1.0f);
    dev().ce_exp_sum(part[std::size_t(t)].data(), gmax.data(), targets.data(), rows, vl, t * vl,
                     vocab, sm[std::size_t(t)].data(), sum[std::size_t(t)].data(),
                     tl[std::size_t(t)].data());
    for (i64 r = 0; r < rows; ++r)
      gsum[std::size_t(r)] += sum[std::size_t(t)][std::size_t(r)],
          gtl[std::size_t(r)] += tl[std::size_t(t)][std::size_t(r)];
  }
  CeResult res;
  res.grad.assign(std::size_t(rows * vocab), 0.0f);
  for (int t = 0; t < shards; ++t) {
    dev().ce_finish(sm[std::size_t(t)].data(), gsum.data(), gtl.data(), rows, vl,
                    loss[std::size_t(t)].data());
    dev().ce_backward(sm[std::size_t(t)].data(), targets.data(), rows, vl, t * vl, grad_scale);
    for (i64 r = 0; r < rows; ++r)
      for (i64 c = 0; c < vl; ++c) {
        const float g = sm[std::size_t(t)][std::size_t(r * vl + c)];
        if (t * vl + c < vocab)
          res.grad[std::size_t(r * vocab + t * vl + c)] = g;
        else
          CHECK(g == 0.0f);  // padding gets no gradient
      }
  }
  res.loss = loss[0];
  for (int t = 1; t < shards; ++t) CHECK(loss[std::size_t(t)] == res.loss);  // every shard agrees
  return res;
}
}  // namespace

TEST_CASE("ce: a known row by hand, padding ignored", "[kernels]") {
  // Row 0: logits [1 2 3], target 2: loss = log(e + e^2 + e^3) - 3 = log(1 + e^-1 + e^-2);
  // softmax = [0.0900305732, 0.2447284711, 0.6652409558]. Row 1: zeros, loss log 3.
  // Column 3 is padding (vocab = 3).
  Vec logits = {1, 2, 3, 50, 0, 0, 0, 50}, mx(2), sum(2), tl(2), loss(2), sm(8);
  const std::vector<std::int32_t> tg = {2, 0};
  dev().ce_row_max(logits.data(), 2, 4, 0, 3, mx.data());
  CHECK(mx == Vec{3, 0});
  dev().ce_exp_sum(logits.data(), mx.data(), tg.data(), 2, 4, 0, 3, sm.data(), sum.data(),
                   tl.data());
  CHECK(sm[3] == 0.0f);
  CHECK(tl == Vec{0, 0});
  dev().ce_finish(sm.data(), sum.data(), tl.data(), 2, 4, loss.data());
  CHECK(loss[0] ==
        Approx(std::log(1 + std::exp(-1.0) + std::exp(-2.0))).epsilon(1e-6));  // 0.4076059644
  CHECK(loss[1] == Approx(std::log(3.0)).epsilon(1e-6));
  CHECK(sm[0] == Approx(0.0900305732).epsilon(1e-6));
  CHECK(sm[1] == Approx(0.2447284711).epsilon(1e-6));
  CHECK(sm[2] == Approx(0.6652409558).epsilon(1e-6));
  dev().ce_backward(sm.data(), tg.data(), 2, 4, 0, 0.5f);
  CHECK(sm[2] == Approx(0.5 * (0.6652409558 - 1)).epsilon(1e-6));
  CHECK(sm[4] == Approx(0.5 * (1 / 3.0 - 1)).epsilon(1e-6));
  CHECK(sm[5] == Approx(0.5 / 3.0).epsilon(1e-6));
  // A target in another shard contributes no target logit here.
  const std::vector<std::int32_t> far = {7, 7};
  dev().ce_exp_sum(logits.data(), mx.data(), far.data(), 2, 4, 0, 3, sm.data(), sum.data(),
                   tl.data());
  CHECK(tl == Vec{0, 0});
}

TEST_CASE("ce: backward matches finite differences -- two vocab shards equal one", "[kernels]") {
  const i64 rows = 3, vocab = 7;
  Vec logits = random_vec(rows * vocab, 121, -3, 3);
  const std::vector<std::int32_t> tg = {6, 0, 3};
  const CeResult one = ce_sharded(logits, tg, rows, vocab, 1, 0.5f);
  check_grad("dlogits", logits, one.grad, [&] {
    double l = 0;
    for (float v : ce_sharded(logits, tg, rows, vocab, 1, 0.5f).loss) l += 0.5 * v;
    return l;
  });
  const CeResult two = ce_sharded(logits, tg, rows, vocab, 2, 0.5f);  // shards of 4: one pad column
  CHECK(rel_err(two.loss, one.loss) < 1e-6);
  CHECK(rel_err(two.grad, one.grad) < 1e-6);
}

// ================================================================ optimizer

TEST_CASE("adam: step 1 moves by lr sign(g) -- step 2 from known moments", "[kernels]") {
  // Step 1 from m = v = 0: m^ = g, v^ = g^2, update = lr g / (|g| + eps).
  Vec master = {1, 1, 1, 1}, m(4, 0.0f), v(4, 0.0f), g = {0.5f, -2, 0, 1};
  // n = 3: the fourth element must not move.
  dev().adam(master.data(), m.data(), v.data(), g.data(), Ref(), 3, 0.1f, 0.9f, 0.999f, 1e-8f, 1,
             1.0f);
  CHECK(master[0] == Approx(0.9).epsilon(1e-6));
  CHECK(master[1] == Approx(1.1).epsilon(1e-6));
  CHECK(master[2] == 1.0f);
  CHECK(master[3] == 1.0f);  // n = 3
  CHECK(m[0] == Approx(0.05).epsilon(1e-6));
  CHECK(v[1] == Approx(0.004).epsilon(1e-4));  // (1 - 0.999f) * 4; 1 - 0.999f = 0.00100005 in fp32
  Vec ms = {1}, mm = {0}, vv = {0}, gg = {1};
  dev().adam(ms.data(), mm.data(), vv.data(), gg.data(), Ref(), 1, 0.1f, 0.9f, 0.999f, 1e-8f, 1,
             -0.25f);
  CHECK(ms[0] == Approx(1.1).epsilon(1e-6));  // g = -0.25
  // Step 2: m = 0.1, v = 0.01, g = 1, b1 = 0.9, b2 = 0.99: m = 0.19, v = 0.0199,
  // m^ = 0.19 / 0.19 = 1, v^ = 0.0199 / 0.0199 = 1: master 1 - 0.01 / (1 + eps).
  Vec mst = {1}, m2 = {0.1f}, v2 = {0.01f}, g2 = {1};
  B16 param(1);
  dev().adam(mst.data(), m2.data(), v2.data(), g2.data(), param.data(), 1, 0.01f, 0.9f, 0.99f,
             1e-8f, 2, 1.0f);
  CHECK(m2[0] == Approx(0.19).epsilon(1e-6));
  CHECK(v2[0] == Approx(0.0199).epsilon(1e-6));
  CHECK(mst[0] == Approx(0.99).epsilon(1e-6));
  CHECK(to_float(param[0]) == 0.98828125f);  // 0.99 rounded to bf16
  B16 gh = to_b16({1});                      // bf16 gradient
  Vec mst2 = {1}, m3 = {0.1f}, v3 = {0.01f};
  dev().adam(mst2.data(), m3.data(), v3.data(), gh.data(), Ref(), 1, 0.01f, 0.9f, 0.99f, 1e-8f, 2,
             1.0f);
  CHECK(mst2[0] == mst[0]);
}

TEST_CASE("checksums: sum of squares and hash-weighted sum in double", "[kernels]") {
  Vec x = {1, -2, 3};
  double sq = 0, sw = 0;
  dev().checksums(x.data(), 3, 77, 10, &sq, &sw);
  CHECK(sq == 14.0);
  double want = 0;
  for (int i = 0; i < 3; ++i) want += x[std::size_t(i)] * (hash_uniform(77, 0, 10 + i) - 0.5);
  CHECK(sw == Approx(want).epsilon(1e-12));
  B16 xh = to_b16(x);
  double sq2 = 0, sw2 = 0;
  dev().checksums(xh.data(), 3, 77, 10, &sq2, &sw2);
  CHECK(sq2 == sq);
  CHECK(sw2 == sw);
}

// ================================================================ bf16 vs fp32

TEST_CASE("bf16 storage agrees with fp32 within 1e-2 (norm, activations)", "[kernels]") {
  const i64 rows = 16, cols = 96;
  Vec x = bf16_exact(random_vec(rows * cols, 131, -2, 2)),
      gamma = bf16_exact(random_vec(cols, 132, 0.5f, 1.5f));
  Vec beta = bf16_exact(random_vec(cols, 133)), dy = bf16_exact(random_vec(rows * cols, 134));
  B16 xh = to_b16(x), gh = to_b16(gamma), bh = to_b16(beta), dyh = to_b16(dy);
  for (NormKind kind : {NormKind::kLayerNorm, NormKind::kRmsNorm}) {
    Vec y(x.size()), dx(x.size()), dg(std::size_t(cols), 0.0f), db(std::size_t(cols), 0.0f);
    B16 yh(x.size()), dxh(x.size()), dgh(std::size_t(cols), bf16{0}),
        dbh(std::size_t(cols), bf16{0});
    dev().norm_forward(kind, x.data(), gamma.data(), beta.data(), y.data(), rows, cols, 1e-5f);
    dev().norm_forward(kind, xh.data(), gh.data(), bh.data(), yh.data(), rows, cols, 1e-5f);
    CHECK(rel_err(to_f32(yh), y) < 1e-2);
    dev().norm_backward(kind, x.data(), gamma.data(), dy.data(), dx.data(), false, dg.data(),
                        db.data(), rows, cols, 1e-5f);
    dev().norm_backward(kind, xh.data(), gh.data(), dyh.data(), dxh.data(), false, dgh.data(),
                        dbh.data(), rows, cols, 1e-5f);
    CHECK(rel_err(to_f32(dxh), dx) < 1e-2);
    CHECK(rel_err(to_f32(dgh), dg) < 1e-2);
    if (kind == NormKind::kLayerNorm) CHECK(rel_err(to_f32(dbh), db) < 1e-2);
  }
  for (ActKind kind : {ActKind::kGelu, ActKind::kSwiglu}) {
    const i64 f = cols / 2;  // u is rows x 2f for SwiGLU, rows x f for GeLU
    const i64 nu = rows * f * (kind == ActKind::kSwiglu ? 2 : 1);
    Vec u(x.begin(), x.begin() + nu), dg(dy.begin(), dy.begin() + rows * f),
        g(std::size_t(rows * f)), du(u.size());
    B16 uh = to_b16(u), dgh = to_b16(dg), gh2(g.size()), duh(u.size());
    dev().act_forward(kind, u.data(), g.data(), rows, f);
    dev().act_forward(kind, uh.data(), gh2.data(), rows, f);
    CHECK(rel_err(to_f32(gh2), g) < 1e-2);
    dev().act_backward(kind, u.data(), dg.data(), du.data(), rows, f);
    dev().act_backward(kind, uh.data(), dgh.data(), duh.data(), rows, f);
    CHECK(rel_err(to_f32(duh), du) < 1e-2);
  }
}
