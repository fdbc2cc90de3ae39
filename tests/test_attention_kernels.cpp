// CPU attention kernels (validate/cpu/cpu_attention.cpp): a hand-worked
// 3-token case, a naive double-precision reference, central differences of the
// forward passes, and each path against the others (flash vs materialised,
// staged bf16-storage vs Eigen in place, bf16 vs fp32, sharded dropout keys).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernel_test_util.hpp"

using namespace paraplan::kernel_test;

namespace {

// ---- attention fixtures ----

// K, V, Q blocks in an unusual order with padding columns, so offsets and ld
// are exercised: [pad | K | V | pad pad | Q | pad].
AttnShape shape(i64 s, i64 b, i64 hq, i64 hkv, i64 d) {
  AttnShape a;
  a.s = s, a.b = b, a.hq = hq, a.hkv = hkv, a.d = d;
  a.k_off = 1;
  a.v_off = a.k_off + hkv * d;
  a.q_off = a.v_off + hkv * d + 2;
  a.ld = a.q_off + hq * d + 1;
  a.scale = float(1.0 / std::sqrt(double(d)));
  return a;
}
i64 qkv_n(const AttnShape& a) { return a.s * a.b * a.ld; }
i64 probs_n(const AttnShape& a) { return a.b * a.hq * a.s * a.s; }
i64 out_n(const AttnShape& a) { return a.s * a.b * a.hq * a.d; }
bool is_pad(const AttnShape& a, i64 idx) {
  const i64 c = idx % a.ld;
  auto in = [&](i64 off, i64 w) { return c >= off && c < off + w; };
  return !in(a.q_off, a.hq * a.d) && !in(a.k_off, a.hkv * a.d) && !in(a.v_off, a.hkv * a.d);
}

struct AttnFwd {
  Vec probs, dropped, out;
  Mask mask;
};
// Materialised forward in fp32: probs, optional attention dropout, P V.
AttnFwd attn_forward(const AttnShape& a, Vec& qkv, float p = 0.0f, std::uint64_t seed = 7) {
  AttnFwd f;
  f.probs.assign(std::size_t(probs_n(a)), -1.0f);
  f.out.assign(std::size_t(out_n(a)), -1.0f);
  dev().attention_probs(qkv.data(), a, f.probs.data());
  if (p > 0) {
    f.dropped.assign(f.probs.size(), -1.0f);
    f.mask.assign(f.probs.size(), 9);
    dev().attention_dropout_forward(f.probs.data(), f.dropped.data(), f.mask.data(), a, p, seed, 0,
                                    0, a.hq);
    dev().attention_pv(f.dropped.data(), qkv.data(), a, f.out.data());
  } else {
    dev().attention_pv(f.probs.data(), qkv.data(), a, f.out.data());
  }
  return f;
}

// Backward into a dqkv pre-filled with 7 (pad columns must keep it); returns
// dqkv with the pad columns zeroed for comparison with finite differences.
Vec attn_backward(const AttnShape& a, Vec& qkv, const AttnFwd& f, float p, Vec& dout) {
  Vec dqkv(std::size_t(qkv_n(a)), 7.0f), scratch(std::size_t(2 * a.s));
  const bool drop = p > 0;
  dev().attention_backward(qkv.data(), const_cast<float*>(f.probs.data()),
                           drop ? f.mask.data() : nullptr,
                           drop ? Ref(const_cast<float*>(f.dropped.data())) : Ref(), p, dout.data(),
                           a, dqkv.data(), scratch.data());
  bool pads_kept = true;
  for (i64 i = 0; i < qkv_n(a); ++i)
    if (is_pad(a, i))
      pads_kept = pads_kept && dqkv[std::size_t(i)] == 7.0f, dqkv[std::size_t(i)] = 0;
  CHECK(pads_kept);
  return dqkv;
}

struct FlashFwd {
  Vec out, lse;
};
FlashFwd flash_forward(const AttnShape& a, Vec& qkv) {
  FlashFwd f;
  f.out.assign(std::size_t(out_n(a)), -1.0f);
  f.lse.assign(std::size_t(a.b * a.hq * a.s), -1.0f);
  Vec scratch(std::size_t(a.s));
  dev().flash_attention_forward(qkv.data(), a, f.out.data(), f.lse.data(), scratch.data());
  return f;
}
Vec flash_backward(const AttnShape& a, Vec& qkv, FlashFwd& f, Vec& dout) {
  Vec dqkv(std::size_t(qkv_n(a)), 7.0f), scratch(std::size_t(2 * a.s));
  dev().flash_attention_backward(qkv.data(), f.out.data(), f.lse.data(), dout.data(), a,
                                 dqkv.data(), scratch.data());
  bool pads_kept = true;
  for (i64 i = 0; i < qkv_n(a); ++i)
    if (is_pad(a, i))
      pads_kept = pads_kept && dqkv[std::size_t(i)] == 7.0f, dqkv[std::size_t(i)] = 0;
  CHECK(pads_kept);
  return dqkv;
}

// Naive causal attention in double, straight from the layout rules: token i of
// batch bi is row i*b + bi; query head h reads kv head h / (hq / hkv).
double qkv_at(const AttnShape& a, const Vec& qkv, i64 i, i64 bi, i64 col) {
  return qkv[std::size_t((i * a.b + bi) * a.ld + col)];
}
std::vector<double> reference_probs_row(const AttnShape& a, const Vec& qkv, i64 bi, i64 h, i64 i) {
  const i64 g = h / (a.hq / a.hkv);
  std::vector<double> p(std::size_t(i + 1));
  double m = -1e300, sum = 0;
  for (i64 j = 0; j <= i; ++j) {
    double v = 0;
    for (i64 e = 0; e < a.d; ++e)
      v += qkv_at(a, qkv, i, bi, a.q_off + h * a.d + e) *
           qkv_at(a, qkv, j, bi, a.k_off + g * a.d + e);
    p[std::size_t(j)] = v * a.scale;
    m = std::max(m, p[std::size_t(j)]);
  }
  for (auto& v : p) sum += (v = std::exp(v - m));
  for (auto& v : p) v /= sum;
  return p;
}
Vec attn_reference(const AttnShape& a, const Vec& qkv) {
  Vec out(std::size_t(out_n(a)));
  for (i64 bi = 0; bi < a.b; ++bi)
    for (i64 h = 0; h < a.hq; ++h)
      for (i64 i = 0; i < a.s; ++i) {
        const std::vector<double> p = reference_probs_row(a, qkv, bi, h, i);
        for (i64 e = 0; e < a.d; ++e) {
          double o = 0;
          for (i64 j = 0; j <= i; ++j)
            o +=
                p[std::size_t(j)] * qkv_at(a, qkv, j, bi, a.v_off + (h / (a.hq / a.hkv)) * a.d + e);
          out[std::size_t((i * a.b + bi) * a.hq * a.d + h * a.d + e)] = float(o);
        }
      }
  return out;
}

}  // namespace

