#include "validate/calibrate.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <tuple>

#include "costmodel/flops.hpp"
#include "costmodel/spec.hpp"
#include "costmodel/time.hpp"
#include "validate/executor.hpp"

namespace paraplan::validate {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Deterministic values in [-0.5, 0.5): no denormals, no overflow in any kernel.
void fill_values(Device& dev, Ref dst, std::int64_t n, std::uint64_t seed) {
  std::vector<float> host(std::size_t(std::max<std::int64_t>(n, 0)));
  for (std::int64_t i = 0; i < n; ++i) host[std::size_t(i)] = float(hash_uniform(seed, 0, i) - 0.5);
  dev.from_host(host.data(), dst, n);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The median of `repetitions` runs of `op`: each queues as many calls as fill
// min_seconds (estimated from one timed call) and waits once at the end, so
// that a GPU runs them back to back as in training.
template <class Op>
double time_local(Device& dev, const TimingOptions& o, Op&& op) {
  for (int i = 0; i < o.warmup; ++i) op();
  dev.synchronize();
  auto t0 = Clock::now();
  op();
  dev.synchronize();
  const double estimate = std::max(since(t0), 1e-8);
  const auto iters = std::int64_t(std::clamp(std::ceil(o.min_seconds / estimate), 1.0, 1e6));
  std::vector<double> runs;
  for (int r = 0; r < std::max(1, o.repetitions); ++r) {
    t0 = Clock::now();
    for (std::int64_t i = 0; i < iters; ++i) op();
    dev.synchronize();
    runs.push_back(since(t0) / double(iters));
  }
  return median(runs);
}

// ---- the GEMMs of a layer, as the executor calls them ----

struct LayerShape {
  const char* name;
  int hidden, heads, kv_heads, ffn, vocab;
  bool swiglu;
};

Model model_of(const LayerShape& s) {
  Model m;
  m.name = s.name;
  m.num_layers = 1;
  m.hidden_size = s.hidden;
  m.num_attention_heads = s.heads;
  m.num_kv_heads = s.kv_heads;
  m.head_dim = s.hidden / s.heads;
  m.ffn_hidden_size = s.ffn;
  m.vocab_size = s.vocab;
  m.activation = s.swiglu ? Activation::kSwiglu : Activation::kGelu;
  return m;
}

// Forward y[T,out] = x[T,in] W[out,in]^T, input gradient dx[T,in] = dy[T,out] W,
// weight gradient dW[out,in] += dy[T,out]^T x[T,in] (validate/layer.cpp).
void add_linear(std::vector<GemmCase>* out, const std::string& name, const Gemm& g) {
  const auto T = std::int64_t(g.m), o = std::int64_t(g.n), i = std::int64_t(g.k);
  out->push_back({name + " fwd", T, o, i, false, true, false});
  out->push_back({name + " dgrad", T, i, o, false, false, false});
  out->push_back({name + " wgrad", o, i, T, true, false, true});
}

void add_layer(std::vector<GemmCase>* out, const LayerShape& s, std::int64_t tokens, int tp) {
  const Model m = model_of(s);
  const std::string prefix = std::string(s.name) + " t" + std::to_string(tokens) + " tp" + std::to_string(tp) + " ";
  for (const Gemm& g : layer_gemms(m, 1, double(tokens), tp))
    if (!g.core_attention) add_linear(out, prefix + g.name, g);
  add_linear(out, prefix + "logits", logits_gemm(m, 1, double(tokens), tp));
}

}  // namespace

std::vector<GemmCase> gemm_cases(bool quick, bool training_shapes) {
  // The validator's test models (tests/data/validate/gpt-small.yaml, llama-small.yaml).
  static const LayerShape kGpt{"gpt-small", 64, 4, 4, 256, 250, false};
  static const LayerShape kLlama{"llama-small", 64, 4, 2, 96, 253, true};
  static const LayerShape kLarge[] = {{"h256", 256, 4, 4, 1024, 1024, false}};
  // A GPU's GEMMs at the shapes of real training (configs/models/llama-2-7b.yaml:
  // hidden 4096, 32 heads, ffn 11008, vocab 32000), a 4096-token micro-batch.
  static const LayerShape kLlama2_7b{"llama-2-7b", 4096, 32, 32, 11008, 32000, true};
  std::vector<GemmCase> v;
  for (const LayerShape* s : {&kGpt, &kLlama})
    for (std::int64_t tokens : quick ? std::vector<std::int64_t>{64} : std::vector<std::int64_t>{64, 128})
      for (int tp : quick ? std::vector<int>{1} : std::vector<int>{1, 2}) add_layer(&v, *s, tokens, tp);
  for (const LayerShape& s : kLarge) add_layer(&v, s, quick ? 256 : 512, 1);
  for (std::int64_t n : quick ? std::vector<std::int64_t>{256, 512} : std::vector<std::int64_t>{256, 512, 1024})
    v.push_back({"square " + std::to_string(n), n, n, n, false, false, false});
  if (training_shapes) {
    for (int tp : quick ? std::vector<int>{1} : std::vector<int>{1, 2, 8}) add_layer(&v, kLlama2_7b, 4096, tp);
    for (std::int64_t n : quick ? std::vector<std::int64_t>{4096} : std::vector<std::int64_t>{2048, 4096, 8192})
      v.push_back({"square " + std::to_string(n), n, n, n, false, false, false});
  }
  // The same call from two layers is measured once.
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, bool, bool, bool>> seen;
  std::vector<GemmCase> out;
  for (const GemmCase& c : v)
    if (seen.insert({c.m, c.n, c.k, c.trans_a, c.trans_b, c.accumulate}).second) out.push_back(c);
  return out;
}

std::vector<GemmSample> measure_gemms(Device& dev, MemoryResource& mem, const std::vector<GemmCase>& cases,
                                      DType dtype, const TimingOptions& opt) {
  std::vector<GemmSample> out;
  const std::int64_t e = storage_bytes(dtype);
  for (const GemmCase& c : cases) {
    Scratch a(mem, c.m * c.k * e), b(mem, c.k * c.n * e), y(mem, c.m * c.n * e);
    fill_values(dev, a.ref(dtype), c.m * c.k, 1);
    fill_values(dev, b.ref(dtype), c.k * c.n, 2);
    dev.fill(y.ref(dtype), c.m * c.n, 0.0f);
    // Row-major strides of the stored (untransposed) matrices.
    const std::int64_t lda = c.trans_a ? c.m : c.k, ldb = c.trans_b ? c.k : c.n;
    const float beta = c.accumulate ? 1.0f : 0.0f;
    // Accumulating calls scale by a tiny alpha so that C stays bounded.
    const float alpha = c.accumulate ? 1e-6f : 1.0f;
    GemmSample s;
    s.shape = c;
    s.dtype = dtype;
    s.seconds = time_local(dev, opt, [&] {
      dev.gemm(c.trans_a, c.trans_b, c.m, c.n, c.k, alpha, a.ref(dtype), lda, b.ref(dtype), ldb, beta,
               y.ref(dtype), c.n);
    });
    out.push_back(s);
  }
  return out;
}

// ---- copies ----

std::vector<std::int64_t> copy_sizes(bool quick) {
  if (quick) return {std::int64_t(1) << 23};
  return {std::int64_t(1) << 24, std::int64_t(1) << 25};  // 64 / 128 MiB of fp32
}

std::vector<CopySample> measure_copies(Device& dev, MemoryResource& mem, const std::vector<std::int64_t>& elements,
                                       DType dtype, const TimingOptions& opt) {
  std::vector<CopySample> out;
  for (std::int64_t n : elements) {
    Scratch a(mem, n * storage_bytes(dtype)), b(mem, n * storage_bytes(dtype));
    fill_values(dev, a.ref(dtype), n, 1);
    CopySample s;
    s.elements = n;
    s.dtype = dtype;
    s.seconds = time_local(dev, opt, [&] { dev.copy(a.ref(dtype), b.ref(dtype), n); });
    out.push_back(s);
  }
  return out;
}

// ---- the work outside the GEMMs ----

const char* work_kind_name(WorkKind k) {
  switch (k) {
    case WorkKind::kLayer: return "layer";
    case WorkKind::kEnds: return "embedding+output";
    case WorkKind::kAdam: return "adam";
  }
  return "?";
}

namespace {

struct WorkModel {
  Model model;
  bool flash = false;
};

// GPT-2 style (GeLU, LayerNorm, biases, learned positions, tied embeddings,
// dropout 0.1) or Llama style (SwiGLU, RMSNorm, RoPE, GQA, untied, no dropout).
WorkModel work_model(const char* name, bool gpt, int hidden, int heads, int kv, int ffn, int vocab) {
  Model m;
  m.name = name;
  m.num_layers = 4;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_kv_heads = kv;
  m.head_dim = hidden / heads;
  m.ffn_hidden_size = ffn;
  m.vocab_size = vocab;
  m.activation = gpt ? Activation::kGelu : Activation::kSwiglu;
  m.normalization = gpt ? Normalization::kLayerNorm : Normalization::kRmsNorm;
  m.tie_embeddings = gpt;
  m.bias = gpt;
  m.position_embedding = gpt ? PositionEmbedding::kLearned : PositionEmbedding::kRope;
  m.max_position_embeddings = gpt ? 1024 : 0;
  m.hidden_dropout = m.attention_dropout = gpt ? 0.1 : 0.0;
  return {m, !gpt};
}

const std::vector<WorkModel>& models() {
  static const std::vector<WorkModel> v{
      work_model("gpt-small", true, 64, 4, 4, 256, 250),     // tests/data/validate/gpt-small.yaml
      work_model("llama-small", false, 64, 4, 2, 96, 253),   // tests/data/validate/llama-small.yaml
      work_model("gpt-h256", true, 256, 4, 4, 1024, 1024),
      work_model("llama-h256", false, 256, 4, 2, 512, 1024)};
  return v;
}

const WorkModel& find_model(const std::string& name) {
  for (const WorkModel& w : models())
    if (w.model.name == name) return w;
  throw std::invalid_argument("calibrate: unknown work model " + name);
}

// One rank, micro-batch size 1, the model's own layer count unless given.
Spec work_spec(const WorkModel& w, int seq, DType dtype, const Cluster& c, int layers = 0) {
  Spec s;
  s.model = w.model;
  if (layers > 0) s.model.num_layers = layers;
  s.cluster = c;
  s.cluster.gpus_per_node = 1;
  s.num_nodes = 1;
  s.training.seq_length = seq;
  s.training.global_batch_size = 1;
  s.training.flash_attention = w.flash;
  set_precision(&s.training, dtype);
  s.training.framework = Framework::kParaplan;  // the work runs on paraplan's own executor
  return s;
}

Layout one_rank() {
  Layout l;
  l.dp = 1;
  return l;
}

// The executor's kernels of one piece of work (validate/layer.cpp, head.cpp,
// executor.cpp), on buffers from `mem`: named operations timed one by one
// after one run of all of them in order (so that backward inputs exist).
class WorkRunner {
 public:
  WorkRunner(Device& dev, MemoryResource& mem, const WorkModel& w, int seq, DType dt)
      : dev_(dev), mem_(mem), m_(w.model), flash_(w.flash), dt_(dt), s_(seq) {
    h_ = m_.hidden_size, q_ = m_.q_width(), kv_ = m_.kv_width(), nqkv_ = q_ + 2 * kv_;
    f_ = m_.ffn_hidden_size, fin_ = m_.ffn_in_width(), V_ = m_.vocab_size;
  }

