// Every kernel of validate/device.hpp on the CUDA device against the CPU
// reference, on random inputs, in fp32 (relative error <= 1e-5) and bf16
// (<= 1e-2), as issue 6 asks. Error = max |gpu - cpu| / max |cpu| over the
// output (normwise, so tiny reference entries do not dominate); masks must be
// equal bit for bit. Both sides allocate through their backend's tracking
// allocator (the GPU through the CUDA pool), as the executor does.
// Prints one line per check (nccl-tests style: the error next to the
// tolerance) and exits 1 if any fails; exits 77 with the reason when there is
// no usable GPU (ctest: label gpu, SKIP_RETURN_CODE 77).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "validate/cpu/cpu_device.hpp"
#include "validate/gpu/gpu_backend.hpp"

using namespace paraplan;
using namespace paraplan::validate;

namespace {

using i64 = std::int64_t;
using Vec = std::vector<float>;
enum Side { kCpu = 0, kGpu = 1 };

struct Bench {
  std::unique_ptr<Device> dev[2];
  std::unique_ptr<MemoryResource> mem[2];
  std::unique_ptr<TrackingAllocator> alloc[2];
  int failures = 0, checks = 0;
};

Vec random_vec(i64 n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(static_cast<std::size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

// One logical tensor on both sides, filled from the same host values.
struct P {
  Buffer b[2];
  i64 n = 0;
  Ref r(Side s) const { return b[s].ref(); }
  float* f(Side s) const { return b[s].as<float>(); }
};

P tensor(Bench& B, const Vec& v, DType t) {
  P p;
  p.n = i64(v.size());
  for (Side s : {kCpu, kGpu}) {
    p.b[s] = Buffer(B.alloc[s].get(), p.n, t, Category::kTransient, "check");
    B.dev[s]->from_host(v.data(), p.b[s].ref(), p.n);
  }
  return p;
}
P zeros(Bench& B, i64 n, DType t) { return tensor(B, Vec(static_cast<std::size_t>(n), 0.0f), t); }

P raw(Bench& B, const void* data, i64 bytes) {
  P p;
  p.n = bytes;
  for (Side s : {kCpu, kGpu}) {
    p.b[s] = Buffer::bytes(B.alloc[s].get(), bytes, Category::kTransient, "check bytes");
    if (data) B.dev[s]->upload(data, p.b[s].data(), bytes);
  }
  return p;
}

Vec values(Bench& B, const P& p, Side s, i64 n = -1) {
  Vec v(static_cast<std::size_t>(n < 0 ? p.n : n));
  B.dev[s]->to_host(p.r(s), v.data(), i64(v.size()));
  return v;
}

std::vector<std::uint8_t> bytes_of(const P& p, Side s) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(p.n));
  if (s == kCpu) std::memcpy(v.data(), p.b[s].data(), v.size());
  else cuda_download(0, p.b[s].data(), v.data(), p.n);
  return v;
}

double tolerance(DType t) { return t == DType::kFp32 ? 1e-5 : 1e-2; }

void report(Bench& B, const std::string& what, double err, double tol) {
  const bool ok = err <= tol;
  ++B.checks;
  if (!ok) ++B.failures;
  std::printf("%-52s %10.3e  %8.1e  %s\n", what.c_str(), err, tol, ok ? "ok" : "FAILED");
}

// Compares output `p` (first n elements) of both sides.
void expect(Bench& B, const std::string& what, const P& p, DType t, i64 n = -1) {
  const Vec c = values(B, p, kCpu, n), g = values(B, p, kGpu, n);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    const double d = std::abs(double(g[i]) - c[i]);
    num = std::isnan(d) ? INFINITY : std::max(num, d);
    den = std::max(den, std::abs(double(c[i])));
  }
  report(B, what + " [" + dtype_name(t) + "]", num / std::max(den, 1e-30), tolerance(t));
}

void expect_bytes(Bench& B, const std::string& what, const P& p) {
  report(B, what + " [mask]", bytes_of(p, kCpu) == bytes_of(p, kGpu) ? 0.0 : 1.0, 0.0);
}