TEST_CASE("attention: causal softmax of a 3-token row and its P V by hand", "[kernels]") {
  // d = 1, scale 1, q = 1, k = [0, ln 2, ln 3], v = [1 2 3]: row 2 of P is
  // [1 2 3] / 6, row 1 [1 2] / 3; O = [1, 5/3, 7/3]; lse = [0, ln 3, ln 6].
  AttnShape a;
  a.s = 3, a.b = 1, a.hq = 1, a.hkv = 1, a.d = 1, a.ld = 3, a.q_off = 0, a.k_off = 1, a.v_off = 2;
  a.scale = 1.0f;
  Vec qkv = {1, 0, 1, 1, float(std::log(2.0)), 2, 1, float(std::log(3.0)), 3};
  const AttnFwd f = attn_forward(a, qkv);
  const double P[9] = {1, 0, 0, 1 / 3., 2 / 3., 0, 1 / 6., 2 / 6., 3 / 6.};
  for (int i = 0; i < 9; ++i) CHECK(f.probs[i] == Approx(P[i]).margin(1e-6));
  CHECK(f.probs[1] == 0.0f);  // masked entries exactly 0
  CHECK(f.probs[2] == 0.0f);
  CHECK(f.probs[5] == 0.0f);
  const double O[3] = {1, 5 / 3., 7 / 3.};
  for (int i = 0; i < 3; ++i) CHECK(f.out[i] == Approx(O[i]).epsilon(1e-6));
  FlashFwd fl = flash_forward(a, qkv);
  for (int i = 0; i < 3; ++i) CHECK(fl.out[i] == Approx(O[i]).epsilon(1e-6));
  CHECK(fl.lse[0] == Approx(0.0).margin(1e-6));
  CHECK(fl.lse[1] == Approx(std::log(3.0)).epsilon(1e-6));
  CHECK(fl.lse[2] == Approx(std::log(6.0)).epsilon(1e-6));
}