  std::vector<std::pair<std::string, double>> run(WorkKind k, const TimingOptions& opt) {
    ops_.clear();
    if (k == WorkKind::kLayer) layer();
    if (k == WorkKind::kEnds) ends();
    if (k == WorkKind::kAdam) adam();
    for (auto& [name, op] : ops_) op();
    std::vector<std::pair<std::string, double>> out;
    for (auto& [name, op] : ops_) {
      double t = time_local(dev_, opt, op);
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == name; });
      if (it == out.end()) out.emplace_back(name, t);
      else it->second += t;
    }
    return out;
  }

 private:
  Ref buf(std::int64_t n, DType t, std::uint64_t seed = 0) {
    bufs_.push_back(std::make_unique<Scratch>(mem_, std::max<std::int64_t>(n, 1) * storage_bytes(t)));
    const Ref r = bufs_.back()->ref(t);
    if (seed) fill_values(dev_, r, n, seed);
    else dev_.fill(r, n, 0.0f);
    return r;
  }
  std::uint8_t* bytes(std::int64_t n) {
    bufs_.push_back(std::make_unique<Scratch>(mem_, n));
    return bufs_.back()->bytes();
  }
  std::int32_t* ids(std::int64_t n, std::uint64_t seed) {
    std::vector<std::int32_t> host(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) host[std::size_t(i)] = std::int32_t(hash_mix(seed, 0, i) % std::uint64_t(V_));
    auto* p = reinterpret_cast<std::int32_t*>(bytes(n * 4));
    dev_.upload(host.data(), p, n * 4);
    return p;
  }
  void op(std::string name, std::function<void()> f) { ops_.emplace_back(std::move(name), std::move(f)); }
  NormKind norm() const { return m_.normalization == Normalization::kRmsNorm ? NormKind::kRmsNorm : NormKind::kLayerNorm; }
  ActKind act() const { return m_.activation == Activation::kSwiglu ? ActKind::kSwiglu : ActKind::kGelu; }