// Runs `op` on both sides.
void both(Bench& B, const std::function<void(Device&, Side)>& op) {
  for (Side s : {kCpu, kGpu}) op(*B.dev[s], s);
  B.dev[kGpu]->synchronize();
}

// ---------------------------------------------------------------- cases

void elementwise(Bench& B, DType t) {
  const DType o = t == DType::kFp32 ? DType::kBf16 : DType::kFp32;
  const i64 rows = 37, cols = 129, n = rows * cols;
  P a = tensor(B, random_vec(n, 1), t), b = tensor(B, random_vec(n, 2), t), bias = tensor(B, random_vec(cols, 3), t);
  P c = zeros(B, n, o);
  both(B, [&](Device& d, Side s) { d.copy(a.r(s), c.r(s), n); });
  expect(B, "copy (converting)", c, o);
  P f = zeros(B, n, t);
  both(B, [&](Device& d, Side s) { d.fill(f.r(s), n, -0.375f); });
  expect(B, "fill", f, t);
  P blk = tensor(B, Vec(40 * 50, 0.5f), o);
  both(B, [&](Device& d, Side s) { d.copy_2d(a.r(s).at(3), cols, blk.r(s), 50, 30, 41); });
  expect(B, "copy_2d (converting)", blk, o);
  P sum = zeros(B, n, t);
  both(B, [&](Device& d, Side s) { d.add(a.r(s), b.r(s), sum.r(s), n); });
  expect(B, "add", sum, t);
  both(B, [&](Device& d, Side s) { d.axpy(-0.7f, a.r(s), sum.r(s), n); });
  expect(B, "axpy", sum, t);
  both(B, [&](Device& d, Side s) { d.scale(sum.r(s), n, 1.3f); });
  expect(B, "scale", sum, t);
  both(B, [&](Device& d, Side s) { d.add_bias(sum.r(s), bias.r(s), rows, cols); });
  expect(B, "add_bias", sum, t);
  both(B, [&](Device& d, Side s) { d.bias_backward(a.r(s), bias.r(s), rows, cols); });
  expect(B, "bias_backward", bias, t);
}

void gemms(Bench& B, DType t) {
  const i64 m = 67, n = 45, k = 129, pad = 5;
  struct Types {
    DType a, b, c;
    const char* name;
  };
  const Types combos[] = {{t, t, t, "same types"},
                          {DType::kFp32, DType::kBf16, t, "fp32 A x bf16 B"},
                          {DType::kBf16, DType::kFp32, t, "bf16 A x fp32 B"},
                          {DType::kFp32, DType::kFp32, DType::kBf16, "fp32 x fp32 into bf16"}};
  for (const Types& ty : combos) {
    if (t == DType::kFp32 && &ty != &combos[0]) continue;  // mixed combinations are judged as bf16
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.0f, 1.0f}) {
          const i64 lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
          P A = tensor(B, random_vec((ta ? k : m) * lda, 4), ty.a);
          P Bm = tensor(B, random_vec((tb ? n : k) * ldb, 5), ty.b);
          P C = tensor(B, random_vec(m * ldc, 6), ty.c);
          both(B, [&](Device& d, Side s) {
            d.gemm(ta, tb, m, n, k, 0.5f, A.r(s), lda, Bm.r(s), ldb, beta, C.r(s), ldc);
          });
          char what[96];
          std::snprintf(what, sizeof what, "gemm %s ta=%d tb=%d beta=%g", ty.name, ta, tb, beta);
          expect(B, what, C, t);
        }
  }
}

