// The CUDA device's kernel bodies run on the host against the CPU reference
// device, no GPU needed: the element/row/column items and their launch plans
// (validate/gpu/kernel_items.hpp) in plain loops, and the warp-per-row
// attention kernels (validate/gpu/attention_kernels.cuh) with each warp
// emulated by 32 fibers on one thread that meet at every shuffle. This checks the
// arithmetic and the index maps of every kernel the GPU runs; what it cannot
// check (CUDA launches, cuBLAS, memory transfers) is left to gpu_check_kernels.
// Part of paraplan_tests (plain C++, built with or without CUDA).
#include <catch2/catch.hpp>

#include <ucontext.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "validate/cpu/cpu_device.hpp"
#include "validate/gpu/attention_kernels.cuh"
#include "validate/gpu/kernel_items.hpp"

using namespace paraplan;
using namespace paraplan::validate;

namespace {

using i64 = std::int64_t;
using Vec = std::vector<float>;

// Runs an item over [0, n) on the host: the GPU runs the same item on a grid.
struct HostRun {
  template <class F>
  void operator()(const F& f, i64 n, const char*) const {
    for (i64 i = 0; i < n; ++i) f(i);
  }
};

Device& cpu() {
  static const std::unique_ptr<Device> d = make_cpu_device();
  return *d;
}

Vec random_vec(i64 n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(static_cast<std::size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

// A host tensor in fp32 or bf16 storage.
struct T {
  DType dtype;
  std::vector<float> f;
  std::vector<bf16> h;
  T(const Vec& v, DType t) : dtype(t) {
    if (t == DType::kFp32) f = v;
    else for (float x : v) h.push_back(to_bf16(x));
  }
  Ref ref() { return dtype == DType::kFp32 ? Ref(f.data()) : Ref(h.data()); }
  cuda::DRef d() { return cuda::DRef{ref().data, dtype == DType::kBf16}; }
  Vec values() const {
    if (dtype == DType::kFp32) return f;
    Vec v;
    for (bf16 x : h) v.push_back(to_float(x));
    return v;
  }
};

// max |got - want| / max |want| (normwise, so tiny reference entries do not
// dominate), against the tolerance for the storage type.
void expect_close(const char* what, const Vec& got, const Vec& want, DType t) {
  REQUIRE(got.size() == want.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    num = std::max(num, std::abs(double(got[i]) - want[i]));
    den = std::max(den, std::abs(double(want[i])));
  }
  const double err = num / std::max(den, 1e-30), tol = t == DType::kFp32 ? 1e-5 : 1e-2;
  INFO(what << ": relative error " << err << " (tolerance " << tol << ")");
  CHECK(err <= tol);
}
void expect_close(const char* what, T& got, T& want) { expect_close(what, got.values(), want.values(), got.dtype); }

}  // namespace

TEST_CASE("kernel items: data movement and elementwise match the CPU device", "[gpu-host]") {
  const DType t = GENERATE(DType::kFp32, DType::kBf16);
  const DType other = t == DType::kFp32 ? DType::kBf16 : DType::kFp32;
  INFO("dtype " << dtype_name(t));
  const i64 rows = 7, cols = 33, n = rows * cols;
  const Vec a = random_vec(n, 1), b = random_vec(n, 2), bias = random_vec(cols, 3);
  HostRun run;
  {
    T src(a, t), g(Vec(n), other), c(Vec(n), other);
    cuda::plan::copy(run, src.d(), g.d(), n);
    cpu().copy(src.ref(), c.ref(), n);
    expect_close("copy (converting)", g, c);
  }
  {
    T g(a, t), c(a, t);
    cuda::plan::fill(run, g.d(), n, 0.375f);
    cpu().fill(c.ref(), n, 0.375f);
    expect_close("fill", g, c);
  }
  {  // 3 x 5 block between row strides 33 and 9, converting
    T src(a, t), g(Vec(27, 0.5f), other), c(Vec(27, 0.5f), other);
    cuda::plan::copy_2d(run, cuda::DRef{src.ref().at(4).data, t == DType::kBf16}, cols, g.d(), 9, 3, 5);
    cpu().copy_2d(src.ref().at(4), cols, c.ref(), 9, 3, 5);
    expect_close("copy_2d", g, c);
  }
  {
    T x(a, t), y(b, t), g(Vec(n), t), c(Vec(n), t);
    cuda::plan::add(run, x.d(), y.d(), g.d(), n);
    cpu().add(x.ref(), y.ref(), c.ref(), n);
    expect_close("add", g, c);
  }
  {
    T x(a, t), g(b, t), c(b, t);
    cuda::plan::axpy(run, -0.7f, x.d(), g.d(), n);
    cpu().axpy(-0.7f, x.ref(), c.ref(), n);
    expect_close("axpy", g, c);
    cuda::plan::scale(run, g.d(), n, 1.3f);
    cpu().scale(c.ref(), n, 1.3f);
    expect_close("scale", g, c);
  }
  {
    T bs(bias, t), g(a, t), c(a, t);
    cuda::plan::add_bias(run, g.d(), bs.d(), rows, cols);
    cpu().add_bias(c.ref(), bs.ref(), rows, cols);
    expect_close("add_bias", g, c);
    T dy(b, t), gb(bias, t), cb(bias, t);
    cuda::plan::bias_backward(run, dy.d(), gb.d(), rows, cols);
    cpu().bias_backward(dy.ref(), cb.ref(), rows, cols);
    expect_close("bias_backward", gb, cb);
  }
}

TEST_CASE("kernel items: the fallback GEMM matches the CPU for every transpose, beta, stride", "[gpu-host]") {
  const DType t = GENERATE(DType::kFp32, DType::kBf16);
  const i64 m = 5, n = 6, k = 7, pad = 3;
  HostRun run;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (float beta : {0.0f, 1.0f}) {
        INFO("dtype " << dtype_name(t) << " ta " << ta << " tb " << tb << " beta " << beta);
        const i64 lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
        T A(random_vec((ta ? k : m) * lda, 4), t), B(random_vec((tb ? n : k) * ldb, 5), DType::kFp32);
        const Vec c0 = random_vec(m * ldc, 6);
        T g(c0, t), c(c0, t);
        cuda::plan::gemm_fallback(run, ta, tb, m, n, k, 0.5f, A.d(), lda, B.d(), ldb, beta, g.d(), ldc);
        cpu().gemm(ta, tb, m, n, k, 0.5f, A.ref(), lda, B.ref(), ldb, beta, c.ref(), ldc);
        expect_close("gemm", g, c);
      }
}

TEST_CASE("kernel items: RoPE, dropout and attention dropout match the CPU (masks bit for bit)", "[gpu-host]") {
  const DType t = GENERATE(DType::kFp32, DType::kBf16);
  INFO("dtype " << dtype_name(t));
  HostRun run;
  {  // 2 heads of 8 at column 4 of a 24-wide buffer; s = 5, b = 3; forward and inverse
    const i64 s = 5, b = 3, ld = 24;
    const Vec x = random_vec(s * b * ld, 7);
    for (bool inverse : {false, true}) {
      T g(x, t), c(x, t);
      cuda::plan::rope(run, g.d(), ld, 4, 2, 8, s, b, 10000.0f, inverse);
      cpu().rope(c.ref(), ld, 4, 2, 8, s, b, 10000.0f, inverse);
      expect_close("rope", g, c);
    }
  }
  {
    const i64 rows = 9, cols = 40, n = rows * cols;
    const DropoutKey key{1234, 17, 80};
    T x(random_vec(n, 8), t), g(Vec(n), t), c(Vec(n), t);
    std::vector<std::uint8_t> gm(n), cm(n);
    cuda::plan::dropout_forward(run, x.d(), g.d(), gm.data(), rows, cols, 0.3f, key.seed, key.row_key0, key.col0);
    cpu().dropout_forward(x.ref(), c.ref(), cm.data(), rows, cols, 0.3f, key);
    CHECK(gm == cm);
    expect_close("dropout_forward", g, c);
    T dy(random_vec(n, 9), t), gd(Vec(n), t), cd(Vec(n), t);
    cuda::plan::dropout_backward(run, dy.d(), gm.data(), gd.d(), n, 0.3f);
    cpu().dropout_backward(dy.ref(), cm.data(), cd.ref(), n, 0.3f);
    expect_close("dropout_backward", gd, cd);
  }
  {
    const AttnShape a{6, 2, 4, 2, 8, 64, 0, 32, 48, 0.35f};
    const i64 n = a.b * a.hq * a.s * a.s;
    T p(random_vec(n, 10, 0.0f, 1.0f), t), g(Vec(n, 9.0f), t), c(Vec(n, 9.0f), t);
    std::vector<std::uint8_t> gm(n, 7), cm(n, 7);
    const cuda::Attn ca{a.s, a.b, a.hq, a.hkv, a.d, a.ld, a.q_off, a.k_off, a.v_off, a.scale};
    cuda::plan::attention_dropout_forward(run, p.d(), g.d(), gm.data(), ca, 0.25f, 99, 3, 4, 16);
    cpu().attention_dropout_forward(p.ref(), c.ref(), cm.data(), a, 0.25f, 99, 3, 4, 16);
    CHECK(gm == cm);
    expect_close("attention_dropout_forward", g, c);
  }
}

TEST_CASE("kernel items: GeLU, SwiGLU and Adam match the CPU", "[gpu-host]") {
  const DType t = GENERATE(DType::kFp32, DType::kBf16);
  INFO("dtype " << dtype_name(t));
  HostRun run;
  const i64 rows = 6, f = 20;
  for (bool swiglu : {false, true}) {
    const i64 un = rows * f * (swiglu ? 2 : 1);
    T u(random_vec(un, 11, -3.0f, 3.0f), t), g(Vec(rows * f), t), c(Vec(rows * f), t);
    cuda::plan::act_forward(run, swiglu, u.d(), g.d(), rows, f);
    cpu().act_forward(swiglu ? ActKind::kSwiglu : ActKind::kGelu, u.ref(), c.ref(), rows, f);
    expect_close(swiglu ? "swiglu" : "gelu", g, c);
    T dg(random_vec(rows * f, 12), t), gd(Vec(un), t), cd(Vec(un), t);
    cuda::plan::act_backward(run, swiglu, u.d(), dg.d(), gd.d(), rows, f);
    cpu().act_backward(swiglu ? ActKind::kSwiglu : ActKind::kGelu, u.ref(), dg.ref(), cd.ref(), rows, f);
    expect_close(swiglu ? "swiglu backward" : "gelu backward", gd, cd);
  }
  {
    const i64 n = 50;
    Vec master = random_vec(n, 13), m = random_vec(n, 14, 0, 0.1f), v = random_vec(n, 15, 0, 0.01f);
    Vec gmaster = master, gm = m, gv = v;
    T grad(random_vec(n, 16), t), gp(Vec(n), t), cp(Vec(n), t);
    const int step = 3;
    const float bc1 = float(1.0 - std::pow(0.9, step)), bc2 = float(1.0 - std::pow(0.95, step));
    cuda::plan::adam(run, gmaster.data(), gm.data(), gv.data(), grad.d(), gp.d(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, bc1,
                     bc2, 0.5f);
    cpu().adam(master.data(), m.data(), v.data(), grad.ref(), cp.ref(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, step, 0.5f);
    expect_close("adam master", gmaster, master, DType::kFp32);
    expect_close("adam m", gm, m, DType::kFp32);
    expect_close("adam v", gv, v, DType::kFp32);
    expect_close("adam param", gp, cp);
  }
}

TEST_CASE("kernel items: checksums, embedding forward and backward (repeated ids) match the CPU", "[gpu-host]") {
  const DType t = GENERATE(DType::kFp32, DType::kBf16);
  INFO("dtype " << dtype_name(t));
  HostRun run;
  {
    const i64 n = 10007;
    T x(random_vec(n, 17), t);
    std::vector<double> partials(2 * cuda::kChecksumParts + 2);
    cuda::plan::checksums(run, x.d(), n, 42, 100, partials.data());
    double sq = 0, w = 0;
    cpu().checksums(x.ref(), n, 42, 100, &sq, &w);
    CHECK(partials[2 * cuda::kChecksumParts] == Approx(sq).epsilon(1e-12));
    CHECK(partials[2 * cuda::kChecksumParts + 1] == Approx(w).epsilon(1e-9));
  }
  {
    // This rank holds vocabulary rows [10, 16); ids repeat and fall outside.
    const i64 rows = 12, h = 9, v0 = 10, vrows = 6;
    const std::vector<std::int32_t> ids{10, 15, 3, 12, 10, 15, 15, 20, 11, 12, 10, 16};
    T table(random_vec(vrows * h, 18), t);
    for (bool acc : {false, true}) {
      const Vec out0 = random_vec(rows * h, 19);
      T g(out0, t), c(out0, t);
      cuda::plan::embedding_forward(run, ids.data(), rows, table.d(), v0, vrows, h, g.d(), acc);
      cpu().embedding_forward(ids.data(), rows, table.ref(), v0, vrows, h, c.ref(), acc);
      expect_close("embedding_forward", g, c);
    }
    const Vec dt0 = random_vec(vrows * h, 20);
    T dout(random_vec(rows * h, 21), t), g(dt0, t), c(dt0, t);
    std::vector<std::int32_t> link(2 * rows);
    cuda::plan::embedding_backward(run, ids.data(), rows, dout.d(), v0, vrows, h, g.d(), link.data());
    cpu().embedding_backward(ids.data(), rows, dout.ref(), v0, vrows, h, c.ref());
    CHECK(g.values() == c.values());  // same order of fp32 sums, one rounding: bit for bit
    CHECK(link[0] == 4);              // row 0 (id 10) continues at row 4, then 10
    CHECK(link[4] == 10);
    CHECK(link[10] == -1);
    CHECK(link[rows + 0] == 1);
    CHECK(link[rows + 4] == 0);
    CHECK(link[rows + 2] == 0);  // id 3 is not in this shard
  }
}

TEST_CASE("kernel items: LayerNorm and RMSNorm forward and backward match the CPU", "[gpu-host]") {
  const DType t = GENERATE(DType::kFp32, DType::kBf16);
  HostRun run;
  const i64 rows = 8, cols = 48;
  for (bool rms : {false, true})
    for (bool acc : {false, true}) {
      INFO("dtype " << dtype_name(t) << (rms ? " rms" : " layernorm") << (acc ? " accumulate" : ""));
      const NormKind kind = rms ? NormKind::kRmsNorm : NormKind::kLayerNorm;
      T x(random_vec(rows * cols, 22, -2.0f, 3.0f), t), gamma(random_vec(cols, 23, 0.5f, 1.5f), t),
          beta(random_vec(cols, 24), t);
      T gy(Vec(rows * cols), t), cy(Vec(rows * cols), t);
      cuda::plan::norm_forward(run, rms, x.d(), gamma.d(), rms ? cuda::DRef{} : beta.d(), gy.d(), rows, cols, 1e-5f);
      cpu().norm_forward(kind, x.ref(), gamma.ref(), rms ? Ref() : beta.ref(), cy.ref(), rows, cols, 1e-5f);
      expect_close("norm_forward", gy, cy);

      const Vec dx0 = random_vec(rows * cols, 25), dg0 = random_vec(cols, 26), db0 = random_vec(cols, 27);
      T dy(random_vec(rows * cols, 28), t), gdx(dx0, t), cdx(dx0, t), gdg(dg0, t), cdg(dg0, t), gdb(db0, t),
          cdb(db0, t);
      std::vector<float> stats(2 * rows);
      cuda::plan::norm_backward(run, rms, x.d(), gamma.d(), dy.d(), gdx.d(), acc, gdg.d(), gdb.d(), rows, cols,
                                1e-5f, stats.data());
      cpu().norm_backward(kind, x.ref(), gamma.ref(), dy.ref(), cdx.ref(), acc, cdg.ref(), cdb.ref(), rows, cols,
                          1e-5f);
      expect_close("norm_backward dx", gdx, cdx);
      expect_close("norm_backward dgamma", gdg, cdg);
      expect_close("norm_backward dbeta", gdb, cdb);  // RMSNorm: both leave dbeta as it was
    }
}

TEST_CASE("kernel items: vocab-parallel cross-entropy matches the CPU, padding columns ignored", "[gpu-host]") {
  const DType t = GENERATE(DType::kFp32, DType::kBf16);
  INFO("dtype " << dtype_name(t));
  HostRun run;
  // Shard [v0, v0 + vl) = [8, 16) of a vocabulary of 13: columns 5..7 are padding.
  const i64 rows = 5, vl = 8, v0 = 8, vocab = 13;
  const std::vector<std::int32_t> targets{9, 2, 12, 8, 15};
  T logits(random_vec(rows * vl, 29, -4.0f, 4.0f), t);
  Vec gmax(rows), cmax(rows);
  cuda::plan::ce_row_max(run, logits.d(), rows, vl, v0, vocab, gmax.data());
  cpu().ce_row_max(logits.ref(), rows, vl, v0, vocab, cmax.data());
  CHECK(gmax == cmax);
  Vec gs(rows * vl), cs(rows * vl), gsum(rows), csum(rows), gt(rows), ct(rows), gl(rows), cl(rows);
  cuda::plan::ce_exp_sum(run, logits.d(), gmax.data(), targets.data(), rows, vl, v0, vocab, gs.data(), gsum.data(),
                         gt.data());
  cpu().ce_exp_sum(logits.ref(), cmax.data(), targets.data(), rows, vl, v0, vocab, cs.data(), csum.data(), ct.data());
  expect_close("ce softmax", gs, cs, DType::kFp32);
  expect_close("ce row_sum", gsum, csum, DType::kFp32);
  expect_close("ce target_logit", gt, ct, DType::kFp32);
  CHECK(gt[1] == 0.0f);  // target 2 is in another shard
  cuda::plan::ce_finish(run, gs.data(), gsum.data(), gt.data(), rows, vl, gl.data());
  cpu().ce_finish(cs.data(), csum.data(), ct.data(), rows, vl, cl.data());
  expect_close("ce loss", gl, cl, DType::kFp32);
  expect_close("ce probabilities", gs, cs, DType::kFp32);
  cuda::plan::ce_backward(run, gs.data(), targets.data(), rows, vl, v0, 0.25f);
  cpu().ce_backward(cs.data(), targets.data(), rows, vl, v0, 0.25f);
  expect_close("ce backward", gs, cs, DType::kFp32);
}

TEST_CASE("kernel items: bf16 conversion and the hash equal validate's", "[gpu-host]") {
  for (float x : {0.0f, -0.0f, 1.0f, 1.00390625f, 1.0058594f, 3.14159f, -65504.0f, 1e-40f, INFINITY, NAN}) {
    INFO("x " << x);
    CHECK(cuda::f32_to_bf16(x) == to_bf16(x).bits);
  }
  for (std::uint16_t b : {std::uint16_t(0x3f80), std::uint16_t(0xc2f7), std::uint16_t(0x0001)})
    CHECK(cuda::bf16_to_f32(b) == to_float(bf16{b}));
  for (i64 row : {i64(0), i64(7), i64(1) << 40})
    for (i64 col : {i64(0), i64(3), i64(123456789)}) {
      CHECK(cuda::hash_mix(99, row, col) == hash_mix(99, row, col));
      CHECK(cuda::hash_uniform(99, row, col) == hash_uniform(99, row, col));
    }
}

// ---------------------------------------------------------------- attention: emulated warps

namespace paraplan::validate::cuda::warp {
namespace {

// One warp as 32 fibers on this thread (ucontext). A barrier passes control to
// the next lane; lane 31 hands back to lane 0. Every lane of a warp meets the
// same barriers (the kernels' control flow is uniform across the warp), so when
// a lane resumes, all 32 have arrived: round-robin scheduling is the barrier.
struct FiberWarp {
  static constexpr std::size_t kStack = 256 * 1024;
  ucontext_t main_ctx{};
  ucontext_t lane_ctx[32]{};
  std::vector<char> stack[32];
  std::function<void()> body;
  unsigned lane = 0;  // running now
  float slot[32] = {};
};
FiberWarp* g_warp = nullptr;

void lane_entry(int l) {
  g_warp->body();
  // Finished: lanes above are waiting at their last barrier; let them finish too.
  ucontext_t* next = l < 31 ? &g_warp->lane_ctx[l + 1] : &g_warp->main_ctx;
  g_warp->lane = unsigned(l + 1) % 32;
  swapcontext(&g_warp->lane_ctx[l], next);
}

void barrier() {
  const unsigned l = g_warp->lane, next = (l + 1) % 32;
  g_warp->lane = next;
  swapcontext(&g_warp->lane_ctx[l], &g_warp->lane_ctx[next]);
}

}  // namespace

// A grid of one block of one warp: the kernel's item loop walks every item.
unsigned thread_x() { return g_warp->lane; }
unsigned block_idx_x() { return 0; }
unsigned block_x() { return 32; }
unsigned grid_x() { return 1; }
float shfl_xor(float v, int lane_mask) {
  const unsigned l = g_warp->lane;
  g_warp->slot[l] = v;
  barrier();  // every lane has written
  const float other = g_warp->slot[l ^ unsigned(lane_mask)];
  barrier();  // every lane has read
  return other;
}
void sync() { barrier(); }

// Runs body() as the 32 lanes of one warp; returns when all have finished.
void run_warp(std::function<void()> body) {
  FiberWarp w;
  w.body = std::move(body);
  g_warp = &w;
  for (int l = 0; l < 32; ++l) {
    w.stack[l].resize(FiberWarp::kStack);
    getcontext(&w.lane_ctx[l]);
    w.lane_ctx[l].uc_stack.ss_sp = w.stack[l].data();
    w.lane_ctx[l].uc_stack.ss_size = FiberWarp::kStack;
    w.lane_ctx[l].uc_link = nullptr;
    makecontext(&w.lane_ctx[l], reinterpret_cast<void (*)()>(&lane_entry), 1, l);
  }
  w.lane = 0;
  swapcontext(&w.main_ctx, &w.lane_ctx[0]);
  g_warp = nullptr;
}

}  // namespace paraplan::validate::cuda::warp

namespace {

// Runs a kernel as one emulated warp; each call is one launch.
struct WarpLaunch {
  template <class... K, class... A>
  void operator()(void (*kernel)(K...), i64, const A&... args) const {
    cuda::warp::run_warp([&] { kernel(args...); });
  }
};

cuda::Attn attn_of(const AttnShape& a) {
  return cuda::Attn{a.s, a.b, a.hq, a.hkv, a.d, a.ld, a.q_off, a.k_off, a.v_off, a.scale};
}

}  // namespace

TEST_CASE("attention kernels (emulated warps): probs, P V, backward with and without dropout, flash", "[gpu-host]") {
  const DType t = GENERATE(DType::kFp32, DType::kBf16);
  // GQA: 4 query heads on 2 kv heads, s = 6, b = 2; head widths for 2 and 4 values per lane
  // (40: lanes 8..31 hold padding in their second slot).
  const i64 d = GENERATE(i64(40), i64(128));
  INFO("dtype " << dtype_name(t) << " d " << d);
  AttnShape a;
  a.s = 6, a.b = 2, a.hq = 4, a.hkv = 2, a.d = d;
  a.q_off = 0, a.k_off = a.hq * d, a.v_off = a.k_off + a.hkv * d, a.ld = a.v_off + a.hkv * d + 3;
  a.scale = float(1.0 / std::sqrt(double(d)));
  const cuda::Attn ca = attn_of(a);
  const i64 tokens = a.s * a.b, np = a.b * a.hq * a.s * a.s, no = tokens * a.hq * d;
  const WarpLaunch launch;

  T qkv(random_vec(tokens * a.ld, 40, -2.0f, 2.0f), t), gp(Vec(np, 5.0f), t), cp(Vec(np, 5.0f), t);
  cuda::attn::probs_plan(launch, qkv.d(), ca, gp.d());
  cpu().attention_probs(qkv.ref(), a, cp.ref());
  expect_close("attention_probs", gp, cp);

  T go(Vec(no), t), co(Vec(no), t);
  cuda::attn::pv_plan(launch, cp.d(), qkv.d(), ca, go.d());
  cpu().attention_pv(cp.ref(), qkv.ref(), a, co.ref());
  expect_close("attention_pv", go, co);

  T dout(random_vec(no, 41), t);
  Vec scratch(2 * a.s);
  for (bool drop : {false, true}) {
    INFO((drop ? "with" : "without") << " dropout");
    T dropped(Vec(np), t);
    std::vector<std::uint8_t> mask(np);
    if (drop) cpu().attention_dropout_forward(cp.ref(), dropped.ref(), mask.data(), a, 0.25f, 7, 0, 0, a.hq);
    const Vec dq0 = random_vec(tokens * a.ld, 42);
    T gd(dq0, t), cd(dq0, t);
    cuda::attn::backward_plan(launch, qkv.d(), cp.d(), drop ? mask.data() : nullptr, dropped.d(), 0.25f, dout.d(), ca,
                              gd.d());
    cpu().attention_backward(qkv.ref(), cp.ref(), drop ? mask.data() : nullptr, dropped.ref(), 0.25f, dout.ref(), a,
                             cd.ref(), scratch.data());
    expect_close("attention_backward", gd, cd);
  }

  T gf(Vec(no), t), cf(Vec(no), t);
  Vec glse(a.b * a.hq * a.s), clse(a.b * a.hq * a.s);
  cuda::attn::flash_forward_plan(launch, qkv.d(), ca, gf.d(), glse.data());
  cpu().flash_attention_forward(qkv.ref(), a, cf.ref(), clse.data(), scratch.data());
  expect_close("flash forward", gf, cf);
  expect_close("flash lse", glse, clse, DType::kFp32);
  const Vec dq0 = random_vec(tokens * a.ld, 43);
  T gd(dq0, t), cd(dq0, t);
  cuda::attn::flash_backward_plan(launch, qkv.d(), cf.d(), clse.data(), dout.d(), ca, gd.d());
  cpu().flash_attention_backward(qkv.ref(), cf.ref(), clse.data(), dout.ref(), a, cd.ref(), scratch.data());
  expect_close("flash backward", gd, cd);
}

TEST_CASE("attention kernels: shapes the GPU does not take are refused", "[gpu-host]") {
  const WarpLaunch launch;
  cuda::Attn a{4, 1, 3, 2, 64, 320, 0, 192, 256, 0.125f};  // 3 query heads on 2 kv heads
  CHECK_THROWS_AS(cuda::attn::probs_plan(launch, cuda::DRef{}, a, cuda::DRef{}), std::invalid_argument);
  a.hq = 4, a.d = 512;  // wider than kMaxAttnHeadDim
  CHECK_THROWS_AS(cuda::attn::probs_plan(launch, cuda::DRef{}, a, cuda::DRef{}), std::invalid_argument);
}