  // Hidden dropout as the executor applies it: one call per sequence position.
  void dropout_rows(const std::string& name, Ref x, std::uint8_t* mask) {
    op(name, [=, this] {
      for (std::int64_t i = 0; i < s_; ++i)
        dev_.dropout_forward(x.at(i * h_), x.at(i * h_), mask + i * h_, 1, h_, 0.1f, DropoutKey{7, i, 0});
    });
  }

  void layer() {
    const std::int64_t T = s_, hq = m_.num_attention_heads, hkv = m_.num_kv_heads, d = m_.head_dim;
    const bool drop = m_.hidden_dropout > 0, bias = m_.bias, rope = m_.position_embedding == PositionEmbedding::kRope;
    const AttnShape a{s_, 1, hq, hkv, d, nqkv_, 0, q_, q_ + kv_, float(1.0 / std::sqrt(double(d)))};
    const Ref x = buf(T * h_, dt_, 11), gam = buf(h_, dt_, 12), bet = buf(h_, dt_, 13), n1 = buf(T * h_, dt_, 14);
    const Ref qkv = buf(T * nqkv_, dt_, 15), bq = buf(nqkv_, dt_, 16), ctx = buf(T * q_, dt_, 17);
    const Ref y = buf(T * h_, dt_, 18), bh = buf(h_, dt_, 19), x1 = buf(T * h_, dt_), u = buf(T * fin_, dt_, 20);
    const Ref bu = buf(fin_, dt_, 21), g = buf(T * f_, dt_, 22), out = buf(T * h_, dt_), dg = buf(T * f_, dt_, 23);
    const Ref du = buf(T * fin_, dt_), dx = buf(T * h_, dt_), dqkv = buf(T * nqkv_, dt_), dctx = buf(T * q_, dt_, 24);
    const Ref dgam = buf(h_, dt_), dbet = buf(h_, dt_), dbias = buf(std::max(nqkv_, fin_), dt_);
    float* scratch = buf(2 * s_, DType::kFp32).f32();
    std::uint8_t *mask1 = bytes(T * h_), *mask2 = bytes(T * h_);
    const Ref nb = bias ? bet : Ref();
    // ---- forward ----
    op("norm", [=, this] { dev_.norm_forward(norm(), x, gam, nb, n1, T, h_, 1e-5f); });
    if (bias) op("bias", [=, this] { dev_.add_bias(qkv, bq, T, nqkv_); });
    if (rope)
      op("rope", [=, this] {
        dev_.rope(qkv, nqkv_, 0, hq, d, s_, 1, 10000.0f, false);
        dev_.rope(qkv, nqkv_, q_, hkv, d, s_, 1, 10000.0f, false);
      });
    Ref probs, dropped;
    std::uint8_t* amask = nullptr;
    float* lse = nullptr;
    if (flash_) {
      lse = buf(hq * s_, DType::kFp32).f32();
      op("attention", [=, this] { dev_.flash_attention_forward(qkv, a, ctx, lse, scratch); });
    } else {
      probs = buf(hq * s_ * s_, dt_), dropped = buf(hq * s_ * s_, dt_), amask = bytes(hq * s_ * s_);
      op("attention", [=, this] {
        dev_.attention_probs(qkv, a, probs);
        dev_.attention_dropout_forward(probs, dropped, amask, a, float(m_.attention_dropout), 9, 0, 0, hq);
        dev_.attention_pv(dropped, qkv, a, ctx);
      });
    }
    if (bias) op("bias", [=, this] { dev_.add_bias(y, bh, T, h_); });
    if (drop) dropout_rows("dropout", y, mask1);
    op("add", [=, this] { dev_.add(x, y, x1, T * h_); });
    op("norm", [=, this] { dev_.norm_forward(norm(), x1, gam, nb, n1, T, h_, 1e-5f); });
    if (bias) op("bias", [=, this] { dev_.add_bias(u, bu, T, fin_); });
    op("activation", [=, this] { dev_.act_forward(act(), u, g, T, f_); });
    if (bias) op("bias", [=, this] { dev_.add_bias(y, bh, T, h_); });
    if (drop) dropout_rows("dropout", y, mask2);
    op("add", [=, this] { dev_.add(x1, y, out, T * h_); });
    // ---- backward ----
    if (drop) op("dropout", [=, this] { dev_.dropout_backward(out, mask2, y, T * h_, 0.1f); });
    if (bias) op("bias", [=, this] { dev_.bias_backward(y, dbias, T, h_); });
    op("activation", [=, this] { dev_.act_backward(act(), u, dg, du, T, f_); });
    if (bias) op("bias", [=, this] { dev_.bias_backward(du, dbias, T, fin_); });
    op("norm", [=, this] { dev_.norm_backward(norm(), x1, gam, y, dx, false, dgam, dbet, T, h_, 1e-5f); });
    if (drop) op("dropout", [=, this] { dev_.dropout_backward(dx, mask1, y, T * h_, 0.1f); });
    if (bias) op("bias", [=, this] { dev_.bias_backward(y, dbias, T, h_); });
    if (flash_)
      op("attention", [=, this] { dev_.flash_attention_backward(qkv, ctx, lse, dctx, a, dqkv, scratch); });
    else
      op("attention", [=, this] {
        dev_.attention_backward(qkv, probs, amask, dropped, float(m_.attention_dropout), dctx, a, dqkv, scratch);
      });
    if (rope)
      op("rope", [=, this] {
        dev_.rope(dqkv, nqkv_, 0, hq, d, s_, 1, 10000.0f, true);
        dev_.rope(dqkv, nqkv_, q_, hkv, d, s_, 1, 10000.0f, true);
      });
    if (bias) op("bias", [=, this] { dev_.bias_backward(dqkv, dbias, T, nqkv_); });
    op("norm", [=, this] { dev_.norm_backward(norm(), x, gam, y, dx, false, dgam, dbet, T, h_, 1e-5f); });
  }