TEST_CASE("attention: probs + P V and flash match a double reference (GQA, b = 2)", "[kernels]") {
  const AttnShape a = shape(6, 2, 4, 2, 8);
  Vec qkv = random_vec(qkv_n(a), 31, -2, 2);
  const Vec ref = attn_reference(a, qkv);
  const AttnFwd f = attn_forward(a, qkv);
  CHECK(rel_err(f.out, ref) < 1e-6);
  CHECK(rel_err(flash_forward(a, qkv).out, ref) < 1e-6);
  bool masked_zero = true, rows_sum_to_one = true;
  for (i64 bh = 0; bh < a.b * a.hq; ++bh)
    for (i64 i = 0; i < a.s; ++i) {
      double sum = 0;
      for (i64 j = 0; j < a.s; ++j) {
        const float p = f.probs[std::size_t((bh * a.s + i) * a.s + j)];
        if (j > i) masked_zero = masked_zero && p == 0.0f;
        sum += p;
      }
      rows_sum_to_one = rows_sum_to_one && std::abs(sum - 1) < 1e-6;
    }
  CHECK(masked_zero);
  CHECK(rows_sum_to_one);
}

TEST_CASE("attention: backward matches finite differences, with and without dropout", "[kernels]") {
  const AttnShape a = shape(5, 2, 4, 2, 4);
  for (float p : {0.0f, 0.3f}) {
    INFO("dropout " << p);
    Vec qkv = random_vec(qkv_n(a), 41, -1.5f, 1.5f), w = random_vec(out_n(a), 42);
    const AttnFwd f = attn_forward(a, qkv, p);
    if (p > 0) {  // the mask is drawn, and does drop something
      i64 dropped = 0;
      for (i64 i = 0; i < probs_n(a); ++i)
        dropped += f.mask[std::size_t(i)] == 0 && f.probs[std::size_t(i)] != 0;
      CHECK(dropped > 0);
    }
    const Vec dqkv = attn_backward(a, qkv, f, p, w);
    check_grad("dqkv", qkv, dqkv, [&] { return wsum(attn_forward(a, qkv, p).out, w); });
  }
}

TEST_CASE(
    "flash: forward equals probs + P V - backward matches finite differences and attention_backward",
    "[kernels]") {
  const AttnShape a = shape(5, 2, 4, 2, 4);
  Vec qkv = random_vec(qkv_n(a), 51, -1.5f, 1.5f), w = random_vec(out_n(a), 52);
  FlashFwd fl = flash_forward(a, qkv);
  const AttnFwd f = attn_forward(a, qkv);
  CHECK(rel_err(fl.out, f.out) < 1e-6);
  // lse from the definition: log sum_j exp(scale q_i . k_j), via the probabilities:
  // P_i0 = exp(s_i0 - lse_i), so lse_i = s_i0 - log P_i0.
  bool lse_ok = true;
  for (i64 bi = 0; bi < a.b; ++bi)
    for (i64 h = 0; h < a.hq; ++h)
      for (i64 i = 0; i < a.s; ++i) {
        double s0 = 0;
        for (i64 e = 0; e < a.d; ++e)
          s0 += double(qkv[std::size_t((i * a.b + bi) * a.ld + a.q_off + h * a.d + e)]) *
                qkv[std::size_t(bi * a.ld + a.k_off + (h / 2) * a.d + e)];
        const double lse =
            s0 * a.scale -
            std::log(double(f.probs[std::size_t(((bi * a.hq + h) * a.s + i) * a.s)]));
        lse_ok = lse_ok && std::abs(lse - fl.lse[std::size_t((bi * a.hq + h) * a.s + i)]) < 1e-5;
      }
  CHECK(lse_ok);
  const Vec dflash = flash_backward(a, qkv, fl, w);
  CHECK(rel_err(dflash, attn_backward(a, qkv, f, 0.0f, w)) < 1e-5);
  check_grad("dqkv", qkv, dflash, [&] { return wsum(flash_forward(a, qkv).out, w); });
}