void norms_rope_acts(Bench& B, DType t) {
  const i64 rows = 19, cols = 300;
  for (NormKind kind : {NormKind::kLayerNorm, NormKind::kRmsNorm}) {
    const bool ln = kind == NormKind::kLayerNorm;
    const std::string name = ln ? "layernorm" : "rmsnorm";
    P x = tensor(B, random_vec(rows * cols, 7, -2, 3), t), g = tensor(B, random_vec(cols, 8, 0.5f, 1.5f), t);
    P be = tensor(B, random_vec(cols, 9), t), y = zeros(B, rows * cols, t);
    both(B, [&](Device& d, Side s) {
      d.norm_forward(kind, x.r(s), g.r(s), ln ? be.r(s) : Ref(), y.r(s), rows, cols, 1e-5f);
    });
    expect(B, name + " forward", y, t);
    for (bool acc : {false, true}) {
      P dy = tensor(B, random_vec(rows * cols, 10), t), dx = tensor(B, random_vec(rows * cols, 11), t);
      P dg = tensor(B, random_vec(cols, 12), t), db = tensor(B, random_vec(cols, 13), t);
      both(B, [&](Device& d, Side s) {
        d.norm_backward(kind, x.r(s), g.r(s), dy.r(s), dx.r(s), acc, dg.r(s), db.r(s), rows, cols, 1e-5f);
      });
      expect(B, name + " backward dx" + (acc ? " (accumulate)" : ""), dx, t);
      expect(B, name + " backward dgamma", dg, t);
      if (ln) expect(B, name + " backward dbeta", db, t);
    }
  }
  {  // 3 q heads and 1 kv head of 64 at columns 0 and 256 of a 384-wide buffer; s = 50 positions, b = 2
    const i64 s = 50, b = 2, ld = 384;
    P x = tensor(B, random_vec(s * b * ld, 14), t);
    both(B, [&](Device& d, Side sd) { d.rope(x.r(sd), ld, 0, 3, 64, s, b, 10000.0f, false); });
    expect(B, "rope", x, t);
    both(B, [&](Device& d, Side sd) { d.rope(x.r(sd), ld, 256, 1, 64, s, b, 500000.0f, true); });
    expect(B, "rope inverse", x, t);
  }
  const i64 f = 173;
  for (ActKind kind : {ActKind::kGelu, ActKind::kSwiglu}) {
    const bool sw = kind == ActKind::kSwiglu;
    const i64 un = rows * f * (sw ? 2 : 1);
    P u = tensor(B, random_vec(un, 15, -4, 4), t), g = zeros(B, rows * f, t);
    P dg = tensor(B, random_vec(rows * f, 16), t);
    P du = zeros(B, un, t);
    both(B, [&](Device& d, Side s) { d.act_forward(kind, u.r(s), g.r(s), rows, f); });
    expect(B, sw ? "swiglu forward" : "gelu forward", g, t);
    both(B, [&](Device& d, Side s) { d.act_backward(kind, u.r(s), dg.r(s), du.r(s), rows, f); });
    expect(B, sw ? "swiglu backward" : "gelu backward", du, t);
  }
}

void dropouts(Bench& B, DType t) {
  const i64 rows = 33, cols = 257, n = rows * cols;
  P x = tensor(B, random_vec(n, 17), t), y = zeros(B, n, t), m = raw(B, nullptr, n);
  const DropoutKey key{77, 1000, 512};
  both(B, [&](Device& d, Side s) {
    d.dropout_forward(x.r(s), y.r(s), m.b[s].as<std::uint8_t>(), rows, cols, 0.1f, key);
  });
  expect_bytes(B, "dropout mask", m);
  expect(B, "dropout forward", y, t);
  both(B, [&](Device& d, Side s) { d.dropout_backward(x.r(s), m.b[s].as<std::uint8_t>(), y.r(s), n, 0.1f); });
  expect(B, "dropout backward", y, t);
}