  void ends() {
    const std::int64_t T = s_;
    const Ref table = buf(V_ * h_, dt_, 31), dtable = buf(V_ * h_, dt_), x0 = buf(T * h_, dt_);
    const Ref pos = buf(s_ * h_, dt_, 32), dpos = buf(s_ * h_, dt_), gam = buf(h_, dt_, 33), bet = buf(h_, dt_, 34);
    const Ref xo = buf(T * h_, dt_, 35), nf = buf(T * h_, dt_), dn = buf(T * h_, dt_, 36), dres = buf(T * h_, dt_);
    const Ref logits = buf(T * V_, dt_, 37), dgam = buf(h_, dt_), dbet = buf(h_, dt_);
    float* softmax = buf(T * V_, DType::kFp32).f32();
    float* stats = buf(4 * T, DType::kFp32).f32();
    std::int32_t *tok = ids(T, 1), *tgt = ids(T, 2);
    std::uint8_t* mask = bytes(T * h_);
    const bool learned = m_.position_embedding == PositionEmbedding::kLearned, drop = m_.hidden_dropout > 0;
    const Ref nb = m_.normalization == Normalization::kLayerNorm ? bet : Ref();
    op("embedding", [=, this] { dev_.embedding_forward(tok, T, table, 0, V_, h_, x0, false); });
    if (learned)
      op("positions", [=, this] {
        for (std::int64_t r = 0; r < T; ++r) dev_.axpy(1.0f, pos.at(r * h_), x0.at(r * h_), h_);
      });
    if (drop) dropout_rows("dropout", x0, mask);
    op("norm", [=, this] { dev_.norm_forward(norm(), xo, gam, nb, nf, T, h_, 1e-5f); });
    op("cross-entropy", [=, this] {
      dev_.ce_row_max(logits, T, V_, 0, V_, stats);
      dev_.ce_exp_sum(logits, stats, tgt, T, V_, 0, V_, softmax, stats + T, stats + 2 * T);
      dev_.ce_finish(softmax, stats + T, stats + 2 * T, T, V_, stats + 3 * T);
    });
    op("cross-entropy", [=, this] { dev_.ce_backward(softmax, tgt, T, V_, 0, 1e-3f); });
    op("norm", [=, this] { dev_.norm_backward(norm(), xo, gam, dn, dres, false, dgam, dbet, T, h_, 1e-5f); });
    if (drop) op("dropout", [=, this] { dev_.dropout_backward(dres, mask, dres, T * h_, 0.1f); });
    if (learned)
      op("positions", [=, this] {
        for (std::int64_t r = 0; r < T; ++r) dev_.axpy(1.0f, dres.at(r * h_), dpos.at(r * h_), h_);
      });
    op("embedding", [=, this] { dev_.embedding_backward(tok, T, dres, 0, V_, h_, dtable); });
  }

  void adam() {
    const std::int64_t n = total_params(m_);
    float* master = buf(n, DType::kFp32, 41).f32();
    float *mo = buf(n, DType::kFp32).f32(), *vo = buf(n, DType::kFp32).f32();
    const Ref grad = buf(n, dt_, 42), param = dt_ == DType::kFp32 ? Ref() : buf(n, dt_);
    // Mixed precision: fp32 master, 16-bit weights written; fp32: the master is the weights.
    op("adam", [=, this] { dev_.adam(master, mo, vo, grad, param, n, 1e-6f, 0.9f, 0.95f, 1e-8f, 1, 1.0f); });
  }

  Device& dev_;
  MemoryResource& mem_;
  Model m_;
  bool flash_;
  DType dt_;
  std::int64_t s_, h_ = 0, q_ = 0, kv_ = 0, nqkv_ = 0, f_ = 0, fin_ = 0, V_ = 0;
  std::vector<std::unique_ptr<Scratch>> bufs_;
  std::vector<std::pair<std::string, std::function<void()>>> ops_;
};

}  // namespace

std::vector<std::string> work_models() {
  std::vector<std::string> v;
  for (const WorkModel& w : models()) v.push_back(w.model.name);
  return v;
}

std::vector<WorkCase> work_cases(bool quick) {
  std::vector<WorkCase> v;
  for (const char* m : {"gpt-small", "llama-small"})
    for (int seq : quick ? std::vector<int>{64} : std::vector<int>{32, 64, 128})
      for (WorkKind k : {WorkKind::kLayer, WorkKind::kEnds}) v.push_back({k, m, seq});
  if (!quick)
    for (const char* m : {"gpt-h256", "llama-h256"}) {
      v.push_back({WorkKind::kLayer, m, 128});
      v.push_back({WorkKind::kEnds, m, 128});
    }
  for (const char* m : quick ? std::vector<const char*>{"gpt-small"}
                             : std::vector<const char*>{"gpt-small", "llama-small", "gpt-h256", "llama-h256"})
    v.push_back({WorkKind::kAdam, m, 64});
  return v;
}

std::vector<WorkSample> measure_work(Device& dev, MemoryResource& mem, const std::vector<WorkCase>& cases,
                                     DType dtype, const TimingOptions& opt) {
  std::vector<WorkSample> out;
  for (const WorkCase& c : cases) {
    WorkRunner r(dev, mem, find_model(c.model), c.seq, dtype);
    WorkSample s;
    s.what = c;
    s.dtype = dtype;
    s.parts = r.run(c.kind, opt);
    for (const auto& p : s.parts) s.seconds += p.second;
    out.push_back(s);
  }
  return out;
}

std::vector<StepCase> step_cases(bool quick) {
  if (quick) return {{"gpt-small", 32, 2}, {"llama-small", 32, 2}};
  return {{"gpt-small", 32, 8},   {"gpt-small", 128, 4}, {"llama-small", 32, 8},
          {"llama-small", 128, 4}, {"gpt-h256", 128, 2},  {"llama-h256", 128, 2},
          // many collectives per step: tp 2 with sp (4 per layer and pass), ZeRO 2 (a
          // reduce-scatter per gradient bucket and micro-batch)
          {"gpt-small", 32, 8, 2, true, 0},   {"llama-small", 128, 4, 2, true, 0},
          {"gpt-small", 128, 4, 1, false, 2}, {"llama-small", 32, 8, 1, false, 2}};
}

std::string step_layout_label(const StepCase& c) {
  std::string s = c.tp > 1 ? "tp" + std::to_string(c.tp) + (c.sp ? " sp" : "") : "";
  if (c.zero > 0) s += (s.empty() ? "zero" : " zero") + std::to_string(c.zero);
  return s.empty() ? "dp" : s;
}