TEST_CASE("attention: staged (bf16-storage) paths equal the Eigen paths -- bf16 within 1e-2 of fp32",
          "[kernels]") {
  // bf16-exact qkv stored as bf16 with fp32 outputs runs the staged paths at
  // fp32 accuracy; all-bf16 storage is checked against fp32 at 1e-2. Shapes
  // span one block, several query blocks and key tiles (d = 128: 32-row tiles),
  // GQA and b > 1.
  const AttnShape shapes[] = {shape(7, 2, 4, 2, 8), shape(150, 2, 4, 2, 8),
                              shape(150, 1, 2, 1, 128), shape(67, 3, 3, 3, 16)};
  for (const AttnShape& a : shapes) {
    INFO("s " << a.s << " b " << a.b << " hq " << a.hq << " hkv " << a.hkv << " d " << a.d);
    Vec qkv = bf16_exact(random_vec(qkv_n(a), 61, -1.5f, 1.5f)),
        w = bf16_exact(random_vec(out_n(a), 62));
    B16 qkvh = to_b16(qkv), wh = to_b16(w);
    auto unpad = [&](Vec v) {
      for (i64 i = 0; i < qkv_n(a); ++i)
        if (is_pad(a, i)) v[std::size_t(i)] = 0;
      return v;
    };
    Vec scratch(std::size_t(2 * a.s));
    const float p = 0.2f;
    for (bool drop : {false, true}) {
      INFO("dropout " << drop);
      AttnFwd f = attn_forward(a, qkv, drop ? p : 0.0f);
      if (!drop) CHECK(rel_err(f.out, attn_reference(a, qkv)) < 1e-5);
      Vec probs(f.probs.size()), out(f.out.size());
      dev().attention_probs(qkvh.data(), a, probs.data());
      CHECK(rel_err(probs, f.probs) < 1e-6);
      Vec& pin = drop ? f.dropped : f.probs;  // what P V reads
      dev().attention_pv(pin.data(), qkvh.data(), a, out.data());
      CHECK(rel_err(out, f.out) < 1e-6);
      const Vec dfast = attn_backward(a, qkv, f, drop ? p : 0.0f, w);
      Vec dstaged(std::size_t(qkv_n(a)), 7.0f);
      dev().attention_backward(qkvh.data(), f.probs.data(), drop ? f.mask.data() : nullptr,
                               drop ? Ref(f.dropped.data()) : Ref(), drop ? p : 0.0f, w.data(), a,
                               dstaged.data(), scratch.data());
      CHECK(rel_err(unpad(dstaged), dfast) < 1e-5);
      // All bf16: probs, dropped, out, dout, dqkv.
      B16 ph(f.probs.size()), dh(f.probs.size()), oh(f.out.size()), gh(std::size_t(qkv_n(a)));
      Mask mh(f.probs.size());
      dev().attention_probs(qkvh.data(), a, ph.data());
      CHECK(rel_err(to_f32(ph), f.probs) < 1e-2);
      if (drop)
        dev().attention_dropout_forward(ph.data(), dh.data(), mh.data(), a, p, 7, 0, 0, a.hq);
      if (drop) CHECK(mh == f.mask);
      dev().attention_pv(drop ? dh.data() : ph.data(), qkvh.data(), a, oh.data());
      CHECK(rel_err(to_f32(oh), f.out) < 1e-2);
      dev().attention_backward(qkvh.data(), ph.data(), drop ? mh.data() : nullptr,
                               drop ? Ref(dh.data()) : Ref(), drop ? p : 0.0f, wh.data(), a,
                               gh.data(), scratch.data());
      CHECK(rel_err(unpad(to_f32(gh)), dfast) < 1e-2);
    }
    // Flash: against the materialised path, staged at fp32 accuracy, and all-bf16.
    FlashFwd fl = flash_forward(a, qkv);
    CHECK(rel_err(fl.out, attn_forward(a, qkv).out) < 1e-6);
    Vec out(fl.out.size()), lse(fl.lse.size());
    dev().flash_attention_forward(qkvh.data(), a, out.data(), lse.data(), scratch.data());
    CHECK(rel_err(out, fl.out) < 1e-6);
    CHECK(rel_err(lse, fl.lse) < 1e-6);
    const Vec dfast = flash_backward(a, qkv, fl, w);
    const AttnFwd f = attn_forward(a, qkv);
    CHECK(rel_err(dfast, attn_backward(a, qkv, f, 0.0f, w)) < 1e-5);
    Vec dstaged(std::size_t(qkv_n(a)), 0.0f);
    dev().flash_attention_backward(qkvh.data(), fl.out.data(), fl.lse.data(), w.data(), a,
                                   dstaged.data(), scratch.data());
    CHECK(rel_err(unpad(dstaged), dfast) < 1e-5);
    B16 oh(fl.out.size()), gh(std::size_t(qkv_n(a)));
    dev().flash_attention_forward(qkvh.data(), a, oh.data(), lse.data(), scratch.data());
    CHECK(rel_err(to_f32(oh), fl.out) < 1e-2);
    dev().flash_attention_backward(qkvh.data(), oh.data(), lse.data(), wh.data(), a, gh.data(),
                                   scratch.data());
    CHECK(rel_err(unpad(to_f32(gh)), dfast) < 1e-2);
  }
}