void attention(Bench& B, DType t, i64 d_head) {
  // GQA 4 query heads on 2 kv heads, s = 37, b = 2; packed [q | k | v] plus padding columns.
  AttnShape a;
  a.s = 37, a.b = 2, a.hq = 4, a.hkv = 2, a.d = d_head;
  a.q_off = 0, a.k_off = a.hq * a.d, a.v_off = a.k_off + a.hkv * a.d, a.ld = a.v_off + a.hkv * a.d + 3;
  a.scale = float(1.0 / std::sqrt(double(a.d)));
  const i64 T = a.s * a.b, np = a.b * a.hq * a.s * a.s, no = T * a.hq * a.d;
  const std::string tag = " d=" + std::to_string(d_head);
  P qkv = tensor(B, random_vec(T * a.ld, 18, -2, 2), t), probs = zeros(B, np, t), out = zeros(B, no, t);
  both(B, [&](Device& d, Side s) { d.attention_probs(qkv.r(s), a, probs.r(s)); });
  expect(B, "attention_probs" + tag, probs, t);
  both(B, [&](Device& d, Side s) { d.attention_pv(probs.r(s), qkv.r(s), a, out.r(s)); });
  expect(B, "attention_pv" + tag, out, t);
  P dout = tensor(B, random_vec(no, 19), t), scratch = zeros(B, 2 * a.s, DType::kFp32);
  for (bool drop : {false, true}) {
    P dropped = zeros(B, np, t), mask = raw(B, nullptr, np);
    if (drop) {
      both(B, [&](Device& d, Side s) {
        d.attention_dropout_forward(probs.r(s), dropped.r(s), mask.b[s].as<std::uint8_t>(), a, 0.2f, 5, 3, 4, 16);
      });
      expect_bytes(B, "attention dropout mask" + tag, mask);
      expect(B, "attention dropout" + tag, dropped, t);
    }
    P dqkv = tensor(B, random_vec(T * a.ld, 20), t);
    both(B, [&](Device& d, Side s) {
      d.attention_backward(qkv.r(s), probs.r(s), drop ? mask.b[s].as<std::uint8_t>() : nullptr, dropped.r(s), 0.2f,
                           dout.r(s), a, dqkv.r(s), scratch.f(s));
    });
    // The padding columns are not written: compare whole rows (they are equal on both sides).
    expect(B, std::string("attention_backward") + (drop ? " with dropout" : "") + tag, dqkv, t);
  }
  P fout = zeros(B, no, t), lse = zeros(B, a.b * a.hq * a.s, DType::kFp32);
  P dq2 = tensor(B, random_vec(T * a.ld, 21), t);
  both(B, [&](Device& d, Side s) { d.flash_attention_forward(qkv.r(s), a, fout.r(s), lse.f(s), scratch.f(s)); });
  expect(B, "flash forward" + tag, fout, t);
  expect(B, "flash log-sum-exp" + tag, lse, DType::kFp32);
  both(B, [&](Device& d, Side s) {
    d.flash_attention_backward(qkv.r(s), fout.r(s), lse.f(s), dout.r(s), a, dq2.r(s), scratch.f(s));
  });
  expect(B, "flash backward" + tag, dq2, t);
}