Layout step_layout(const StepCase& c, int ranks) {
  Layout l;
  l.tp = std::max(1, c.tp);
  l.dp = std::max(1, ranks / l.tp);
  l.sp = c.sp && l.tp > 1;
  l.zero = c.zero;
  return l;
}

bool step_case_fits(const StepCase& c, int ranks) {
  const int tp = std::max(1, c.tp);
  if (ranks % tp) return false;
  return c.zero == 0 || ranks / tp >= 2;
}

namespace {
double group_reduce(Communicator& comm, Device& dev, MemoryResource& mem, double v, ReduceOp op);

// The spec of a step case: the work model, `batch` sequences per data-parallel
// rank, the grad bucket of the time check's specs.
Spec step_spec(const StepCase& c, DType dtype, const Cluster& cluster, const Layout& l) {
  Spec spec = work_spec(find_model(c.model), c.seq, dtype, cluster);
  spec.cluster.gpus_per_node = l.gpus();
  spec.training.global_batch_size = c.batch * l.dp;
  spec.training.grad_bucket_params = 20000;
  spec.training.overlap_dp_comm = false;
  return spec;
}
}  // namespace

std::vector<StepSample> measure_steps(Device& dev, MemoryResource& mem, const std::vector<StepCase>& cases,
                                      DType dtype, const TimingOptions& opt, Communicator* world,
                                      const std::function<Groups(int tp, int dp)>& groups) {
  std::vector<StepSample> out;
  const int ranks = world && groups ? world->size() : 1;
  for (const StepCase& c : cases) {
    if (!step_case_fits(c, ranks)) continue;
    if (world) world->barrier();
    RunConfig cfg;
    cfg.layout = step_layout(c, ranks);
    cfg.spec = step_spec(c, dtype, Cluster{}, cfg.layout);
    cfg.rank = ranks > 1 ? world->rank() : 0;
    cfg.steps = std::max(1, opt.warmup) + std::max(1, opt.repetitions);
    // Runs of steps until 50 × min_seconds (1 s; 0.15 s quick) of measured
    // steps: on a shared host the speed swings by 30% over fractions of a
    // second, and a few steps would catch one swing.
    std::vector<double> steps;
    double measured = 0;
    // The groups once per case (a communicator split is collective, and on
    // NCCL costly); run_rank only views them.
    Groups g = ranks > 1 ? groups(cfg.layout.tp, cfg.layout.dp) : make_local_groups(&dev, 0, 1, 1, 1, false);
    for (bool more = true; more;) {
      TrackingAllocator alloc(&mem, -1);
      const RankResult r = run_rank(cfg, dev, alloc, g);
      for (std::size_t i = std::size_t(std::max(1, opt.warmup)); i < r.step_seconds.size(); ++i)
        steps.push_back(r.step_seconds[i]), measured += r.step_seconds[i];
      more = measured < 50 * opt.min_seconds;
      // Ranks stepping together must agree on how many runs they make.
      if (ranks > 1) more = group_reduce(*world, dev, mem, more ? 1.0 : 0.0, ReduceOp::kMax) > 0;
    }
    StepSample s;
    s.what = c;
    s.dtype = dtype;
    s.ranks = ranks;
    s.seconds = median(steps);
    out.push_back(s);
  }
  return out;
}

double model_step_time(const StepSample& s, const Cluster& c) {
  const Layout l = step_layout(s.what, std::max(1, s.ranks));
  return estimate_time(step_spec(s.what, s.dtype, c, l), l).step_s;
}

double model_work_time(const WorkSample& s, const Cluster& c) {
  const WorkModel& w = find_model(s.what.model);
  const Layout l = one_rank();
  const int eb = dtype_bytes(s.dtype);
  auto stage = [&](int layers) {
    const StageMicrobatch mb = stage_microbatch_time(work_spec(w, s.what.seq, s.dtype, c, layers), l, 0);
    return mb.forward_s + mb.backward_s;
  };
  if (s.what.kind == WorkKind::kAdam) return estimate_time(work_spec(w, s.what.seq, s.dtype, c), l).optimizer_s;
  double linear = 0;  // forward, input gradient, weight gradient: 3 GEMMs of each shape
  for (const Gemm& g : layer_gemms(w.model, 1, s.what.seq, 1))
    if (!g.core_attention) linear += 3 * gemm_time(g, c, eb);
  const double layer = stage(2) - stage(1) - linear;
  if (s.what.kind == WorkKind::kLayer) return layer;
  return stage(1) - (layer + linear) - 3 * gemm_time(logits_gemm(w.model, 1, s.what.seq, 1), c, eb);
}

// ---- collectives ----

const char* collective_label(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kSendRecv: return "sendrecv";
  }
  return "?";
}

std::vector<std::int64_t> message_sizes(std::int64_t min_bytes, std::int64_t max_bytes, int factor) {
  if (min_bytes < 1 || max_bytes < min_bytes || factor < 2)
    throw std::invalid_argument("message_sizes: need 1 <= min <= max and factor >= 2");
  std::vector<std::int64_t> v;
  for (std::int64_t b = min_bytes; b <= max_bytes; b *= factor) {
    v.push_back(b);
    if (b > max_bytes / factor) break;
  }
  return v;
}

namespace {

// The same value on every rank of the group: the sum (or max) of each rank's,
// through a one-element buffer in the backend's memory (NCCL needs device memory).
double group_reduce(Communicator& comm, Device& dev, MemoryResource& mem, double v, ReduceOp op) {
  Scratch buf(mem, 4);
  float x = float(v);
  dev.from_host(&x, buf.ref(DType::kFp32), 1);
  comm.all_reduce(buf.ref(DType::kFp32), 1, op);
  dev.to_host(buf.ref(DType::kFp32), &x, 1);
  return double(x);
}

}  // namespace