TEST_CASE("attention: rows longer than a stack block (s > 8192)", "[kernels]") {
  const AttnShape a = shape(8200, 1, 1, 1, 2);
  Vec qkv = bf16_exact(random_vec(qkv_n(a), 71, -2, 2)), w = random_vec(out_n(a), 73);
  B16 qkvh = to_b16(qkv);
  {  // bf16 probs: max and sum in a first pass, then written. Spot rows: each
     // value is the exact probability rounded once (half a bf16 ulp: <= 2^-8 relative).
    B16 ph(static_cast<std::size_t>(probs_n(a)));
    dev().attention_probs(qkvh.data(), a, ph.data());
    bool ok = true;
    for (i64 i : {0, 1, 4097, 8192, 8199}) {
      const std::vector<double> p = reference_probs_row(a, qkv, 0, 0, i);
      for (i64 j = 0; j < a.s; ++j) {
        const float got = to_float(ph[std::size_t(i * a.s + j)]);
        ok = ok && (j > i ? got == 0.0f
                          : std::abs(got - p[std::size_t(j)]) <= 0x1p-8 * p[std::size_t(j)] * 1.01);
      }
    }
    CHECK(ok);
  }
  {  // The fp32 flash backward takes one row at a time in the scratch; the staged
     // path (bf16 qkv) needs none.
    FlashFwd fl = flash_forward(a, qkv);
    const Vec dfast = flash_backward(a, qkv, fl, w);
    Vec dstaged(static_cast<std::size_t>(qkv_n(a)), 0.0f), scratch(std::size_t(2 * a.s));
    dev().flash_attention_backward(qkvh.data(), fl.out.data(), fl.lse.data(), w.data(), a,
                                   dstaged.data(), scratch.data());
    for (i64 i = 0; i < qkv_n(a); ++i)
      if (is_pad(a, i)) dstaged[std::size_t(i)] = 0;
    CHECK(rel_err(dstaged, dfast) < 1e-5);
  }
}

TEST_CASE("attention dropout: keys compose across batch and head shards -- masked part is 0",
          "[kernels]") {
  // Whole: 2 sequences x 4 heads. Shard: sequence 1 (seq0 = 1), heads 2..3 (head0 = 2).
  const AttnShape whole = shape(5, 2, 4, 4, 1);
  AttnShape part = shape(5, 1, 2, 2, 1);
  const i64 s = whole.s;
  Vec probs = random_vec(probs_n(whole), 81, 0.1f, 1), dw(probs.size());
  Mask mw(probs.size());
  dev().attention_dropout_forward(probs.data(), dw.data(), mw.data(), whole, 0.4f, 99, 0, 0, 4);
  const i64 first = (1 * 4 + 2) * s * s;  // (batch 1, head 2) in the whole
  Vec pp(probs.begin() + first, probs.begin() + first + 2 * s * s), dp(pp.size());
  Mask mp(pp.size());
  dev().attention_dropout_forward(pp.data(), dp.data(), mp.data(), part, 0.4f, 99, 1, 2, 4);
  CHECK(mp == Mask(mw.begin() + first, mw.begin() + first + 2 * s * s));
  CHECK(dp == Vec(dw.begin() + first, dw.begin() + first + 2 * s * s));
  bool upper_zero = true, scaled = true;
  for (i64 r = 0; r < 2 * 4 * s; ++r)
    for (i64 j = 0; j < s; ++j) {
      const std::size_t k = std::size_t(r * s + j);
      if (j > r % s)
        upper_zero = upper_zero && mw[k] == 0 && dw[k] == 0.0f;
      else
        scaled = scaled && std::abs(dw[k] - (mw[k] ? probs[k] / 0.6f : 0.0f)) <= 1e-6f * probs[k];
    }
  CHECK(upper_zero);
  CHECK(scaled);
}