void embedding_ce_adam(Bench& B, DType t) {
  const i64 rows = 64, h = 96, v0 = 500, vrows = 250, vocab = 730;  // shard [500, 750) of 730: 20 padding rows
  std::vector<std::int32_t> ids(rows), tgt(rows);
  std::mt19937 rng(22);
  for (i64 r = 0; r < rows; ++r) ids[r] = std::int32_t(rng() % 800), tgt[r] = std::int32_t(rng() % vocab);
  for (i64 r = 0; r < rows; r += 5) ids[r] = 600;  // repeated ids
  P id = raw(B, ids.data(), rows * 4), tg = raw(B, tgt.data(), rows * 4);
  auto ip = [&](Side s) { return id.b[s].as<std::int32_t>(); };
  P table = tensor(B, random_vec(vrows * h, 23), t);
  for (bool acc : {false, true}) {
    P out = tensor(B, random_vec(rows * h, 24), t);
    both(B, [&](Device& d, Side s) { d.embedding_forward(ip(s), rows, table.r(s), v0, vrows, h, out.r(s), acc); });
    expect(B, std::string("embedding forward") + (acc ? " (accumulate)" : ""), out, t);
  }
  P dout = tensor(B, random_vec(rows * h, 25), t);
  both(B, [&](Device& d, Side s) { d.embedding_backward(ip(s), rows, dout.r(s), v0, vrows, h, table.r(s)); });
  expect(B, "embedding backward", table, t);

  P logits = tensor(B, random_vec(rows * vrows, 26, -6, 6), t), stats = zeros(B, 4 * rows, DType::kFp32);
  P sm = zeros(B, rows * vrows, DType::kFp32);
  both(B, [&](Device& d, Side s) {
    float* st = stats.f(s);
    const auto* tp = tg.b[s].as<std::int32_t>();
    d.ce_row_max(logits.r(s), rows, vrows, v0, vocab, st);
    d.ce_exp_sum(logits.r(s), st, tp, rows, vrows, v0, vocab, sm.f(s), st + rows, st + 2 * rows);
    d.ce_finish(sm.f(s), st + rows, st + 2 * rows, rows, vrows, st + 3 * rows);
  });
  expect(B, "cross-entropy statistics and loss", stats, DType::kFp32);
  expect(B, "cross-entropy softmax", sm, DType::kFp32);
  both(B, [&](Device& d, Side s) { d.ce_backward(sm.f(s), tg.b[s].as<std::int32_t>(), rows, vrows, v0, 0.125f); });
  expect(B, "cross-entropy backward", sm, DType::kFp32);

  const i64 n = 10001;
  P master = tensor(B, random_vec(n, 27), DType::kFp32), m = tensor(B, random_vec(n, 28, 0, 0.1f), DType::kFp32);
  P v = tensor(B, random_vec(n, 29, 0, 0.01f), DType::kFp32), g = tensor(B, random_vec(n, 30), t);
  P param = zeros(B, n, t);
  both(B, [&](Device& d, Side s) {
    d.adam(master.f(s), m.f(s), v.f(s), g.r(s), param.r(s), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 7, 0.5f);
  });
  expect(B, "adam master", master, DType::kFp32);
  expect(B, "adam m", m, DType::kFp32);
  expect(B, "adam v", v, DType::kFp32);
  expect(B, "adam parameter", param, t);
  double sq[2], w[2];
  for (Side s : {kCpu, kGpu}) B.dev[s]->checksums(g.r(s), n, 9, 100, &sq[s], &w[s]);
  report(B, std::string("checksums [") + dtype_name(t) + "]",
         std::max(std::abs(sq[1] - sq[0]) / std::abs(sq[0]), std::abs(w[1] - w[0]) / std::abs(w[0])), 1e-12);
}

}  // namespace

int main() {
  std::string why;
  if (!cuda_device_present(&why)) {
    std::printf("SKIP: no usable GPU (%s); the GPU kernel checks did not run\n", why.c_str());
    return 77;
  }
  Bench B;
  B.dev[kCpu] = make_cpu_device();
  B.mem[kCpu] = std::make_unique<HostMemory>();
  B.mem[kGpu] = make_cuda_memory(0);
  B.dev[kGpu] = make_cuda_device(0);
  for (Side s : {kCpu, kGpu}) B.alloc[s] = std::make_unique<TrackingAllocator>(B.mem[s].get());
  std::printf("%s vs %s: %s\n", B.dev[kGpu]->name().c_str(), B.dev[kCpu]->name().c_str(),
              cuda_device_info(0).name.c_str());
  std::printf("%-52s %10s  %8s\n", "check", "rel. error", "tol.");
  try {
    for (DType t : {DType::kFp32, DType::kBf16}) {
      elementwise(B, t);
      gemms(B, t);
      norms_rope_acts(B, t);
      dropouts(B, t);
      for (i64 d : {40, 64, 128, 256}) attention(B, t, d);
      embedding_ce_adam(B, t);
    }
  } catch (const std::exception& e) {
    std::printf("ERROR: %s\n", e.what());
    return 1;
  }
  const CudaMemoryReport mr = cuda_memory_report(*B.mem[kGpu]);
  std::printf("memory: pool peak %.1f MiB requested, %.1f MiB reserved; runtime %.1f MiB (%s)\n",
              double(mr.pool.peak_requested) / (1 << 20), double(mr.pool.peak_reserved) / (1 << 20),
              double(mr.runtime) / (1 << 20), mr.note.c_str());
  std::printf("%d checks, %d FAILED\n", B.checks, B.failures);
  return B.failures ? 1 : 0;
}