std::vector<CollectiveSample> measure_collectives(Communicator& comm, Device& dev, MemoryResource& mem,
                                                  const std::vector<Collective>& kinds,
                                                  const std::vector<std::int64_t>& sizes, DType dtype,
                                                  const TimingOptions& opt, bool in_step) {
  std::vector<CollectiveSample> out;
  const int n = comm.size();
  const std::int64_t e = storage_bytes(dtype);
  // The compute before each in-step operation: the MLP's first GEMM of the
  // validator's test models at 64 tokens (64 x 256 x 64), about what runs
  // between two collectives of a tensor-parallel layer of the timing specs.
  const std::int64_t gm = 64, gn = 256, gk = 64;
  Scratch ga(mem, gm * gk * e), gb(mem, gn * gk * e), gc(mem, gm * gn * e);
  fill_values(dev, ga.ref(dtype), gm * gk, 1);
  fill_values(dev, gb.ref(dtype), gn * gk, 2);
  auto compute = [&] { dev.gemm(false, true, gm, gn, gk, 1.0f, ga.ref(dtype), gk, gb.ref(dtype), gk, 0.0f, gc.ref(dtype), gn); };
  double compute_s = 0;
  if (in_step) {
    for (int i = 0; i < 2; ++i) compute();
    dev.synchronize();
    const auto t = Clock::now();
    for (int i = 0; i < 5; ++i) compute();
    dev.synchronize();
    compute_s = since(t) / 5;
  }
  for (Collective kind : kinds) {
    for (std::int64_t size : sizes) {
      // S rounded down to whole elements divisible by the group size.
      const std::int64_t count = std::max<std::int64_t>(n, size / e / n * n), block = count / n;
      Scratch in(mem, count * e), res(mem, count * e);
      fill_values(dev, in.ref(dtype), count, 8);
      fill_values(dev, res.ref(dtype), count, 9);
      auto op = [&] {
        switch (kind) {
          case Collective::kAllReduce: comm.all_reduce(res.ref(dtype), count, ReduceOp::kSum); break;
          case Collective::kAllGather: comm.all_gather(in.ref(dtype), res.ref(dtype), block); break;
          case Collective::kReduceScatter: comm.reduce_scatter(in.ref(dtype), res.ref(dtype), block); break;
          default: throw std::invalid_argument("measure_collectives: unsupported collective");
        }
      };
      for (int i = 0; i < std::max(1, opt.warmup); ++i) op();
      dev.synchronize();
      // Every rank must run as many iterations: agree on the slowest estimate.
      comm.barrier();
      auto t0 = Clock::now();
      op();
      dev.synchronize();
      const double estimate = group_reduce(comm, dev, mem, since(t0) + compute_s, ReduceOp::kMax);
      const int iters = int(std::clamp(std::ceil(opt.min_seconds / std::max(estimate, 1e-7)), 1.0, 10000.0));
      std::vector<double> runs;
      for (int r = 0; r < std::max(1, opt.repetitions); ++r) {
        comm.barrier();
        double mine = 0;
        if (in_step) {
          for (int i = 0; i < iters; ++i) {
            compute();
            dev.scale(in.ref(dtype), count, 1.0f);  // the step's kernel writes what is sent
            if (kind == Collective::kAllReduce) dev.scale(res.ref(dtype), count, 1.0f);
            dev.synchronize();
            t0 = Clock::now();
            op();
            dev.synchronize();
            mine += since(t0);
          }
          mine /= iters;
        } else {
          t0 = Clock::now();
          for (int i = 0; i < iters; ++i) op();
          dev.synchronize();
          mine = since(t0) / iters;
        }
        runs.push_back(group_reduce(comm, dev, mem, mine, ReduceOp::kSum) / n);  // mean over ranks (nccl-tests)
      }
      CollectiveSample s;
      s.kind = kind;
      s.group_size = n;
      s.dtype = dtype;
      s.bytes = count * e;
      s.seconds = median(runs);
      s.in_step = in_step;
      out.push_back(s);
    }
  }
  return out;
}

// ---- fits ----

namespace {

// Least squares of A x ≈ b (Eigen, column-pivoting QR: fine for a few columns).
Eigen::VectorXd solve_ls(const Eigen::MatrixXd& A, const Eigen::VectorXd& b) {
  return A.colPivHouseholderQr().solve(b);
}

template <class Samples>
double rms_rel(const Samples& s) {
  double sum = 0;
  int n = 0;
  for (const auto& x : s)
    if (x.seconds > 0 && x.fitted_s > 0) sum += std::pow((x.fitted_s - x.seconds) / x.seconds, 2), ++n;
  return n ? std::sqrt(sum / n) : 0;
}

// A cluster with only the numbers gemm_time / memory_bound_time read.
Cluster roofline_cluster(double peak_flops, double gemm_eff, double hbm_bytes_per_s, double hbm_eff,
                         double gemm_fixed_s = 0) {
  Cluster c;
  c.gpu.peak_tflops_bf16 = peak_flops / 1e12;
  c.gemm_efficiency = gemm_eff;
  c.gemm_fixed_us = gemm_fixed_s * 1e6;
  c.gpu.hbm_bandwidth_gbs = hbm_bytes_per_s / 1e9;
  c.hbm_efficiency = hbm_eff;
  return c;
}

Gemm model_gemm(const GemmCase& c) { return Gemm{"", 1, double(c.m), double(c.n), double(c.k), false}; }

}  // namespace

GemmFit fit_gemm(std::vector<GemmSample>& samples, double peak_flops, double memory_bytes_per_s) {
  GemmFit f;
  for (const GemmSample& s : samples) f.peak_flops = std::max(f.peak_flops, s.flops_per_s());
  if (peak_flops > 0) f.peak_flops = peak_flops;
  if (f.peak_flops <= 0) throw std::invalid_argument("fit_gemm: no timed samples");
  const double bw = memory_bytes_per_s > 0 ? memory_bytes_per_s : std::numeric_limits<double>::infinity();
  // gemm_time = max(F / (peak·eff), bytes / bw) + t0: fit x = 1 / (peak·eff)
  // and t0 on the samples the compute term bounds, re-deciding which those are
  // until stable. Start from the fastest x (efficiency 1), which calls the
  // fewest compute-bound.
  double x = 1 / f.peak_flops, t0 = 0;
  std::vector<bool> compute(samples.size(), false);
  for (int iter = 0; iter < 20; ++iter) {
    bool changed = false;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const double mem = model_gemm(samples[i].shape).bytes(dtype_bytes(samples[i].dtype)) / bw;
      const bool c = samples[i].seconds > 0 && samples[i].shape.flops() * x >= mem;
      changed = changed || c != compute[i];
      compute[i] = c;
    }
    if (!changed && iter > 0) break;
    std::vector<int> rows;
    for (std::size_t i = 0; i < samples.size(); ++i)
      if (compute[i]) rows.push_back(int(i));
    if (rows.empty()) break;
    // Relative residuals (F·x + t0 − t) / t: columns F / t and 1 / t. A
    // negative t0 or an efficiency above 1 refits without the fixed time.
    const Eigen::Index nr = Eigen::Index(rows.size());
    const Eigen::VectorXd b = Eigen::VectorXd::Ones(nr);
    Eigen::MatrixXd A(nr, 2);
    for (Eigen::Index r = 0; r < nr; ++r) {
      const GemmSample& s = samples[std::size_t(rows[std::size_t(r)])];
      A(r, 0) = s.shape.flops() / s.seconds;
      A(r, 1) = 1 / s.seconds;
    }
    Eigen::VectorXd sol = nr >= 2 ? solve_ls(A, b) : Eigen::VectorXd::Zero(2);
    if (nr < 2 || sol(1) < 0 || sol(0) < 1 / f.peak_flops) {
      sol(0) = solve_ls(A.leftCols(1), b)(0), sol(1) = 0;
    }
    x = std::max(sol(0), 1 / f.peak_flops);  // efficiency ≤ 1
    t0 = sol(1);
  }
  f.efficiency = std::clamp(1 / (x * f.peak_flops), 1e-6, 1.0);
  f.fixed_s = t0;
  const Cluster c = roofline_cluster(f.peak_flops, f.efficiency, bw, 1.0, f.fixed_s);
  for (GemmSample& s : samples) s.fitted_s = gemm_time(model_gemm(s.shape), c, dtype_bytes(s.dtype));
  f.rms_rel_error = rms_rel(samples);
  f.samples = int(samples.size());
  return f;
}

namespace {

// The fit's samples: one micro-batch of a model's non-GEMM work, its layers
// (the work model's layer count) and its embedding and output, measured and
// modelled (model(i, eff)).
struct MicroBatchRow {
  double measured = 0;
  std::vector<std::pair<int, double>> terms;  // (work sample, multiplicity)
};

std::vector<MicroBatchRow> micro_batch_rows(const std::vector<WorkSample>& work) {
  std::vector<MicroBatchRow> rows;
  for (std::size_t i = 0; i < work.size(); ++i) {
    if (work[i].what.kind != WorkKind::kLayer || work[i].seconds <= 0) continue;
    for (std::size_t j = 0; j < work.size(); ++j) {
      const WorkSample &a = work[i], &b = work[j];
      if (b.what.kind != WorkKind::kEnds || b.what.model != a.what.model || b.what.seq != a.what.seq ||
          b.dtype != a.dtype || b.seconds <= 0)
        continue;
      const double layers = find_model(a.what.model).model.num_layers;
      rows.push_back({layers * a.seconds + b.seconds, {{int(i), layers}, {int(j), 1.0}}});
    }
  }
  return rows;
}

}  // namespace

MemoryFit fit_memory(const std::vector<CopySample>& copies, std::vector<WorkSample>& work, const Cluster& base,
                     double bandwidth) {
  MemoryFit f;
  for (const CopySample& s : copies) f.bandwidth = std::max(f.bandwidth, s.bytes_per_s());
  if (bandwidth > 0) f.bandwidth = bandwidth;
  if (f.bandwidth <= 0) throw std::invalid_argument("fit_memory: no copy sample and no bandwidth given");
  Cluster c = base;
  c.gpu.hbm_bandwidth_gbs = f.bandwidth / 1e9;
  auto model = [&](const MicroBatchRow& r, double eff) {
    c.hbm_efficiency = eff;
    double t = 0;
    for (const auto& [i, times] : r.terms) t += times * model_work_time(work[std::size_t(i)], c);
    return t;
  };
  const std::vector<MicroBatchRow> rows = micro_batch_rows(work);
  // The model is piecewise linear in y = 1 / (bandwidth × efficiency) (memory-
  // bound terms, and roofline maxima that may switch): Gauss-Newton on y with
  // the relative residuals, each step an Eigen least-squares solve.
  double y = 1 / f.bandwidth;
  for (int iter = 0; iter < 50 && !rows.empty(); ++iter) {
    Eigen::MatrixXd J(rows.size(), 1);
    Eigen::VectorXd r(rows.size());
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const double m0 = model(rows[k], 1 / (y * f.bandwidth)), m1 = model(rows[k], 1 / (2 * y * f.bandwidth));
      J(Eigen::Index(k), 0) = (m1 - m0) / y / rows[k].measured;  // d(relative residual) / dy
      r(Eigen::Index(k)) = (m0 - rows[k].measured) / rows[k].measured;
    }
    const double step = -solve_ls(J, r)(0);
    const double next = std::max(y + step, 1 / f.bandwidth);  // efficiency ≤ 1
    const bool done = std::abs(next - y) <= 1e-12 * y;
    y = next;
    if (done) break;
  }
  f.efficiency = std::clamp(1 / (y * f.bandwidth), 1e-9, 1.0);
  double sum = 0;
  for (const MicroBatchRow& r : rows) sum += std::pow((model(r, f.efficiency) - r.measured) / r.measured, 2);
  f.rms_rel_error = rows.empty() ? 0 : std::sqrt(sum / double(rows.size()));
  f.samples = int(rows.size());
  c.hbm_efficiency = f.efficiency;
  // The optimizer step, at its own rate: the model is m1 / efficiency (m1 at
  // efficiency 1), so the relative residual is a·y − 1 with a = m1 / measured.
  c.optimizer_efficiency = 1.0;
  double sa = 0, saa = 0;
  std::vector<double> a;
  for (const WorkSample& s : work)
    if (s.what.kind == WorkKind::kAdam && s.seconds > 0) {
      a.push_back(model_work_time(s, c) / s.seconds);
      sa += a.back(), saa += a.back() * a.back();
    }
  if (!a.empty() && saa > 0) {
    const double y = std::max(1.0, sa / saa);  // efficiency ≤ 1
    f.optimizer_efficiency = 1 / y;
    double ss = 0;
    for (double ai : a) ss += (ai * y - 1) * (ai * y - 1);
    f.optimizer_rms_rel_error = std::sqrt(ss / double(a.size()));
    f.optimizer_samples = int(a.size());
  }
  c.optimizer_efficiency = f.optimizer_efficiency;  // 0: hbm_efficiency
  for (WorkSample& s : work) s.fitted_s = model_work_time(s, c);
  return f;
}

StepFit fit_steps(std::vector<StepSample>& samples, const Cluster& base) {
  StepFit f;
  f.gemm_efficiency = base.gemm_efficiency;
  f.hbm_efficiency = base.hbm_efficiency;
  f.attention_efficiency = base.attention_eff();
  f.latency_s = base.intra_node.latency_us * 1e-6;
  std::vector<std::size_t> rows;
  int many_collectives = 0;
  for (std::size_t i = 0; i < samples.size(); ++i)
    if (samples[i].seconds > 0) {
      rows.push_back(i);
      if (samples[i].ranks > 1 && (samples[i].what.tp > 1 || samples[i].what.zero >= 2)) ++many_collectives;
    }
  f.samples = int(rows.size());
  // y = 1 / (gemm, hbm, attention efficiency) and α in µs: the model is
  // (piecewise) linear in each.
  using Vec4 = Eigen::Vector4d;
  auto cluster = [&](const Vec4& y) {
    Cluster c = base;
    c.gemm_efficiency = 1 / y(0);
    c.hbm_efficiency = 1 / y(1);
    c.attention_efficiency = 1 / y(2);
    c.intra_node.latency_us = c.inter_node.latency_us = y(3);
    return c;
  };
  auto residuals = [&](const Vec4& y) {
    const Cluster c = cluster(y);
    Eigen::VectorXd r(Eigen::Index(rows.size()));
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const StepSample& s = samples[rows[k]];
      r(Eigen::Index(k)) = (model_step_time(s, c) - s.seconds) / s.seconds;
    }
    return r;
  };
  auto rms = [&](const Eigen::VectorXd& r) { return r.size() ? std::sqrt(r.squaredNorm() / double(r.size())) : 0.0; };
  Vec4 y(1 / f.gemm_efficiency, 1 / f.hbm_efficiency, 1 / f.attention_efficiency, base.intra_node.latency_us);
  f.rms_rel_error_before = f.rms_rel_error = rms(residuals(y));
  // With fewer samples than parameters, the attention rate stays tied to the
  // GEMM rate; the latency needs steps whose collectives are many.
  f.latency_fitted = rows.size() >= 5 && many_collectives >= 2;
  std::vector<int> params{0, 1};
  if (rows.size() >= 3) params.push_back(2);
  if (f.latency_fitted) params.push_back(3);
  const bool tied = rows.size() < 3;
  if (rows.size() >= 2) {
    for (int iter = 0; iter < 50; ++iter) {
      const Eigen::VectorXd r = residuals(y);
      Eigen::MatrixXd J(r.size(), Eigen::Index(params.size()));
      for (std::size_t j = 0; j < params.size(); ++j) {
        const int p = params[j];
        Vec4 yp = y;
        const double h = p == 3 ? std::max(0.01, 0.01 * y(3)) : 0.01 * y(p);
        yp(p) += h;
        if (tied && p == 0) yp(2) = yp(0);
        J.col(Eigen::Index(j)) = (residuals(yp) - r) / h;
      }
      const Eigen::VectorXd step = solve_ls(J, -r);
      Vec4 next = y;
      for (std::size_t j = 0; j < params.size(); ++j) {
        const int p = params[j];
        next(p) = p == 3 ? std::max(0.0, y(p) + step(Eigen::Index(j)))   // latency ≥ 0
                         : std::max(1.0, y(p) + step(Eigen::Index(j)));  // efficiencies ≤ 1
      }
      if (tied) next(2) = next(0);
      const bool done = (next - y).cwiseAbs().maxCoeff() <= 1e-9 * std::max(1.0, y.cwiseAbs().maxCoeff());
      y = next;
      if (done) break;
    }
    f.gemm_efficiency = 1 / y(0);
    f.hbm_efficiency = 1 / y(1);
    f.attention_efficiency = 1 / y(2);
    f.latency_s = y(3) * 1e-6;
    f.rms_rel_error = rms(residuals(y));
  }
  const Cluster c = cluster(y);
  for (StepSample& s : samples) s.fitted_s = model_step_time(s, c);
  return f;
}

double model_collective_time(Collective kind, int n, double bytes, const LinkCost& link) {
  switch (kind) {
    case Collective::kAllReduce: return ring_allreduce_time(n, bytes, link);
    case Collective::kAllGather: return allgather_time(n, bytes, link);
    case Collective::kReduceScatter: return reducescatter_time(n, bytes, link);
    case Collective::kSendRecv: return p2p_time(bytes, link);
    case Collective::kAllToAll: break;
  }
  throw std::invalid_argument("model_collective_time: no model for this collective");
}

LinkFit fit_link(std::vector<CollectiveSample>& samples) {
  std::vector<int> rows;
  std::set<std::int64_t> sizes;
  const bool in_step = std::any_of(samples.begin(), samples.end(), [](const CollectiveSample& s) { return s.in_step; });
  for (std::size_t i = 0; i < samples.size(); ++i)
    if (samples[i].seconds > 0 && samples[i].group_size > 1 && samples[i].in_step == in_step)
      rows.push_back(int(i)), sizes.insert(samples[i].bytes);
  if (sizes.size() < 2) throw std::invalid_argument("fit_link: need samples of at least two sizes");
  // The model is linear in α and 1/β: its columns are the model evaluated with
  // (α = 1, 1/β = 0) and (α = 0, β = 1) (costmodel/comm.cpp's own formulas).
  const double inf = std::numeric_limits<double>::infinity();
  Eigen::MatrixXd A(rows.size(), 2);
  const Eigen::VectorXd b = Eigen::VectorXd::Ones(Eigen::Index(rows.size()));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const CollectiveSample& s = samples[std::size_t(rows[r])];
    const auto R = Eigen::Index(r);
    A(R, 0) = model_collective_time(s.kind, s.group_size, double(s.bytes), {1.0, inf}) / s.seconds;
    A(R, 1) = model_collective_time(s.kind, s.group_size, double(s.bytes), {0.0, 1.0}) / s.seconds;
  }
  Eigen::VectorXd x = solve_ls(A, b);
  if (x(0) < 0) {  // no negative latency: bandwidth alone
    const Eigen::VectorXd y = solve_ls(A.col(1), b);
    x << 0.0, y(0);
  }
  if (!(x(1) > 0)) throw std::invalid_argument("fit_link: the samples give no positive bandwidth");
  LinkFit f;
  f.alpha_s = x(0);
  f.bytes_per_s = 1 / x(1);
  const LinkCost link{f.alpha_s, f.bytes_per_s};
  for (CollectiveSample& s : samples)
    s.fitted_s = s.group_size > 1 ? model_collective_time(s.kind, s.group_size, double(s.bytes), link) : 0;
  double sum = 0;
  for (int i : rows) sum += std::pow((samples[std::size_t(i)].fitted_s - samples[std::size_t(i)].seconds) / samples[std::size_t(i)].seconds, 2);
  f.rms_rel_error = std::sqrt(sum / double(rows.size()));
  f.samples = int(rows.size());
  return f;
}

}  // namespace paraplan::validate
