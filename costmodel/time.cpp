#include "costmodel/time.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "costmodel/frameworks/profile.hpp"
#include "costmodel/memo.hpp"
#include "costmodel/memory.hpp"
#include "costmodel/schedule.hpp"

namespace paraplan {

double gemm_tile_utilization(const Gemm& g, int sms) {
  if (sms <= 0 || g.m <= 0 || g.n <= 0 || g.batch <= 0) return 1;
  // cuBLAS's common Hopper/Ampere tiles (NVIDIA, Matrix Multiplication
  // Background User's Guide, DU-09799-001, §2.3): 128x256, 256x128 and
  // 128x128; the best of them is the one launching the least tile area
  // (waves x SMs x tile). Sizes round up to whole elements; integer
  // arithmetic (the search evaluates this a dozen times per layout).
  // Beyond 1e18 output elements there are billions of tiles: every wave full.
  if (g.batch * g.m * g.n > 1e18) return 1;
  auto up = [](double x) {
    std::int64_t i = std::int64_t(x);
    return i < x ? i + 1 : i;
  };
  const std::int64_t m = up(g.m), n = up(g.n), b = up(g.batch), p = sms;
  const std::int64_t m128 = (m + 127) >> 7, m256 = (m + 255) >> 8, n128 = (n + 127) >> 7, n256 = (n + 255) >> 8;
  // Waves: ceil(tiles / p), in 32 bits where the tiles fit (a 64-bit
  // division costs several times a 32-bit one, three per GEMM).
  auto waves = [p](std::int64_t tiles) -> std::int64_t {
    if (tiles + p - 1 <= 0xffffffffLL) return std::uint32_t(tiles + p - 1) / std::uint32_t(p);
    return (tiles + p - 1) / p;
  };
  auto launched = [&](std::int64_t tiles, double area) { return double(waves(tiles)) * double(p) * area; };
  const double best = std::min({launched(b * m128 * n256, 128.0 * 256), launched(b * m256 * n128, 256.0 * 128),
                                launched(b * m128 * n128, 128.0 * 128)});
  return std::min(1.0, g.batch * g.m * g.n / best);
}

namespace {
// Whether a run's linear GEMMs run in FP8 (Transformer Engine): asked for,
// and the GPU has an FP8 peak.
bool fp8_gemms(const Training& t, const Cluster& c) { return t.fp8 && c.gpu.peak_tflops_fp8 > 0; }

// The roofline every GEMM runs on: its FLOPs at `peak_tflops` x `efficiency`
// x its tile utilization, each tile's k-loop lengthened by the cluster's
// gemm_k_overhead, or its operands' bytes at the HBM rate, the slower; plus
// the cluster's fixed time per GEMM kernel.
double gemm_roofline(const Gemm& g, const Cluster& c, double peak_tflops, double efficiency, int elem_bytes) {
  const double k_factor = c.gemm_k_overhead > 0 && g.k > 0 ? 1 + c.gemm_k_overhead / g.k : 1.0;
  const double compute =
      g.flops() * k_factor / (peak_tflops * 1e12 * efficiency * gemm_tile_utilization(g, c.gpu.sm_count));
  return std::max(compute, memory_bound_time(g.bytes(elem_bytes), c)) + c.gemm_fixed_us * 1e-6;
}
}  // namespace

double gemm_time(const Gemm& g, const Cluster& c, int elem_bytes) {
  return gemm_roofline(g, c, c.gpu.peak_tflops_bf16, c.gemm_efficiency, elem_bytes);
}

double causal_attention_waves(double seq_heads, int blocks, int sms) {
  if (sms <= 0 || blocks <= 0 || !(seq_heads > 0)) return 1.0;
  const std::int64_t n = blocks, p = sms;
  const std::int64_t pairs = std::max<std::int64_t>(1, std::llround(std::min(seq_heads, 1e12)));
  // Work in units of one block pair; spread evenly over the SMs.
  auto even = [&](std::int64_t k) { return double(k) * double(n) * double(n + 1) / 2.0 / double(p); };
  if (pairs * n <= p) return double(n) / even(pairs);  // one wave: the longest CTA
  // The schedule's tail past the even share settles once there are many
  // waves: simulate up to 32 waves of CTAs and keep that tail beyond.
  const std::int64_t sim = std::min(pairs, std::max<std::int64_t>(1, (32 * p + n - 1) / n));
  struct Entry {
    std::int64_t pairs, n, p;
    double tail;
  };
  thread_local std::array<Entry, 32> memo{};
  thread_local unsigned next = 0;
  for (const Entry& e : memo)
    if (e.pairs == sim && e.n == n && e.p == p) return (even(pairs) + e.tail) / even(pairs);
  // More SMs than any GPU has (the loader allows up to 2^20): the many-wave
  // tail the schedule settles to for up to 64 blocks, 0.62-0.66 of a pair's
  // blocks (simulated), without simulating.
  constexpr std::int64_t kMaxSms = 1024;
  if (p > kMaxSms) return std::max(double(n), even(pairs) + 0.65 * double(n)) / even(pairs);
  std::array<std::int64_t, kMaxSms> heap{};  // a min-heap of the SMs' free times (no allocation: evaluate())
  const auto first = heap.begin(), last = heap.begin() + p;
  std::int64_t makespan = 0;
  for (std::int64_t k = 0; k < sim; ++k)
    for (std::int64_t i = 1; i <= n; ++i) {
      std::pop_heap(first, last, std::greater<>());
      *(last - 1) += i;
      makespan = std::max(makespan, *(last - 1));
      std::push_heap(first, last, std::greater<>());
    }
  const double tail = std::max(0.0, double(makespan) - even(sim));
  memo[next++ % memo.size()] = {sim, n, p, tail};
  return (even(pairs) + tail) / even(pairs);
}

Gemm gemm_input_gradient(const Gemm& g) { return {g.name, g.batch, g.m, g.k, g.n, g.core_attention}; }
Gemm gemm_weight_gradient(const Gemm& g) { return {g.name, g.batch, g.k, g.n, g.m, g.core_attention}; }

double memory_bound_time(double bytes, const Cluster& c) {
  return bytes / (c.gpu.hbm_bandwidth_gbs * 1e9 * c.hbm_efficiency);
}

double strided_memory_time(double bytes, const Cluster& c) {
  return bytes / (c.gpu.hbm_bandwidth_gbs * 1e9 * c.strided_hbm_eff());
}

double fp8_gemm_time(const Gemm& g, const Cluster& c) {
  return gemm_roofline(g, c, c.gpu.peak_tflops_fp8, c.gemm_eff_fp8(), 1);
}

double attention_gemm_time(const Gemm& g, const Cluster& c, int elem_bytes) {
  return gemm_roofline(g, c, c.gpu.peak_tflops_bf16, c.attention_eff(), elem_bytes);
}

namespace {

// The parallel groups of a layout on the cluster, in Megatron's order
// tp, cp, dp, pp (NVIDIA/Megatron-LM@d98e8a64 megatron/core/parallel_state.py:617
// "tp-cp-ep-dp-pp"): tp ranks adjacent, cp ranks tp apart, dp ranks tp·cp
// apart. Gradients reduce over dp x cp (Megatron's dp_cp group: stride tp).
// The expert grid lays etp x ep x edp over the same ranks in the order
// tp-ep-dp-pp (parallel_state.py:886-895, cp = 1 there): etp ranks adjacent,
// ep ranks etp apart.
struct Groups {
  GroupPlacement tp, dp, pp, cp, ep, etp;
  GroupPlacement tp_ep;  // the etp x ep ranks of an expert group (Megatron's tp_ep group, the allgather dispatcher's)
};

Groups place_groups(const Cluster& c, const Layout& l) {
  return {place_group(c, l.tp, 1),        place_group(c, l.dp_cp(), l.tp), place_group(c, l.pp, l.tp * l.cp * l.dp),
          place_group(c, l.cp, l.tp),     place_group(c, l.ep, l.expert_tp()), place_group(c, l.expert_tp(), 1),
          place_group(c, l.ep * l.expert_tp(), 1)};
}

struct LayerTime {
  double total = 0;  // whole layer forward
  double core = 0;   // of which the attention core (scores, softmax, attention·V)
  double linear = 0;            // of which the linear layers' GEMMs
  double linear_backward = 0;   // their input- and weight-gradient GEMMs, each at its own shape
  // The memory-bound ops' backward (twice their forward, but for the
  // framework's strided copies and unfused GLU: layer_strided_bytes).
  double memory_backward = 0;
  // Per tensor-parallel linear kind (column: QKV and fc1; row: out-proj and
  // fc2), summed over the layer's two of each: what TP collectives overlap.
  double col_forward = 0, col_dgrad = 0, col_wgrad = 0, row_forward = 0, row_dgrad = 0;
  // What per-op selective checkpointing re-runs in the backward (profiles with
  // ActivationVariant::op_sac; 0 otherwise): the linears whose outputs it does
  // not keep and every memory-bound op, not the attention.
  double op_sac_recompute = 0;
};

// The average of a dense and an MoE layer, a share w of MoE (every field adds).
LayerTime mix(const LayerTime& d, const LayerTime& e, double w) {
  auto x = [w](double a, double b) { return a * (1 - w) + b * w; };
  LayerTime r;
  r.total = x(d.total, e.total);
  r.core = x(d.core, e.core);
  r.linear = x(d.linear, e.linear);
  r.linear_backward = x(d.linear_backward, e.linear_backward);
  r.memory_backward = x(d.memory_backward, e.memory_backward);
  r.col_forward = x(d.col_forward, e.col_forward);
  r.col_dgrad = x(d.col_dgrad, e.col_dgrad);
  r.col_wgrad = x(d.col_wgrad, e.col_wgrad);
  r.row_forward = x(d.row_forward, e.row_forward);
  r.row_dgrad = x(d.row_dgrad, e.row_dgrad);
  r.op_sac_recompute = x(d.op_sac_recompute, e.op_sac_recompute);
  return r;
}

int act_bytes(const Training& t) { return dtype_bytes(t.precision); }
// Tokens of one micro-batch on one rank: its sequence shard with context parallelism.
double tokens(const Training& t, const Layout& l) { return double(l.mbs) * t.seq_length / l.cp; }
// Tokens a norm, residual or dropout sees on one rank: the sequence shard with SP
// (Korthikanti et al. 2022 §4.2.2), all of them (replicated over tp) without.
double norm_tokens(const Training& t, const Layout& l) {
  return l.sp ? tokens(t, l) / l.tp : tokens(t, l);
}

// The framework's own copies around attention (TimeVariant::layer_copies_q,
// layer_copies_kv), bytes of one layer's forward on one tp rank.
double attention_copy_bytes(const Model& m, const Training& t, const Layout& l, const TimeVariant& v) {
  return (v.layer_copies_q * double(m.q_width()) + v.layer_copies_kv * double(m.kv_width())) / l.tp * tokens(t, l) *
         act_bytes(t);
}

// A dense layer's MLP activation on one tp rank (GeLU: read + write ffn;
// SwiGLU: read 2·ffn, write ffn) and, gated, the framework's own unfused
// passes over ffn (TimeVariant::layer_copies_ffn), bytes forward.
// Squared ReLU is two unfused passes, relu then the square (megatron/core/activations.py:9-11), each a read
// and a write of ffn.
double activation_passes(const Model& m) { return m.gated() ? 3 : m.activation == Activation::kRelu2 ? 4 : 2; }

double dense_activation_bytes(const Model& m, const Training& t, const Layout& l, const TimeVariant& v) {
  const double f = double(m.ffn_hidden_size) / l.tp;
  return (activation_passes(m) + (m.gated() ? v.layer_copies_ffn : 0)) * f * tokens(t, l) * act_bytes(t);
}

// Memory-bound bytes of one layer's forward outside the attention core: two
// norms (read + write), two residual adds (2 reads + 1 write), hidden dropout
// (read, write, 1-byte mask), rotary on Q and K, the MLP activation (GeLU: read
// + write ffn; SwiGLU: read 2·ffn, write ffn). Bias adds are fused into GEMM
// epilogues (Megatron's bias-gelu / bias-dropout-add fusions) and not counted.
double layer_memory_bound_bytes(const Model& m, const Training& t, const Layout& l, LayerKind kind) {
  const double ab = act_bytes(t), h = m.hidden_size, tn = norm_tokens(t, l), tok = tokens(t, l);
  double bytes = 2 * (2 * h * tn * ab) + 2 * (3 * h * tn * ab);
  if (m.hidden_dropout > 0) bytes += 2 * (2 * ab + 1) * h * tn;
  if (m.position_embedding == PositionEmbedding::kRope)
    bytes += 2 * (m.mla() ? double(m.num_attention_heads) * 2 * m.qk_rope_head_dim : double(m.q_width() + m.kv_width())) /
             l.tp * tok * ab;
  const TimeVariant& v = profile(t.framework).time;
  if (kind == LayerKind::kMoe) {
    // The expert MLP: the activation over the rank's dispatched rows (k x
    // etp / tp per token, width moe_ffn / etp) at the imbalance, the shared
    // experts' activation, the router's scores (num_experts fp32, read and
    // written by softmax/sigmoid and top-k), and the token permutations: the
    // rank's k token copies written and read by permute and by unpermute,
    // and with several local experts the sort by expert (token_dispatcher.py
    // 660-680, 760-790, 796-900), each pass reading and writing rows x h.
    const double k = m.experts_per_token, etp = l.expert_tp();
    const double rows = tok * k * etp / l.tp * moe_expert_load(profile(t.framework), t, l.ep);  // dispatched rows on the busiest rank
    const double fe = double(m.moe_ffn_hidden_size) / etp;
    bytes += activation_passes(m) * fe * rows * ab;
    if (m.num_shared_experts > 0) bytes += activation_passes(m) * double(m.num_shared_experts) * m.moe_ffn_hidden_size / l.tp * tok * ab;
    bytes += 4.0 * 4 * double(m.num_experts) * tok / l.tp;
    const double local = double(m.num_experts) / l.ep;
    bytes += (2 + (local > 1 ? 2 : 0)) * 2 * tok * k / l.tp * h * ab;
    // The framework's own passes over the rank's routed copies and tokens (TimeVariant).
    bytes += (v.moe_combine_act_passes * ab + v.moe_combine_fp32_passes * 4.0) * tok * k / l.tp * h +
             (v.moe_router_act_passes * ab + v.moe_router_fp32_passes * 4.0) * tn * h;
  } else {
    bytes += dense_activation_bytes(m, t, l, v);
  }
  // The framework's own copies around attention (TimeVariant).
  return bytes + attention_copy_bytes(m, t, l, v);
}

// Of layer_memory_bound_bytes, what runs on strided operands in a framework
// with TimeVariant::strided_layer_ops (nanotron): the layer copies (forward;
// the backward moves each gradient once: as many bytes) and the unfused gated
// MLP of a dense layer (forward: the activation's read + write of ffn and the
// product's 2 reads + 1 write, 5 ffn per token; backward: glu_backward_passes).
StridedBytes layer_strided_bytes(const Model& m, const Training& t, const Layout& l, LayerKind kind) {
  const TimeVariant& v = profile(t.framework).time;
  if (!v.strided_layer_ops) return {};
  const double copies = attention_copy_bytes(m, t, l, v);
  StridedBytes r{copies, copies};
  if (m.gated() && kind == LayerKind::kDense) {
    r.forward += dense_activation_bytes(m, t, l, v);
    r.backward += v.glu_backward_passes * double(m.ffn_hidden_size) / l.tp * tokens(t, l) * act_bytes(t);
  }
  return r;
}

// Memory-bound bytes of the attention core without flash attention: the fused
// scale-mask-softmax reads and writes the b·heads·s² scores (Korthikanti et al.
// 2022 §4.1: the s² terms), attention dropout reads, writes and masks them too.
// Flash attention keeps them on chip (Dao et al. 2022): nothing here.
double attention_core_memory_bound_bytes(const Model& m, const Training& t, const Layout& l) {
  if (t.flash_attention) return 0;
  const double ab = act_bytes(t);
  const double scores = double(l.mbs) * m.num_attention_heads / l.tp * t.seq_length * t.seq_length;
  double bytes = 2 * scores * ab;
  if (m.attention_dropout > 0) bytes += (2 * ab + 1) * scores;
  return bytes;
}

// The head dimension the attention kernel runs at: qk_nope + qk_rope with multi-latent attention.
double attention_head_dim(const Model& m) {
  return m.mla() ? double(m.qk_nope_head_dim) + m.qk_rope_head_dim : double(m.head_dim);
}

// FLOP/s of the flash-attention kernel, counting every s² product (what
// flash_attention_time divides). A calibrated cluster's attention_efficiency
// is used as given. Otherwise the GPU's measured kernel throughput
// (gpu.flash_attention_tflops: causal, forward + backward, at the sequence
// each kernel call sees, s/cp with context parallelism, and the head dim)
// counts the causal half of the products: the kernel skips the masked half,
// so the full count runs at twice the table's rate. Without either,
// gemm_efficiency of peak.
//
// The table's runs hold 16k tokens at hidden 2048 (batch 16384 / s, 2048 / d
// heads), enough CTAs for many waves; a rank's call launches mbs x heads / tp
// (sequence, head) pairs of ceil(s / 128) blocks (FlashAttention-2's kBlockM
// and kBlockN are 128 for head dims 64-128 on sm80 and sm90:
// Dao-AILab/flash-attention@0251105a csrc/flash_attn/src/
// flash_fwd_launch_template.h:63-64 grid(num_m_block, b, h), :203-266;
// flash_bwd_launch_template.h:82 grid_n(num_n_block, b, h)), and with few of
// them the causal mask's longest blocks set the pace: the rate scales by the
// table's causal_attention_waves over the rank's. MEASURED on an H100 through
// PyTorch's FlashAttention-2 (docs/gpu.md "One H100, 2026-11-27"): 1B layer
// at tp 8, micro-batch 1 (4 heads, 32 blocks: 128 CTAs, one wave) 2.04x the
// table's time, the schedule 2.00 / 1.04.
bool table_attention(const Cluster& c) { return c.attention_efficiency <= 0 && c.gpu.flash_attention.n > 0; }

// The table's causal schedule over the rank's (<= 1 where the rank's grid is the smaller).
double flash_attention_waves(const Model& m, const Training& t, const Layout& l, const Cluster& c) {
  const double s = double(t.seq_length) / l.cp, d = attention_head_dim(m);
  const int blocks = int(std::min(1e6, std::ceil(s / 128)));
  const double bench = causal_attention_waves(std::max(1.0, 16384 / s) * 2048 / d, blocks, c.gpu.sm_count);
  const double rank = causal_attention_waves(double(l.mbs) * m.num_attention_heads / l.tp, blocks, c.gpu.sm_count);
  return bench / rank;
}

double flash_attention_rate(const Model& m, const Training& t, const Layout& l, const Cluster& c) {
  if (!table_attention(c)) return c.gpu.peak_tflops_bf16 * 1e12 * c.attention_eff();
  return 2 * c.gpu.flash_attention.at(double(t.seq_length) / l.cp, attention_head_dim(m)) * 1e12 *
         flash_attention_waves(m, t, l, c);
}

// Flash attention as one fused kernel: its two GEMMs' FLOPs on the roofline,
// with only Q, K, V read and O written through HBM (Dao et al. 2022, §3.2).
double flash_attention_time(const LayerGemms& g, const Model& m, const Training& t,
                            const Layout& l, const Cluster& c) {
  // With context parallelism the rank's s/cp queries meet all s keys, in cp
  // ring steps (causal, load-balanced: 1/cp of the whole attention's FLOPs),
  // reading each received K|V chunk.
  double flops = 0;
  for (const Gemm& x : g)
    if (x.core_attention) flops += x.flops();
  flops /= l.cp;
  // Q, K, V read and O written (multi-latent: Q, K of qk_nope + qk_rope per head, V and O of v_head_dim).
  const double heads = m.num_attention_heads;
  const double kvw = m.mla() ? heads * (double(m.qk_nope_head_dim) + m.qk_rope_head_dim + m.v_head_dim) : 2.0 * double(m.kv_width());
  const double qkvo = m.mla() ? (kvw + heads * (double(m.qk_nope_head_dim) + m.qk_rope_head_dim + m.v_head_dim)) / l.tp
                              : 2 * double(m.q_width() + m.kv_width()) / l.tp;
  const double bytes = tokens(t, l) * (qkvo + (l.cp - 1) * kvw / l.tp) * act_bytes(t);
  const double dropout = m.attention_dropout > 0 ? c.flash_dropout_slowdown : 1.0;
  const double deterministic = t.deterministic ? c.flash_deterministic_slowdown : 1.0;
  return dropout * deterministic * std::max(flops / flash_attention_rate(m, t, l, c), memory_bound_time(bytes, c));
}

// explain's words for flash_attention_time's dropout and deterministic factors (not on the search's path).
[[gnu::noinline]] std::string flash_factors_text(const Model& m, const Training& t, const Cluster& c) {
  std::string s;
  if (m.attention_dropout > 0)
    s += fmt::format(", x {:.3f} for attention dropout {:g} (flash_attention_dropout_slowdown, MEASURED on an H100: "
                     "tests/data/measurements/h100-attention-variants.csv)",
                     c.flash_dropout_slowdown, m.attention_dropout);
  if (t.deterministic)
    s += fmt::format(", x {:.3f} deterministic (flash_attention_deterministic_slowdown, MEASURED on an H100: the same "
                     "file)",
                     c.flash_deterministic_slowdown);
  return s;
}

// Transformer Engine's FP8 casts around one linear layer (delayed scaling, the
// hybrid recipe), bytes on one tp rank. Every FP8 GEMM operand is a quantized
// copy of a bf16 tensor, row-wise for one GEMM and column-wise (transposed) for
// the other (NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/module/):
// * forward: a column-parallel linear (QKV, fc1: LayerNormLinear) takes the
//   norm's own FP8 output (layernorm_linear.py:244-266, the quantized norm
//   kernel), nothing extra; a row-parallel one (out-proj, fc2: Linear) casts its
//   input row- and column-wise at once (linear.py:420-436): read 2 B, write 2 x 1 B
//   per element of m x k;
// * backward: every linear casts its output gradient row- and column-wise
//   (linear.py:900-905, base.py:1688-1789): 4 B per element of m x n; with
//   sequence parallelism a row-parallel one casts its local shard row-wise
//   (read 2, write 1 per element of m/tp x n), gathers it in FP8 and transposes
//   the gathered gradient (read 1, write 1 of m x n); and a column-parallel one
//   re-gathers its saved FP8 input shard and transposes it for the weight
//   gradient (layernorm_linear.py:775-800, 985-993: read 1, write 1 of m x k).
// The weights are cast once a step (FP8 primary weights with
// --fp8-param-gather, or cached across micro-batches): not counted here.
}  // namespace

Fp8Casts fp8_cast_bytes(const Gemm& x, const Layout& l) {
  const std::string_view n = x.name;
  const bool col = n == "qkv" || n == "fc1" || n == "shared_fc1", row = n == "out_proj" || n == "fc2" || n == "shared_fc2";
  if (!col && !row) return {};
  const double mk = x.batch * x.m * x.k, mn = x.batch * x.m * x.n;
  const bool sp = l.sp && l.tp > 1;
  Fp8Casts r;
  if (row) {
    r.forward = 4 * mk;
    r.backward = sp ? 3 * mn / l.tp + 2 * mn : 4 * mn;
  } else {
    r.backward = 4 * mn + (sp ? 2 * mk : 0);
  }
  return r;
}

namespace {

// One layer's forward on one tp rank: GEMMs on the roofline plus memory-bound ops.
LayerTime layer_forward_time(const Model& m, const Training& t, const Layout& l, const Cluster& c,
                             LayerKind kind = LayerKind::kDense) {
  // Every GEMM but attention's sees the rank's s/cp tokens; the attention
  // core, the whole sequence's, split cp ways (flash_attention_time).
  const int ep = kind == LayerKind::kMoe ? l.ep : 1, etp = kind == LayerKind::kMoe ? l.expert_tp() : 1;
  const LayerGemms g = layer_gemms(m, l.mbs, t.seq_length, l.tp, kind, ep, etp);
  const LayerGemms gc = l.cp > 1 ? layer_gemms(m, l.mbs, double(t.seq_length) / l.cp, l.tp, kind, ep, etp) : g;
  const int ab = act_bytes(t);
  LayerTime r;
  // FP8 (Transformer Engine): the linear layers' GEMMs at the FP8 peak with
  // 1-byte operands; attention stays in bf16 (TE's FP8 attention is opt-in).
  const bool fp8 = fp8_gemms(t, c);
  auto time = [&](const Gemm& x) { return fp8 ? fp8_gemm_time(x, c) : gemm_time(x, c, ab); };
  for (const Gemm& x : gc)
    if (!x.core_attention) {
      const std::string_view n = x.name;
      // The routed experts' grouped GEMMs wait for the busiest expert rank.
      const double wait = n == "experts_fc1" || n == "experts_fc2" ? moe_expert_load(profile(t.framework), t, l.ep) : 1.0;
      double f = wait * time(x), dg = wait * time(gemm_input_gradient(x)), wg = wait * time(gemm_weight_gradient(x));
      if (fp8) {
        const Fp8Casts q = fp8_cast_bytes(x, l);
        f += memory_bound_time(q.forward, c);
        dg += memory_bound_time(q.backward, c);
      }
      r.linear += f;
      r.linear_backward += dg + wg;
      // What TP collectives run beside: the column-parallel linears after an
      // all-gather, the row-parallel ones before a reduce-scatter.
      if (n == "qkv" || n == "fc1" || n == "q_up" || n == "kv_up" || n == "shared_fc1")
        r.col_forward += f, r.col_dgrad += dg, r.col_wgrad += wg;
      else if (n == "out_proj" || n == "fc2" || n == "shared_fc2")
        r.row_forward += f, r.row_dgrad += dg;
    }
  r.total += r.linear;
  // Per-op selective checkpointing (torchtitan's "op" policy): the backward
  // re-runs the fused GEMMs' shares op_sac_recompute_share gives, and the
  // memory-bound ops below.
  const bool op_sac = profile(t.framework).act.op_sac;
  double op_sac_linears = 0;
  if (op_sac)
    for (const Gemm& x : gc)
      if (!x.core_attention) op_sac_linears += time(x) * op_sac_recompute_share(m, x.name);
  for (const Gemm& x : g)
    if (x.core_attention && !t.flash_attention) r.core += attention_gemm_time(x, c, ab);
  if (t.flash_attention) r.core += flash_attention_time(g, m, t, l, c);
  r.core += memory_bound_time(attention_core_memory_bound_bytes(m, t, l), c);
  // The framework's strided ops at their own rate (layer_strided_bytes), the rest at hbm_efficiency.
  const StridedBytes strided = layer_strided_bytes(m, t, l, kind);
  const double contiguous = memory_bound_time(layer_memory_bound_bytes(m, t, l, kind) - strided.forward, c);
  const double memory_bound = contiguous + strided_memory_time(strided.forward, c);
  r.memory_backward = 2 * contiguous + strided_memory_time(strided.backward, c);
  r.total += r.core + memory_bound;
  if (op_sac) r.op_sac_recompute = op_sac_linears + memory_bound;
  return r;
}

// Backward: each linear GEMM's input-gradient (m×n by n×k) and weight-gradient
// (k×m by m×n) GEMMs, the FLOPs of two forwards (SC21 §5.1), each at its own
// tile utilization; memory-bound ops read the saved input and the incoming
// gradient and write the outgoing one (≈ 2× their forward bytes). Flash
// attention's backward is 2.5× its forward (FlashAttention-2, 5 GEMMs vs 2).
double layer_backward_time(const LayerTime& f, bool flash) {
  return f.linear_backward + f.memory_backward + (flash ? 2.5 : 2.0) * f.core;
}

// Recomputation in the backward: the whole layer forward (full, Chen et al.
// 2016) or the attention core (selective, Korthikanti et al. 2022 §5), or
// what a per-op selective policy does not keep (LayerTime::op_sac_recompute).
double layer_recompute_time(const LayerTime& f, Recompute r, bool op_sac) {
  return r == Recompute::kFull ? f.total : r == Recompute::kSelective ? (op_sac ? f.op_sac_recompute : f.core) : 0;
}

// Embedding lookup on the first stage: read the rows, write s·b·h (memory-bound).
double embedding_forward_time(const Model& m, const Training& t, const Layout& l, const Cluster& c) {
  return memory_bound_time(2 * tokens(t, l) * m.hidden_size * act_bytes(t), c);
}

// Output layer on the last stage: final norm, logits GEMM over the vocab shard,
// and the framework's cross-entropy (TimeVariant): the cast of the logits to
// fp32 (read ab, write 4 B per logit; none in fp32 training) and its passes
// over the fp32 logits, 4 B each.
double ce_bytes_per_logit(const Training& t, int fp32_passes) {
  const double ab = act_bytes(t);
  return (ab < 4 ? ab + 4 : 0) + 4.0 * fp32_passes;
}

// The output layer (final norm, logits GEMM over the vocab shard) and, apart,
// the loss: the two may sit on different ranks (CostSplit).
double output_head_forward_time(const Model& m, const Training& t, const Layout& l, const Cluster& c) {
  const double norm = 2 * m.hidden_size * norm_tokens(t, l) * act_bytes(t);
  return gemm_time(logits_gemm(m, l.mbs, t.seq_length, l.tp), c, act_bytes(t)) + memory_bound_time(norm, c);
}
double loss_forward_time(const Model& m, const Training& t, const Layout& l, const Cluster& c) {
  const double vocab = double((m.vocab_size + l.tp - 1) / l.tp);
  return memory_bound_time(tokens(t, l) * vocab * ce_bytes_per_logit(t, profile(t.framework).time.ce_forward(t.cross_entropy_fusion, l.tp)), c);
}

// Their backward: the norm's 2x bytes and the logits GEMM's input- and
// weight-gradient GEMMs; the cross-entropy's gradient passes with the cast of
// the gradient back to the activation dtype.
double output_head_backward_time(const Model& m, const Training& t, const Layout& l, const Cluster& c) {
  const double norm = 2 * m.hidden_size * norm_tokens(t, l) * act_bytes(t);
  const Gemm g = logits_gemm(m, l.mbs, t.seq_length, l.tp);
  return gemm_time(gemm_input_gradient(g), c, act_bytes(t)) + gemm_time(gemm_weight_gradient(g), c, act_bytes(t)) +
         memory_bound_time(2 * norm, c);
}
double loss_backward_time(const Model& m, const Training& t, const Layout& l, const Cluster& c) {
  const double vocab = double((m.vocab_size + l.tp - 1) / l.tp);
  return memory_bound_time(tokens(t, l) * vocab * ce_bytes_per_logit(t, profile(t.framework).time.ce_backward(t.cross_entropy_fusion, l.tp)), c);
}

// One TP all-reduce of the s·b·h activations, or with SP its all-gather +
// reduce-scatter pair of the same total volume (Korthikanti et al. 2022 §4.2.2).
double tp_collective_time(const Cluster& c, const Layout& l, const GroupPlacement& g, double bytes) {
  if (l.tp <= 1) return 0;
  return l.sp ? group_allgather_time(c, g, bytes) + group_reducescatter_time(c, g, bytes)
              : group_allreduce_time(c, g, bytes);
}

// TP collectives of one layer per micro-batch, exposed (Shoeybi et al. 2019
// §3; with SP Korthikanti et al. 2022 §4.2.2), forward and backward apart so
// that a recomputed forward repeats the forward's. With SP: forward, an
// all-gather before each column-parallel linear (QKV, fc1) and a
// reduce-scatter after each row-parallel one (out-proj, fc2); backward, an
// all-gather of each row linear's output gradient, and per column linear the
// input-gradient reduce-scatter (and, in frameworks that re-gather the saved
// input shard for the weight gradient, that all-gather). Without SP: an
// all-reduce after each row linear forward and of each column linear's input
// gradient. What the framework overlaps (TimeVariant, Training::tp_comm_overlap)
// is hidden up to the GEMM it runs beside. `pairs`: the layer's column/row
// linear pairs with an activation collective each way (2: attention and MLP;
// an MoE layer's MLP has one only for its shared experts, the routed experts
// moving tokens by all-to-all instead).

// The slowdown of compute that runs beside an NCCL collective, per second of
// the collective it hides: the collective's kernels hold one CTA per channel
// on as many SMs (NVIDIA/nccl@5067397c src/enqueue.cc:1758, a kernel's grid is
// nChannels blocks), which the compute kernels lose: channels / (SMs - channels).
// A group inside a node: the cluster's intra_node.nccl_channels (16 unless
// given: NCCL's NVLS count on sm90, src/transport/nvls.cc:155; 24 on 8-GPU
// H100/H200 NVSwitch nodes, whose rings NCCL runs on 24, configs/clusters/
// dgx-h100.yaml). A group across nodes: 16 (Cluster::kDefaultNcclChannels;
// its rings follow the NICs, not measured: JUDGEMENT). The same for TP collectives
// beside their GEMMs and DP buckets beside the backward (or ZeRO-3 gathers
// beside the layer before).
int nccl_channels(const Cluster& c, const GroupPlacement& g) {
  return g.intra_node() ? c.nccl_channels : Cluster::kDefaultNcclChannels;
}
double overlap_contention(const Cluster& c, const GroupPlacement& g) {
  const int k = nccl_channels(c, g);
  return c.gpu.sm_count > k ? double(k) / (c.gpu.sm_count - k) : 0;
}

// One collective of `one` seconds beside a pass of `pass` seconds: what
// outlasts the pass is exposed, and while both run the pass slows by
// `contention` per second (overlap_contention).
double exposed_beside(double one, double pass, double contention) {
  return std::max(0.0, one - pass) + contention * std::min(one, pass);
}

struct TpLayerComm {
  double forward_s = 0, backward_s = 0;
};
TpLayerComm tp_layer_comm(const Model& m, const Training& t, const Layout& l, const Cluster& c,
                          const GroupPlacement& g, const LayerTime& f, int pairs = 2) {
  if (l.tp <= 1) return {};
  const TimeVariant& v = profile(t.framework).time;
  const double bytes = tokens(t, l) * m.hidden_size * act_bytes(t);
  // `n` collectives of time `one`, each beside a GEMM of time `beside / n`:
  // what outlasts the GEMM is exposed, and while both run the collective's
  // kernels hold SMs the GEMM loses (one CTA per NCCL channel, as many
  // channels as overlap_contention gives the tp group), slowing it by
  // channels / (SMs - channels) for the overlapped time.
  const double contention = overlap_contention(c, g);
  auto exposed = [contention](int n, double one, double beside) { return n * exposed_beside(one, beside / n, contention); };
  // Megatron --tp-comm-overlap: userbuffers pipeline every TP GEMM with its
  // collective (with SP only; Megatron refuses it without).
  const bool all = t.tp_comm_overlap;
  // The framework's async NCCL collectives beside their GEMMs, where measured
  // so (TimeVariant::collectives_overlap_compute); in line otherwise.
  const bool async = v.collectives_overlap_compute;
  TpLayerComm r;
  if (l.sp) {
    const double ag = group_allgather_time(c, g, bytes), rs = group_reducescatter_time(c, g, bytes);
    const bool shard = v.tp_forward_shard_overlap && async;
    r.forward_s = exposed(pairs, ag, all ? f.col_forward : shard ? f.col_forward / l.tp : 0) +
                  exposed(pairs, rs, all ? f.row_forward : 0);
    r.backward_s = exposed(pairs, ag, all ? f.row_dgrad : shard ? f.row_dgrad / l.tp : 0);
    // The backward's re-gather of the saved input shard and the input
    // gradient's reduce-scatter: beside the dgrad and wgrad GEMMs, or in line.
    if (all)
      r.backward_s += exposed(pairs, ag, f.col_dgrad) + exposed(pairs, rs, f.col_wgrad);
    else if (v.tp_backward_overlap)
      r.backward_s += exposed(pairs, ag, async ? f.col_dgrad : 0) + exposed(pairs, rs, async ? f.col_wgrad : 0);
    else
      r.backward_s += pairs * rs;
  } else {
    const double ar = group_allreduce_time(c, g, bytes);
    r.forward_s = pairs * ar;
    r.backward_s = exposed(pairs, ar, v.tp_backward_overlap && t.tp_async_allreduce && async ? f.col_wgrad : 0);
  }
  return r;
}

// TP collectives outside the layers: the vocab-parallel embedding's all-reduce
// (first stage), the output layer's input-gradient all-reduce and the
// cross-entropy's three fp32 all-reduces of s·b values (max, sum of exps,
// target logit) on the last stage (Megatron-LM tensor_parallel/cross_entropy.py).
double tp_embedding_output_comm_time(const Model& m, const Training& t, const Layout& l,
                                     const Cluster& c, const GroupPlacement& g, bool first,
                                     bool last) {
  if (l.tp <= 1) return 0;
  const double bytes = tokens(t, l) * m.hidden_size * act_bytes(t);
  double time = 0;
  if (first) time += tp_collective_time(c, l, g, bytes);
  if (last) time += tp_collective_time(c, l, g, bytes) + 3 * group_allreduce_time(c, g, tokens(t, l) * 4);
  return time;
}

// Pipeline sends per micro-batch: the s·b·h activation forward and its gradient
// backward at each of the rank's v chunk boundaries (Narayanan et al. 2021
// §2.2); send and receive of a step overlap (batched isend/irecv). With SP the
// tensor is already split over tp (s/tp·b·h per rank). Without SP every tp
// rank holds the whole tensor: today's Megatron sends it whole; with
// pipeline_scatter_gather (Megatron 2021-2023, §4.1; megatron/p2p_communication.py
// at 39b83c7953^ :148-193) each rank sends 1/tp of it and the receiver
// all-gathers the pieces over its tp group.
}  // namespace

double moe_alltoall_bytes(const Model& m, const Training& t, const Layout& l) {
  if (!m.is_moe() || l.ep <= 1) return 0;
  return tokens(t, l) / l.tp * m.experts_per_token * m.hidden_size * act_bytes(t) * (l.ep - 1) / l.ep;
}

double pipeline_send_bytes(const Model& m, const Training& t, const Layout& l) {
  const double whole = tokens(t, l) * m.hidden_size * act_bytes(t);
  return l.sp || t.pipeline_scatter_gather ? whole / l.tp : whole;
}

GroupPlacement pp_link(const Cluster& c, const Layout& l, int a, int b) {
  GroupPlacement g;
  g.size = 2;
  if (a == b) return g;
  // Megatron order: a pipeline rank's tp·cp·dp ranks are consecutive, the
  // next pipeline rank's start tp·cp·dp further on (NVIDIA/Megatron-LM@d98e8a64
  // megatron/core/parallel_state.py:617, order "tp-cp-ep-dp-pp"; nanotron the
  // same, huggingface/nanotron@67c5ebb6 src/nanotron/parallel/context.py:70-77,
  // ranks reshaped (ep, pp, dp, tp)).
  // Every rank shares a node with its peer exactly when the two stages' ranks
  // all lie on one node (a node boundary anywhere among them splits some pair).
  const long long stride = (long long)std::max(1, l.tp) * std::max(1, l.cp) * std::max(1, l.dp);
  const long long per_node = std::max(1, c.gpus_per_node);
  const long long first = std::min(a, b) * stride, last = std::max(a, b) * stride + stride - 1;
  const bool same = first / per_node == last / per_node;
  g.nodes = same ? 1 : 2;
  g.ranks_per_node = same ? 2 : 1;
  return g;
}

namespace {

// A stage's pipeline sends per micro-batch. In 1F1B's steady state a stage's
// forward step sends its output to the next stage while it receives the
// gradient of an earlier micro-batch from that stage, and its backward step
// sends the input gradient to the previous stage while it receives the next
// input from it (NVIDIA/Megatron-LM@d98e8a64 megatron/core/pipeline_parallel/
// schedules.py:2416, 2446: send_forward_recv_backward, send_backward_recv_forward;
// p2p_communication.py:536-600 and :32-54, one batch_isend_irecv of the send and
// the receive each): each of its links carries one payload each way
// at once, so each costs one transfer per micro-batch and chunk. A middle stage
// (every stage with interleaving, the ring wrapping around) has two links, the
// first and last stage one. A link is NVLink where every rank of the one stage
// shares a node with its peer in the other (pp_link), the network otherwise;
// `logits_bytes(a)` is what the link between stages a and a + 1 (mod p)
// carries where it is not the s·b·h activation (nanotron's logits), else 0.
struct PipelineLinks {
  bool prev = false, next = false;  // a link to the previous stage, to the next one
  int count() const { return int(prev) + int(next); }
};
PipelineLinks pipeline_links(const Layout& l, int stage) {
  const bool wrap = l.vpp > 1;
  return {stage > 0 || wrap, stage < l.pp - 1 || wrap};
}

}  // namespace

bool pipeline_crosses_nodes(const Cluster& c, const Layout& l) {
  for (int a = 0; a < l.pp; ++a)  // each stage's link to the next one, where it has one
    if (pipeline_links(l, a).next && pp_link(c, l, a, (a + 1) % l.pp).nodes > 1) return true;
  return false;
}

namespace {

template <class LogitsBytes>
double pipeline_p2p_time(const Model& m, const Training& t, const Layout& l, const Cluster& c, int stage,
                         const GroupPlacement& tp, LogitsBytes&& logits_bytes) {
  if (l.pp <= 1) return 0;
  const int p = l.pp;
  auto link = [&](int a) {
    const GroupPlacement g = pp_link(c, l, a, (a + 1) % p);
    if (const double logits = logits_bytes(a); logits > 0) return group_p2p_time(c, g, logits);
    double time = group_p2p_time(c, g, pipeline_send_bytes(m, t, l));
    // Megatron 2021-2023 without SP: each tp rank sends 1/tp and the receiver all-gathers the pieces.
    if (!l.sp && t.pipeline_scatter_gather && l.tp > 1)
      time += group_allgather_time(c, tp, tokens(t, l) * m.hidden_size * act_bytes(t));
    return time;
  };
  const PipelineLinks links = pipeline_links(l, stage);
  double time = 0;
  if (links.prev) time += link((stage + p - 1) % p);
  if (links.next) time += link(stage);
  return l.vpp * time;
}

// Megatron's interleaved schedule with --overlap-p2p-communication (its default
// since 4eeff55d1f, 2023-10; Training::overlap_p2p_comm, TimeVariant::
// p2p_overlaps_interleaved): in the steady 1F1B phase each chunk's sends and
// receives are posted asynchronously and waited on before the next step needs
// them, so a forward send runs beside the backward chunk that follows it and a
// backward send beside the next forward chunk
// (NVIDIA/Megatron-LM@d98e8a64 megatron/core/pipeline_parallel/schedules.py
// :1747-1830); the warm-up's forward sends and the cool-down's backward sends
// stay in line (:1633-1660), unless --overlap-p2p-communication-warmup-flush
// (Training::overlap_p2p_comm_warmup_flush) runs them beside the next chunk of
// their own direction (:1576-1606): a forward and a backward chunk per pair of
// sends again, so every send pair then costs what a steady one does.
// The rank's warm-up is 2 (p - rank - 1) + (v - 1) x group chunk steps of its
// m x v (schedules.py:964-965, get_pp_rank_microbatches). `sends` is the
// stage's 2 x vpp sends per micro-batch in line (pipeline_p2p_time); a send
// beside a chunk slows it by the SMs its NCCL kernels hold (exposed_beside,
// `contention`, as for the DP and TP collectives); returns what is exposed per
// micro-batch.
struct PipelineOverlap {
  bool on = false;
  double exposed_s = 0, one_s = 0, forward_exposed_s = 0, backward_exposed_s = 0, warm_steps = 0, steps = 0;
};
PipelineOverlap pipeline_send_overlap(const Spec& s, const Layout& l, int stage, double sends, double forward_s,
                                      double backward_s, double contention) {
  PipelineOverlap r;
  const Training& t = s.training;
  if (l.pp <= 1 || l.vpp <= 1 || !t.overlap_p2p_comm || !profile(t.framework).time.p2p_overlaps_interleaved) return r;
  const double v = l.vpp, m = num_microbatches(s, l);
  r.on = true;
  r.one_s = sends / (2 * v);
  r.steps = m * v;
  r.warm_steps = t.overlap_p2p_comm_warmup_flush ? 0.0
                                                 : std::min(r.steps, 2.0 * (l.pp - stage - 1) + (v - 1) * l.group());
  const double in_line = r.warm_steps / r.steps;
  r.forward_exposed_s = exposed_beside(r.one_s, backward_s / v, contention);
  r.backward_exposed_s = exposed_beside(r.one_s, forward_s / v, contention);
  r.exposed_s = sends * in_line + v * (1 - in_line) * (r.forward_exposed_s + r.backward_exposed_s);
  return r;
}

// Ring attention (Transformer Engine's p2p context parallelism,
// NVIDIA/TransformerEngine@d0067d0d .../dot_product_attention/context_parallel.py
// :1697-1717): cp − 1 steps, each sending the K|V chunk the rank holds (its
// s/cp tokens' K and V) to the next cp rank while it attends to that chunk;
// the backward circulates K|V and dK|dV, twice the bytes. A step's send runs
// on a second stream beside the attention of one chunk (1/cp of the core), so
// only what outlasts it is exposed. Returns {forward, backward} per layer.
struct CpRing {
  double forward_s = 0, backward_s = 0;
};
CpRing cp_ring_exposed_time(const Model& m, const Training& t, const Layout& l, const Cluster& c,
                            const GroupPlacement& g, double core_forward_s) {
  if (l.cp <= 1) return {};
  const double chunk = tokens(t, l) * 2.0 * double(m.kv_width()) / l.tp * act_bytes(t);
  const double step_f = core_forward_s / l.cp, step_b = (t.flash_attention ? 2.5 : 2.0) * core_forward_s / l.cp;
  return {(l.cp - 1) * std::max(0.0, group_p2p_time(c, g, chunk) - step_f),
          (l.cp - 1) * std::max(0.0, group_p2p_time(c, g, 2 * chunk) - step_b)};
}

// A DP collective over `params` parameters in the framework's buckets
// (TimeVariant::reduce_buckets), or the spec's training.grad_bucket_params
// when given: n buckets of params/n.
double bucket_params_for_time(const Spec& s, const Layout& l, double params) {
  const Training& t = s.training;
  const double training = double(std::max<std::int64_t>(1, t.grad_bucket_params));
  if (t.grad_bucket_params_given) return training;
  const Profile& p = profile(t.framework);
  switch (p.time.reduce_buckets) {
    case ReduceBuckets::kTrainingDefault: return training;
    case ReduceBuckets::kFixed: return double(std::max<std::int64_t>(1, p.default_bucket_params));
    case ReduceBuckets::kMegatronDdp:
      // NVIDIA/Megatron-LM@d98e8a64 megatron/training/training.py:2179-2193:
      // max(40M, 1M x dp·cp); without --overlap-grad-reduce the size is None: one bucket.
      return t.overlap_dp_comm ? std::max(40e6, 1e6 * l.dp_cp()) : std::max(1.0, params);
    case ReduceBuckets::kTorchDdp25MiB:
      // huggingface/nanotron@67c5ebb6 examples/config_tiny_llama_bench.yaml:30
      // (ddp_bucket_cap_mb: 25), torch DDP's cap in bytes of the parameter dtype.
      return 25.0 * 1024 * 1024 / dtype_bytes(t.precision);
    case ReduceBuckets::kPerLayer:
      // pytorch/torchtitan@b5bcd76c torchtitan/distributed/fsdp.py:267-368: one
      // fully_shard unit per transformer block.
      return std::max(1.0, double(layer_params(s.model)) / l.tp);
  }
  return training;
}

double bucket_count(const Spec& s, const Layout& l, double params) {
  const double bucket = bucket_params_for_time(s, l, params);
  return std::max(1.0, std::ceil(params / bucket - 1e-9));
}

// ZeRO-1/2/3's parameter all-gathers: in the reduction's buckets, or one
// collective of the whole shard where the framework gathers so after the step.
// `buckets`: bucket_count(s, l, params).
double param_gather_count(const Spec& s, const Layout& l, double buckets, double params) {
  if (l.zero < 3 && profile(s.training.framework).time.param_gather_one_collective) return 1;
  if (l.zero < 3 && s.training.gather_bucket_params > 0)
    return std::max(1.0, std::ceil(params / double(s.training.gather_bucket_params) - 1e-9));
  return buckets;
}

template <class Collective>
double bucketed(double params, double n, Collective&& coll) {
  if (params <= 0) return 0;
  return n * coll(params / n);
}

// Whether a stage's data-parallel collectives run beside compute: asked for
// (Training::overlap_dp_comm) and, where measured, really so for the framework
// (TimeVariant::collectives_overlap_compute).
bool dp_overlaps(const Spec& s) {
  return s.training.overlap_dp_comm && profile(s.training.framework).time.collectives_overlap_compute;
}

// What a bucketed collective of `total` seconds in `n` buckets leaves exposed
// beside a pass of `window` seconds that readies (or consumes) the buckets one
// by one, evenly (the backward readies gradient buckets in reverse layer
// order; the forward consumes gathered ones in order): one stream runs the
// buckets in turn, each no earlier than its turn in the pass, so the last
// bucket always waits for the pass's end, and a collective slower than the
// pass also queues: exposed = max(total / n, total - window·(n-1)/n). The
// rest runs beside the pass, which it slows by `contention` per second
// (overlap_contention: the SMs the collective's kernels hold).
double bucketed_exposed(double total, double n, double window, double contention) {
  if (total <= 0) return 0;
  const double exposed = std::max(total / n, total - window * (n - 1) / n);
  return exposed + contention * (total - exposed);
}

// Gradient reduction over dp: all-reduce (ZeRO-0) or reduce-scatter (ZeRO ≥ 1)
// of the stage's gradients in grad_dtype (Rajbhandari et al. 2020 §7), in
// `buckets` collectives.
double dp_grad_reduce_time(const Spec& s, const Layout& l, const GroupPlacement& g, double params, double buckets) {
  if (l.dp_cp() <= 1) return 0;
  // In the framework's reduce dtype (Megatron: fp32 unless --grad-reduce-in-bf16).
  const double gb = grad_reduce_bytes(profile(s.training.framework), s.training);
  return bucketed(params, buckets, [&](double p) {
    return l.zero == 0 ? group_allreduce_time(s.cluster, g, p * gb)
                       : group_reducescatter_time(s.cluster, g, p * gb);
  });
}

// All-gather of the stage's parameters in the weight dtype: after the optimizer
// step with ZeRO 1/2 (Megatron's distributed optimizer), before every forward
// and backward with ZeRO-3 (Rajbhandari et al. 2020 §7.2), in `gathers` collectives.
double dp_param_gather_time(const Spec& s, const Layout& l, const GroupPlacement& g, double params, double gathers) {
  if (l.dp_cp() <= 1 || l.zero == 0) return 0;
  double wb = dtype_bytes(s.training.precision);
  if (s.training.fp8_param_gather) {
    // FP8 primary weights are gathered in FP8: 1 byte for the linear layers'
    // share of the parameters, the rest (embeddings, norms) in bf16.
    const Model& m = s.model;
    const double linear = double(m.num_layers) * double(linear_layer_weights(m));
    const double share = std::min(1.0, linear / double(total_params(m)));
    wb = share * 1.0 + (1 - share) * wb;
  }
  return bucketed(params, gathers, [&](double p) { return group_allgather_time(s.cluster, g, p * wb); });
}

// Optimizer step, memory-bound: per parameter shard it reads the gradient twice
// (norm for clipping, then the update), reads and writes the optimizer state
// (K bytes: fp32 master + Adam m, v; Rajbhandari et al. 2020 §3.1) and writes
// the 16-bit weights (fp32 training: reads and writes the weights instead), at
// Cluster::optimizer_eff() of the HBM bandwidth.
// A framework that clips over its whole fp32 gradient buffer
// (TimeVariant::clip_full_grad_bytes_per_param: nanotron) reads the shard's
// gradient once for the update and passes over every parameter's for the clip.
double optimizer_step_time(const Spec& s, const Layout& l, double params) {
  const Training& t = s.training;
  const double shard = l.zero >= 1 ? double(std::int64_t((params + l.dp_cp() - 1) / l.dp_cp())) : params;
  const Profile& prof = profile(t.framework);
  const double wb = dtype_bytes(t.precision), gb = grad_reduce_bytes(prof, t);
  const double weights = t.precision == DType::kFp32 ? 2 * wb : wb;
  // The update reads the shard's gradient once; the clip's norm reads it once more, or passes over every
  // parameter's buffer where the framework clips the whole accumulator.
  const double clip = prof.time.clip_full_grad_bytes_per_param;
  const double bytes = shard * (gb + 2 * t.optimizer_state_bytes + weights) + (clip > 0 ? params * clip : shard * gb);
  return bytes / (s.cluster.gpu.hbm_bandwidth_gbs * 1e9 * s.cluster.optimizer_eff());
}

// ZeRO-2 and 3 keep only their shard of the gradients, so every micro-batch's
// gradients are reduce-scattered in its own backward (DeepSpeed reduces its
// IPG buckets at every micro-step; Rajbhandari et al. 2020 §5.2); ZeRO 0 and 1
// accumulate the full gradients and reduce them once a step.
bool reduces_every_microbatch(const Layout& l) { return l.zero >= 2 && l.dp_cp() > 1; }

// A stage's data-parallel collectives over one step, before overlap: the
// gradient reduction (every micro-batch with ZeRO-2/3, else once) and the
// parameter all-gathers (before every forward and backward with ZeRO-3, else
// once after the step).
struct DpStepComm {
  double reduce_s = 0, reduces = 1;  // one reduction, and how many a step runs
  double gather_s = 0, gathers = 1;  // one round of parameter gathers, and how many
  double total() const { return reduce_s * reduces + gather_s * gathers; }
};
// One stage's data-parallel collectives at the layout's ZeRO stage, each
// computed once: its gradient reduction and parameter gather (one round
// each), and their bucket counts.
struct DpCollectives {
  double reduce_s = 0;  // dp_grad_reduce_time
  double gather_s = 0;  // dp_param_gather_time
  double buckets = 1;   // bucket_count
  double gathers = 1;   // param_gather_count
  double contention = 0;  // overlap_contention of the dp group
};
DpCollectives dp_collectives(const Spec& s, const Layout& l, const GroupPlacement& g, double params) {
  const double buckets = bucket_count(s, l, params), gathers = param_gather_count(s, l, buckets, params);
  return {dp_grad_reduce_time(s, l, g, params, buckets), dp_param_gather_time(s, l, g, params, gathers), buckets, gathers,
          overlap_contention(s.cluster, g)};
}

DpStepComm dp_step_comm(const Spec& s, const Layout& l, const DpCollectives& c) {
  const double m = num_microbatches(s, l);
  return {c.reduce_s, reduces_every_microbatch(l) ? m : 1, c.gather_s, l.zero >= 3 ? 2 * m : 1};
}

// DP communication a stage leaves exposed at the end of the step (ZeRO 0–2):
// the gradient reduction's buckets run as the last micro-batch's backward
// readies them (Megatron --overlap-grad-reduce: NVIDIA/Megatron-LM@d98e8a64
// megatron/core/distributed/param_and_grad_buffer.py:863-885, a bucket group's
// sync starts once all its grads are ready in the last micro-batch; torch DDP's
// bucket hooks as nanotron uses them, huggingface/nanotron@67c5ebb6
// src/nanotron/optim/gradient_accumulator.py:333-392; DeepSpeed overlap_comm,
// deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/zero/config.py:138), the last bucket after it
// (bucketed_exposed); the ZeRO-1/2 parameter all-gather's buckets beside the
// next step's first forward (--overlap-param-gather), the first before it, where
// the framework does so (TimeVariant::param_gather_overlaps_forward).
// Without overlap all of it. ZeRO-3's gathers and ZeRO-2/3's reductions are
// per micro-batch (dp_exposed_per_microbatch_time).
double dp_exposed_tail_time(const Spec& s, const Layout& l, const DpCollectives& c, const StageMicrobatch& mb) {
  const double reduce = reduces_every_microbatch(l) ? 0 : c.reduce_s;
  const double gather = (l.zero == 1 || l.zero == 2) ? c.gather_s : 0;
  if (!dp_overlaps(s)) return reduce + gather;
  const double n = c.buckets;
  // The gather beside the next forward only where the framework runs it there
  // (Megatron --overlap-param-gather); DeepSpeed and nanotron gather whole
  // after the step (TimeVariant::param_gather_overlaps_forward).
  const bool gather_overlaps =
      profile(s.training.framework).time.param_gather_overlaps_forward && s.training.overlap_param_gather;
  const double k = c.contention;
  return bucketed_exposed(reduce, n, mb.backward_s, k) +
         (gather_overlaps ? bucketed_exposed(gather, c.gathers, mb.forward_s, k) : gather);
}

// ZeRO-2/3 per micro-batch: its gradient reduce-scatter, overlapped with its
// backward (after the ZeRO-3 gathers, StageMicrobatch::zero3_s, take their share).
double dp_exposed_per_microbatch_time(const Spec& s, const Layout& l, const DpCollectives& c, const StageMicrobatch& mb) {
  if (!reduces_every_microbatch(l)) return mb.zero3_s;
  if (!dp_overlaps(s)) return mb.zero3_s + c.reduce_s;
  const double hidden = std::max(0.0, mb.backward_s - (l.zero >= 3 ? c.gather_s : 0));
  return mb.zero3_s + bucketed_exposed(c.reduce_s, c.buckets, hidden, c.contention);
}

// ZeRO-3 per micro-batch: each layer's parameters are gathered before it runs,
// in the forward and again in the backward, the next layer's prefetched while
// this one computes (DeepSpeed's stage-3 prefetch, deepspeedai/DeepSpeed@edaa7221
// deepspeed/runtime/zero/partitioned_param_coordinator.py:310, 452; FSDP's forward/backward
// prefetch of one module): the first layer's gather waits in full, every later
// one where it outlasts the layer before it, the hidden part slowing the layer
// it runs beside (overlap_contention). `layers` passes of forward_s / layers
// (backward_s / layers) each.
double zero3_exposed_gather_time(const Spec& s, const Layout& l, const DpCollectives& c, double layers,
                                 double forward_s, double backward_s) {
  if (l.zero < 3) return 0;
  const double gather = c.gather_s;
  if (!dp_overlaps(s)) return 2 * gather;
  const double n = std::max(1.0, layers), one = gather / n, k = c.contention;
  return 2 * one + (n - 1) * (exposed_beside(one, forward_s / n, k) + exposed_beside(one, backward_s / n, k));
}

// One MoE layer's expert-parallel communication per micro-batch and direction
// (Megatron-core's all-to-all dispatcher, token_dispatcher.py:682-900): the
// dispatch all-to-all of the rank's k token copies and of their fp32
// probabilities over ep, the all-gather over etp; the combine's fp32
// reduce-scatter over etp and the all-to-all back. The backward moves the
// gradients the same ways. The busiest expert rank receives
// moe_expert_load() x the mean (the imbalance, or the capacity), and every
// rank waits for it. Nothing
// overlaps it by default (overlap_moe_expert_parallel_comm = False,
// megatron/core/model_parallel_config.py:343).
double moe_ep_comm_time(const Spec& s, const Layout& l, const Groups& g) {
  const Model& m = s.model;
  const Training& t = s.training;
  const Cluster& c = s.cluster;
  if (t.moe_dispatcher == Training::MoeDispatcher::kAllGather) {
    // Megatron's allgather dispatcher (NVIDIA/Megatron-LM@d98e8a64 moe/token_dispatcher.py:233-372): the rank's
    // tokens, their fp32 probabilities and boolean routing map over every expert are all-gathered across the
    // etp x ep group, and the combine reduce-scatters the unpermuted outputs in fp32 (local_probs' dtype,
    // :365-367); the backward runs the pair the other way round (the gradients of the hidden states: a
    // reduce-scatter in the activation dtype, an all-gather in fp32). Every rank receives every token whatever
    // the routing, so the expert load does not size it.
    const int n = l.ep * l.expert_tp();
    if (n <= 1) return 0;
    const double rows = tokens(t, l) / l.tp;  // the rank's own tokens (sequence parallel with tp > 1)
    const double hidden = rows * m.hidden_size, experts = rows * m.num_experts;
    const double gather = group_allgather_time(c, g.tp_ep, n * (hidden * act_bytes(t) + experts * (4 + 1)));
    const double scatter = group_reducescatter_time(c, g.tp_ep, n * hidden * 4);
    return gather + scatter;
  }
  const double rows = tokens(t, l) / l.tp * m.experts_per_token;  // the rank's k token copies
  const double tokens_all = rows * m.hidden_size * act_bytes(t);  // what it holds for the all-to-all
  const double gathered = tokens_all * l.expert_tp();
  const double a2a = group_alltoall_time(c, g.ep, tokens_all) * 2 + group_alltoall_time(c, g.ep, rows * 4);
  const double etp = group_allgather_time(c, g.etp, gathered) + group_reducescatter_time(c, g.etp, gathered / act_bytes(t) * 4);
  return moe_expert_load(profile(t.framework), t, l.ep) * (a2a + etp);
}


// What every layer of every stage costs per micro-batch; computed once per layout.
struct PerLayer {
  LayerTime forward;
  TpLayerComm tp;  // a layer's exposed TP collectives
  // A mixture-of-experts layer's: its forward, TP collectives and expert-
  // parallel all-to-alls (+ etp all-gather / reduce-scatter), per direction.
  LayerTime moe_forward;
  TpLayerComm moe_tp;
  double ep_forward_s = 0, ep_backward_s = 0;
  // The ranks of the output layer, the fp32 cast and the loss (the last,
  // unless a compute-cost split puts them earlier; CostSplit).
  int output_stage = 0, cast_stage = 0, loss_stage = 0;
  Groups groups;  // place_groups() of the layout
  // What a stage costs per micro-batch whatever its ZeRO stage and
  // recomputation (stage_fixed), kept for representative_stages() (stage -1:
  // not kept).
  struct StageFixed {
    int stage = -1;
    double layers = 0, moe_layers = 0;
    StageParams sp;
    double embedding = 0, head_forward = 0, head_backward = 0, loss_forward = 0, loss_backward = 0;
    double tp_edges = 0;  // tp_embedding_output_comm_time of the stage
    double pp = 0;        // pipeline sends (and the logits' between split output and loss ranks)
    // The stage's DP collectives per ZeRO stage 0-3, filled on first use
    // (stage_dp): the memo's key has its ZeRO stage normalised away.
    mutable std::array<DpCollectives, 4> dp;
    mutable std::array<bool, 4> dp_known{};
  };
  std::array<StageFixed, 3> fixed;
  const StageFixed* fixed_of(int stage) const {
    for (const StageFixed& f : fixed)
      if (f.stage == stage) return &f;
    return nullptr;
  }
  // The model's FLOPs per step and recomputation's parts (the spec's alone).
  double model_flops = 0, op_sac_flops = 0;
  RecomputeFlopsParts recompute_parts;
};

// The stage's DP collectives (dp_collectives of its dp_params), kept in
// PerLayer for the stages it keeps.
const DpCollectives& stage_dp(const Spec& s, const Layout& l, const Groups& g, const PerLayer& pl, int stage, double params,
                              DpCollectives* computed) {
  const PerLayer::StageFixed* f = pl.fixed_of(stage);
  if (!f || l.zero < 0 || l.zero > 3) return *computed = dp_collectives(s, l, g.dp, params);
  if (!f->dp_known[l.zero]) f->dp[l.zero] = dp_collectives(s, l, g.dp, params), f->dp_known[l.zero] = true;
  return f->dp[l.zero];
}

// The stage's PerLayer::StageFixed.
PerLayer::StageFixed stage_fixed(const Spec& s, const Layout& l, int stage, const Groups& g, const PerLayer& pl) {
  const Model& m = s.model;
  const Training& t = s.training;
  const Cluster& c = s.cluster;
  PerLayer::StageFixed f;
  f.stage = stage;
  f.layers = double(stage_layers(m, l, stage));
  f.moe_layers = m.is_moe() ? double(stage_moe_layers(m, l, stage)) : 0.0;
  f.sp = stage_params(m, l, stage, t.mtp);
  const bool first = stage == 0, holds_output = stage == pl.output_stage, holds_loss = stage == pl.loss_stage;
  if (first) f.embedding = embedding_forward_time(m, t, l, c);
  if (holds_output) f.head_forward = output_head_forward_time(m, t, l, c), f.head_backward = output_head_backward_time(m, t, l, c);
  if (holds_loss) f.loss_forward = loss_forward_time(m, t, l, c), f.loss_backward = loss_backward_time(m, t, l, c);
  f.tp_edges = tp_embedding_output_comm_time(m, t, l, c, g.tp, first, holds_output);
  // nanotron's split with the lm_head, the fp32 cast and the loss on
  // different (consecutive) ranks: what follows the lm_head down the pipeline
  // is the logits, bf16 to the cast's rank, fp32 on to the loss's, their
  // gradients coming back, instead of the s·b·h activation.
  const int out_stage = pl.output_stage, ce_stage = pl.loss_stage, cast = pl.cast_stage;
  const double logits = tokens(t, l) * double((m.vocab_size + l.tp - 1) / l.tp);
  f.pp = pipeline_p2p_time(m, t, l, c, stage, g.tp, [&](int a) {
    if (out_stage == ce_stage || a < out_stage || a >= ce_stage) return 0.0;
    return a == out_stage && cast != out_stage ? logits * act_bytes(t) : logits * 4;
  });
  return f;
}

PerLayer per_layer(const Spec& s, const Layout& l, const Groups& g) {
  PerLayer p;
  p.forward = layer_forward_time(s.model, s.training, l, s.cluster);
  p.tp = tp_layer_comm(s.model, s.training, l, s.cluster, g.tp, p.forward);
  if (s.model.is_moe()) {
    const Model& m = s.model;
    p.moe_forward = layer_forward_time(m, s.training, l, s.cluster, LayerKind::kMoe);
    p.moe_tp = tp_layer_comm(m, s.training, l, s.cluster, g.tp, p.moe_forward, 1 + int(m.num_shared_experts > 0));
    p.ep_forward_s = p.ep_backward_s = moe_ep_comm_time(s, l, g);
  }
  p.output_stage = p.cast_stage = p.loss_stage = l.pp - 1;
  if (l.balance == StageBalance::kCost && l.pp > 1) {
    const CostSplit cs = cost_split(s.model, l.pp);
    p.output_stage = cs.head_stage, p.cast_stage = cs.cast_stage, p.loss_stage = cs.loss_stage;
  } else {
    const FixedList<int, 3> stages = representative_stages(l);
    for (int i = 0; i < stages.size(); ++i) p.fixed[i] = stage_fixed(s, l, stages[i], g, p);
  }
  p.groups = g;
  const Training& t = s.training;
  p.model_flops = model_flops_per_step(s.model, t);
  p.recompute_parts = recompute_flops_parts(s.model, t.global_batch_size, t.seq_length);
  if (profile(t.framework).act.op_sac)
    p.op_sac_flops = op_sac_recompute_flops(s.model, t.global_batch_size, t.seq_length, t.flash_attention);
  return p;
}

// The key per_layer depends on: the layout less its ZeRO stage and
// recomputation (neither changes a layer's forward or its TP collectives).
Layout per_layer_key(Layout l) {
  l.zero = 0;
  l.recompute = Recompute::kNone;
  l.recompute_method = RecomputeMethod::kUniform;
  l.recompute_layers = 1;
  return l;
}

// Records the terms of one micro-batch for explain --formulas (nullptr in the
// search: nothing formatted, nothing allocated).
struct TimeTermSink {
  std::vector<TimeTerm>* out = nullptr;
  template <class Formula>
  void add(const char* name, double seconds, Formula&& formula, const char* source = "") {
    if (out && seconds > 0) out->push_back({name, formula(), seconds, source});
  }
};

StageMicrobatch stage_microbatch_with(const Spec& s, const Layout& l, int stage, const Groups& g, const PerLayer& pl,
                                      const PerLayer::StageFixed& fx, TimeTermSink sink);

StageMicrobatch stage_microbatch(const Spec& s, const Layout& l, int stage, const Groups& g,
                                 const PerLayer& pl, TimeTermSink sink = {}) {
  if (const PerLayer::StageFixed* kept = pl.fixed_of(stage)) return stage_microbatch_with(s, l, stage, g, pl, *kept, sink);
  return stage_microbatch_with(s, l, stage, g, pl, stage_fixed(s, l, stage, g, pl), sink);
}

StageMicrobatch stage_microbatch_with(const Spec& s, const Layout& l, int stage, const Groups& g, const PerLayer& pl,
                                      const PerLayer::StageFixed& fx, TimeTermSink sink) {
  const Model& m = s.model;
  const Training& t = s.training;
  const Cluster& c = s.cluster;
  const bool first = stage == 0;
  const int out_stage = pl.output_stage, ce_stage = pl.loss_stage;
  const bool holds_output = stage == out_stage, holds_loss = stage == ce_stage;
  const double layers = fx.layers;
  // With experts, the stage's average layer: its MoE layers' share of the MoE
  // layer's times, the rest a dense layer's.
  const double moe_layers = fx.moe_layers;
  const double w = layers > 0 ? moe_layers / layers : 0.0;
  const LayerTime f = w > 0 ? mix(pl.forward, pl.moe_forward, w) : pl.forward;
  const TpLayerComm tpc = w > 0 ? TpLayerComm{pl.tp.forward_s * (1 - w) + pl.moe_tp.forward_s * w,
                                              pl.tp.backward_s * (1 - w) + pl.moe_tp.backward_s * w}
                                : pl.tp;
  const Profile& prof = profile(t.framework);
  const TimeVariant& tv = prof.time;
  StageMicrobatch r;
  const StageParams& sp = fx.sp;
  r.params = double(sp.total());
  r.dp_params = r.optimizer_params = r.params;
  if (const double experts = double(sp.experts()); experts > 0) {
    const double dp = l.dp_cp(), edp = l.edp();
    r.dp_params = r.params - experts + (dp > 1 ? experts * ((edp - 1) / edp) / ((dp - 1) / dp) : 0);
    r.optimizer_params = r.params - experts + (l.zero >= 1 ? experts * dp / edp : experts);
  }
  r.forward_s = layers * f.total;
  // Layers the backward re-runs whole (full recompute: all, or with the block
  // method the first recompute_layers of each chunk).
  double recomputed = 0;
  if (l.recompute == Recompute::kFull)
    for (int c = 0; c < l.vpp; ++c) recomputed += recomputed_layers(l, chunk_layers(int(layers), l, stage, c));
  const double recompute_s =
      l.recompute == Recompute::kFull ? recomputed * f.total : layers * layer_recompute_time(f, l.recompute, prof.act.op_sac);
  r.backward_s = layers * layer_backward_time(f, t.flash_attention) + recompute_s;
  sink.add("linear GEMMs", layers * (f.linear + f.linear_backward), [&] {
    const bool fp8 = fp8_gemms(t, c);
    std::string shape;
    if (c.gemm_k_overhead > 0) shape += fmt::format(" x k / (k + {:g})", c.gemm_k_overhead);
    if (c.gemm_fixed_us > 0) shape += fmt::format(", + {:g} us per GEMM", c.gemm_fixed_us);
    return fmt::format("{:g} layers x (forward {:.3f} ms + input/weight gradients {:.3f} ms): QKV, out-proj, fc1, fc2 at "
                       "{} {:g} x tile utilization on {} SMs{}",
                       layers, f.linear * 1e3, f.linear_backward * 1e3, fp8 ? "FP8 peak x gemm_efficiency_fp8" : "gemm_efficiency",
                       fp8 ? c.gemm_eff_fp8() : c.gemm_efficiency, c.gpu.sm_count, shape);
  }, "cluster gemm_efficiency (the shipped H100 and H200: MEASURED under sustained load, docs/gpu.md; paraplan "
     "calibrate refits it) x the last wave of output tiles on the SMs (costmodel/time.cpp gemm_time); the four GEMMs "
     "per layer and their backward pair: Narayanan et al. 2021 §3");
  const double core_b = (t.flash_attention ? 2.5 : 2.0) * f.core;
  sink.add("attention core", layers * (f.core + core_b), [&] {
    return t.flash_attention
               ? fmt::format("{:g} layers x {:.3f} ms x 3.5 (forward + backward): flash attention at {:.0f} TFLOP/s on the "
                             "full s^2 count (s {}, head dim {}){}{}",
                             layers, f.core * 1e3, flash_attention_rate(m, t, l, c) / 1e12, t.seq_length / l.cp,
                             attention_head_dim(m),
                             table_attention(c)
                                 ? fmt::format(", x {:.3f} for the causal waves of {:g} (sequence, head) pairs on {} SMs",
                                               flash_attention_waves(m, t, l, c),
                                               double(l.mbs) * m.num_attention_heads / l.tp, c.gpu.sm_count)
                                 : std::string(),
                             flash_factors_text(m, t, c))
               : fmt::format("{:g} layers x {:.3f} ms x 3: QK^T, softmax, attention.V unfused", layers, f.core * 1e3);
  }, t.flash_attention ? (table_attention(c) ? "cluster gpu.flash_attention_tflops"
                                              : "cluster attention_efficiency x peak_tflops_bf16 (no flash-attention "
                                                "table for this GPU; costmodel/time.cpp flash_attention_rate)")
                       : "QK^T and attention.V as batched GEMMs at gemm_efficiency; the fused scale-mask-softmax and the "
                         "attention dropout read and write the b·heads·s² scores (Korthikanti et al. 2022 §4.1)");
  const double mem = f.total - f.core - f.linear;
  sink.add("memory-bound ops", layers * (mem + f.memory_backward), [&] {
    const StridedBytes sb = layer_strided_bytes(m, t, l, LayerKind::kDense);
    return fmt::format("{:g} layers x ({:.3f} ms forward + {:.3f} ms backward): norms, residuals, dropout, rotary, "
                       "activation{}{}",
                       layers, mem * 1e3, f.memory_backward * 1e3,
                       tv.layer_copies_q + tv.layer_copies_kv + tv.layer_copies_ffn > 0
                           ? fmt::format(", framework copies ({:g} q + {:g} kv + {:g} ffn per token)",
                                         tv.layer_copies_q, tv.layer_copies_kv, tv.layer_copies_ffn)
                           : std::string(),
                       sb.forward > 0
                           ? fmt::format("; of them on strided operands {:.1f} MB forward + {:.1f} MB backward (the copies "
                                         "once, the GLU {} passes per ffn element) at strided_hbm_efficiency {:g}, the "
                                         "rest at hbm_efficiency {:g} and twice backward",
                                         sb.forward / 1e6, sb.backward / 1e6, tv.glu_backward_passes,
                                         c.strided_hbm_eff(), c.hbm_efficiency)
                           : std::string(" (backward 2x)"));
  }, tv.strided_layer_ops ? tv.strided_layer
     : *tv.layer_copies ? tv.layer_copies
                        : "the layer's elementwise ops' reads and writes (costmodel/time.cpp layer_memory_bound_bytes, "
                          "Korthikanti et al. 2022 §4 op list) at the cluster's hbm_efficiency");
  sink.add("recompute", recompute_s, [&] {
    if (l.recompute == Recompute::kSelective && prof.act.op_sac)
      return fmt::format("per-op selective: {:g} layers x {:.3f} ms (the unkept linears: wk, wo and {} of a {} MLP, and "
                         "every memory-bound op; not the attention)",
                         layers, f.op_sac_recompute * 1e3, m.gated() ? "w3" : "w2", m.gated() ? "gated" : "plain");
    return fmt::format("{} recompute: {:g} layer forwards re-run", recompute_name(l.recompute),
                       l.recompute == Recompute::kFull ? recomputed : layers);
  }, l.recompute == Recompute::kSelective && prof.act.op_sac ? prof.act.op_sac_source
     : l.recompute == Recompute::kSelective
         ? "Korthikanti et al. 2022 §4.2 (selective: the attention core re-run in the backward)"
         : "Korthikanti et al. 2022 §4.1 (full: each checkpointed layer's forward re-run before its backward); "
           "NVIDIA/Megatron-LM@d98e8a64 megatron/core/recompute.py:157-180 (which layers, with recompute_method)");
  // A block outside the layers: its forward and backward join the stage's.
  auto block = [&](const char* name, double fwd, double bwd, auto&& formula, const char* source = "") {
    r.forward_s += fwd;
    r.backward_s += bwd;
    sink.add(name, fwd + bwd, formula, source);
  };
  if (first) {
    const double e = fx.embedding;
    // The backward scatter-adds the gradient into the embedding rows: 2x the lookup.
    block("embedding", e, 2 * e, [&] { return fmt::format("lookup {:.3f} ms + gradient scatter-add 2x", e * 1e3); },
          "memory-bound: the rows read and the output written at hbm_efficiency (costmodel/time.cpp); the backward's "
          "scatter-add reads and writes them (JUDGEMENT: 2x)");
  }
  if (holds_output) {
    const double fo = fx.head_forward, bo = fx.head_backward;
    block("output layer", fo, bo, [&] {
      return fmt::format("final norm + logits GEMM over vocab/tp {}: forward {:.3f} ms + backward {:.3f} ms",
                         (m.vocab_size + l.tp - 1) / l.tp, fo * 1e3, bo * 1e3);
    }, "the logits GEMM [s·b, h] x [h, vocab/tp] and its two backward GEMMs at gemm_efficiency, the norm memory-bound "
       "(costmodel/time.cpp output_head_forward_time, output_head_backward_time)");
  }
  if (holds_loss) {
    block("cross-entropy", fx.loss_forward, fx.loss_backward, [&] {
      const int f = tv.ce_forward(t.cross_entropy_fusion, l.tp), b = tv.ce_backward(t.cross_entropy_fusion, l.tp);
      return fmt::format("{} + {} B per logit (the fp32 cast and {} + {} fp32 passes) x s/cp x b x vocab/tp",
                         ce_bytes_per_logit(t, f), ce_bytes_per_logit(t, b), f, b);
    }, tv.ce_source(t.cross_entropy_fusion, l.tp));
  }
  // Megatron's trained MTP modules on the last rank (Training::mtp), each: the
  // eh_proj GEMM (2h -> h/tp over the micro-batch's tokens), one layer as the
  // decoder's last (re-run in the backward under full recompute, the module
  // being one checkpoint), the shared output layer and a second loss
  // (NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/multi_token_prediction.py:
  // 1331-1342, 1395-1445, 1700-1712, 1013-1027). Their TP and expert
  // collectives join the stage's below.
  const bool mtp = t.mtp && m.mtp_layers > 0 && stage == l.pp - 1;
  const bool mtp_moe = mtp && m.is_moe_layer(m.num_layers - 1);
  const double mtp_n = mtp ? double(m.mtp_layers) : 0.0;
  // Forward runs of the MTP layer per micro-batch: 2 under full recompute (one checkpoint).
  const double mtp_forwards = l.recompute == Recompute::kFull ? 2.0 : 1.0;
  if (mtp) {
    const LayerTime& lf = mtp_moe ? pl.moe_forward : pl.forward;
    const Gemm eh{"eh_proj", 1, tokens(t, l), double(m.hidden_size) / l.tp, 2.0 * m.hidden_size};
    const int eb = act_bytes(t);
    const double ehf = gemm_time(eh, c, eb), ehb = gemm_time(gemm_input_gradient(eh), c, eb) +
                                                   gemm_time(gemm_weight_gradient(eh), c, eb);
    const double fo = output_head_forward_time(m, t, l, c), bo = output_head_backward_time(m, t, l, c);
    const double lo = loss_forward_time(m, t, l, c), lb = loss_backward_time(m, t, l, c);
    const double re = (mtp_forwards - 1) * lf.total;
    block("multi-token prediction", mtp_n * (ehf + lf.total + fo + lo),
          mtp_n * (ehb + layer_backward_time(lf, t.flash_attention) + re + bo + lb), [&] {
            return fmt::format("{:g} modules x (eh_proj {:.3f} ms x 3 + one {} layer {:.3f} ms forward{} + output layer "
                               "{:.3f} + {:.3f} ms + cross-entropy {:.3f} + {:.3f} ms)",
                               mtp_n, ehf * 1e3, mtp_moe ? "MoE" : "dense", lf.total * 1e3,
                               re > 0 ? " (re-run: full recompute)" : "", fo * 1e3, bo * 1e3, lo * 1e3, lb * 1e3);
          }, "NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/multi_token_prediction.py:1331-1342, 1395-1445, 1013-1027");
  }
  // Gradient accumulation as its own pass after the backward (nanotron's fp32
  // accumulator), over the stage's parameters.
  const double unfused = tv.unfused_grad_accum_bytes_per_param ? tv.unfused_grad_accum_bytes_per_param(t) : 0.0;
  const double accum = t.gradient_accumulation_fusion ? tv.grad_accum_bytes_per_param
                                                      : std::max(tv.grad_accum_bytes_per_param, unfused);
  if (accum > 0) {
    const double a = memory_bound_time(accum * r.params, c);
    r.backward_s += a;
    sink.add("gradient accumulation", a, [&] { return fmt::format("{:g} B x {:.4g} params of the stage", accum, r.params); },
             t.gradient_accumulation_fusion ? tv.grad_accum : tv.unfused_grad_accum);
  }
  // The layers' TP collectives, exposed after the framework's overlap, + the
  // forward's again for each recomputed layer (Korthikanti et al. 2022 §5).
  r.tp_comm_s = layers * (tpc.forward_s + tpc.backward_s) + recomputed * tpc.forward_s + fx.tp_edges;
  if (mtp) {
    // The MTP layer's collectives, eh_proj's output all-gather (gather_from_tensor_model_parallel_region,
    // multi_token_prediction.py:1352) and the output layer's and loss's again.
    const TpLayerComm& lt = mtp_moe ? pl.moe_tp : pl.tp;
    r.tp_comm_s += mtp_n * (mtp_forwards * lt.forward_s + lt.backward_s +
                            tp_embedding_output_comm_time(m, t, l, c, g.tp, true, true));
  }
  sink.add("TP collectives (exposed)", r.tp_comm_s, [&] {
    return fmt::format("{:g} layers x (forward {:.3f} ms + backward {:.3f} ms) + {:g} recomputed forwards{}", layers,
                       tpc.forward_s * 1e3, tpc.backward_s * 1e3, recomputed,
                       t.tp_comm_overlap ? "; --tp-comm-overlap" : "");
  }, !tv.collectives_overlap_compute && !t.tp_comm_overlap ? tv.collectives_overlap
     : l.sp || t.tp_async_allreduce
         ? tv.tp_backward
         : "NVIDIA/Megatron-LM@de7dc40f megatron/mpu/mappings.py:88-89 (_CopyToModelParallelRegion.backward: "
           "_reduce(grad_output), in line; the async all-reduce from 3f652469, 2021-09-02, off with "
           "--no-async-tensor-model-parallel-allreduce)");
  if (moe_layers > 0 || mtp_moe) {
    // Every MoE layer's dispatch and combine, forward and backward, + the
    // forward's again for each recomputed one (and the MTP modules' MoE layers).
    r.ep_comm_s = moe_layers * (pl.ep_forward_s + pl.ep_backward_s) + recomputed * w * pl.ep_forward_s +
                  (mtp_moe ? mtp_n * (mtp_forwards * pl.ep_forward_s + pl.ep_backward_s) : 0.0);
    if (t.moe_ep_overlap) {
      // --overlap-moe-expert-parallel-comm (pp = 1, no full recompute: moe_dispatch_problem): the combined 1F1B
      // schedule runs micro-batch i+1's forward beside micro-batch i's backward, layer by layer, the dispatch and
      // combine of one beside the other's attention and MLP compute (NVIDIA/Megatron-LM@d98e8a64
      // pipeline_parallel/combined_1f1b.py:35-110); the first forward and the last backward run alone
      // (phases 0 and m). Each overlapped all-to-all is exposed only beyond the layer it runs beside, which
      // it slows by the contention of its NCCL channels (exposed_beside).
      const double mb = num_microbatches(s, l), share = mb > 1 ? (mb - 1) / mb : 0.0;
      const double k = overlap_contention(c, pl.groups.ep);
      const double fwd = pl.moe_forward.total, bwd = layer_backward_time(pl.moe_forward, t.flash_attention);
      const double hidden = exposed_beside(pl.ep_forward_s, bwd, k) + exposed_beside(pl.ep_backward_s, fwd, k);
      r.ep_comm_s = moe_layers * ((1 - share) * (pl.ep_forward_s + pl.ep_backward_s) + share * hidden);
    }
    sink.add("expert all-to-alls (exposed)", r.ep_comm_s, [&] {
      if (t.moe_dispatcher == Training::MoeDispatcher::kAllGather)
        return fmt::format("{:g} MoE layers x (forward {:.3f} ms + backward {:.3f} ms): the allgather dispatcher, every "
                           "token of the etp x ep group of {} ranks gathered and its outputs reduce-scattered in fp32 "
                           "(token_dispatcher.py:233-372)",
                           moe_layers, pl.ep_forward_s * 1e3, pl.ep_backward_s * 1e3, l.ep * l.expert_tp());
      if (t.moe_ep_overlap)
        return fmt::format("{:g} MoE layers x (forward {:.3f} ms + backward {:.3f} ms), beside the other micro-batch's "
                           "layer compute in all but the first forward and last backward "
                           "(--overlap-moe-expert-parallel-comm, combined_1f1b.py:35-110)",
                           moe_layers, pl.ep_forward_s * 1e3, pl.ep_backward_s * 1e3);
      return fmt::format("{:g} MoE layers x (forward {:.3f} ms + backward {:.3f} ms): dispatch + combine of {:.4g} MB "
                         "per rank over ep {} ({} node{}), etp {}, {} at {:g}x the mean",
                         moe_layers, pl.ep_forward_s * 1e3, pl.ep_backward_s * 1e3, moe_alltoall_bytes(m, t, l) / 1e6, l.ep,
                         g.ep.nodes, g.ep.nodes > 1 ? "s" : "", l.expert_tp(),
                         prof.moe_padded_to_capacity ? "every expert's buffer padded to its capacity"
                                                     : "the busiest expert rank",
                         moe_expert_load(prof, t, l.ep));
    }, tv.moe_alltoall);
  }
  r.pp_comm_s = fx.pp;
  const PipelineOverlap ppo =
      pipeline_send_overlap(s, l, stage, fx.pp, r.forward_s, r.backward_s, overlap_contention(c, g.pp));
  if (ppo.on) r.pp_comm_s = ppo.exposed_s;
  const bool polled = sink.out && tv.p2p_poll_sleep_s > 0 && l.pp > 1 && pipeline_crosses_nodes(c, l);
  sink.add("pipeline sends", r.pp_comm_s, [&] {
    const int links = pipeline_links(l, stage).count();
    std::string text = fmt::format("{} link{} x vpp {}, each carrying {:.4g} MB one way and its gradient the other "
                                   "at once, per micro-batch{}",
                                   links, links == 1 ? "" : "s", l.vpp, pipeline_send_bytes(m, t, l) / 1e6,
                                   out_stage != ce_stage && stage >= out_stage
                                       ? " (the logits instead past the output rank)" : "");
    if (ppo.on)
      text += fmt::format(", {:.3f} ms each: in line in the warm-up and cool-down ({:.3g} of the rank's {:g} chunk "
                          "steps), else beside the other direction's chunk ({:.3f} ms forward, {:.3f} ms backward), "
                          "slowing it by its NCCL channels' SMs: {:.3f} ms of each forward send and {:.3f} ms of each "
                          "backward send exposed",
                          ppo.one_s * 1e3, ppo.warm_steps, ppo.steps, r.forward_s / l.vpp * 1e3,
                          r.backward_s / l.vpp * 1e3, ppo.forward_exposed_s * 1e3, ppo.backward_exposed_s * 1e3);
    if (polled)
      text += fmt::format("; over the network the framework's receives poll their metadata with {:.0f} ms sleeps, not "
                          "priced (a warning says where the time model cannot vouch for the layout)",
                          tv.p2p_poll_sleep_s * 1e3);
    return text;
  }, ppo.on ? tv.p2p_overlap : polled ? tv.p2p_poll
     : "each link's transfer at the NVLink or network rate of the pair (costmodel/time.cpp pp_link; "
       "NVIDIA/Megatron-LM@d98e8a64 megatron/core/pipeline_parallel/p2p_communication.py:32-54, 536-600)");
  const CpRing ring = cp_ring_exposed_time(m, t, l, c, g.cp, f.core);
  r.cp_comm_s = layers * (ring.forward_s + ring.backward_s) + recomputed * ring.forward_s;
  sink.add("context-parallel ring (exposed)", r.cp_comm_s,
           [&] { return fmt::format("{:g} layers x cp-1 = {} K|V steps beside one chunk's attention", layers, l.cp - 1); },
           "NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/attention/dot_product_attention/"
           "context_parallel.py:1685-1717 (each K|V step sent beside the previous chunk's attention), :2397-2401");
  if (l.zero >= 3) {
    DpCollectives computed_dp;
    r.zero3_s = zero3_exposed_gather_time(s, l, stage_dp(s, l, g, pl, stage, r.dp_params, &computed_dp), layers,
                                          r.forward_s, r.backward_s);
  }
  sink.add("ZeRO-3 gathers (exposed)", r.zero3_s,
           [&] { return fmt::format("{:g} layer gathers, each prefetched beside the layer before", layers); },
           prof.gathered);
  // The host dispatches the stage's layers (and a recomputed layer's forward,
  // a third of a layer, again) no faster than the framework's measured time
  // per layer: where the GPU has less to do, it waits for the host.
  if (const double per_layer = tv.host_layer_s(l.tp); per_layer > 0) {
    const double host = (layers + recomputed / 3) * per_layer;
    r.host_wait_s = std::max(0.0, host - r.gpu());
    sink.add("host dispatch (GPU waits)", r.host_wait_s, [&] {
      return fmt::format("({:g} layers{}) x {:.2f} ms of the host per layer per micro-batch at tp > 1 = {:.3f} ms, "
                         "less the GPU's {:.3f} ms",
                         layers, recomputed > 0 ? fmt::format(" + {:g} recomputed forwards / 3", recomputed) : std::string(),
                         per_layer * 1e3, host * 1e3, r.gpu() * 1e3);
    }, tv.host_layer);
  }
  return r;
}

}  // namespace

StageMicrobatch stage_microbatch_time(const Spec& s, const Layout& l, int stage) {
  const Groups g = place_groups(s.cluster, l);
  return stage_microbatch(s, l, stage, g, per_layer(s, l, g));
}

std::vector<TimeTerm> stage_time_terms(const Spec& s, const Layout& l, int stage) {
  std::vector<TimeTerm> out;
  const Groups g = place_groups(s.cluster, l);
  stage_microbatch(s, l, stage, g, per_layer(s, l, g), TimeTermSink{&out});
  return out;
}

std::vector<TimeTerm> stage_dp_terms(const Spec& s, const Layout& l, int stage) {
  std::vector<TimeTerm> out;
  if (l.dp_cp() <= 1) return out;
  const Groups g = place_groups(s.cluster, l);
  const StageMicrobatch mb = stage_microbatch(s, l, stage, g, per_layer(s, l, g));
  const double params = mb.dp_params, m = num_microbatches(s, l);
  const Profile& prof = profile(s.training.framework);
  const DpCollectives dc = dp_collectives(s, l, g.dp, params);
  const double n = dc.buckets, gb = grad_reduce_bytes(prof, s.training);
  const bool every = reduces_every_microbatch(l);
  const DpStepComm step = dp_step_comm(s, l, dc);
  const double reduce = step.reduce_s;
  out.push_back(
      {"gradient reduction",
       fmt::format("{} of {:.0f} buckets of {:.4g} params x {:g} B over dp{} {}{}, {}", l.zero == 0 ? "all-reduce" : "reduce-scatter",
                   n, params / n, gb, l.cp > 1 ? "·cp" : "", l.dp_cp(),
                   s.training.grad_bucket_params_given ? " (training.grad_bucket_params)" : "",
                   every ? fmt::format("every micro-batch: {:.3f} ms x {:.0f}", reduce * 1e3, m) : std::string("once a step")),
       step.reduce_s * step.reduces,
       s.training.grad_bucket_params_given ? "training.grad_bucket_params (the spec)" : prof.time.reduce_bucket});
  if (l.zero >= 1) {
    const double gather = step.gather_s, k = dc.gathers;
    out.push_back({"parameter all-gather",
                   fmt::format("{:.0f} collective{} of {:.4g} params over dp{} {}, {}", k, k == 1 ? "" : "s", params / k,
                               l.cp > 1 ? "·cp" : "", l.dp_cp(),
                               l.zero >= 3 ? fmt::format("before every forward and backward: {:.3f} ms x 2 x {:.0f}", gather * 1e3, m)
                                           : std::string("once a step")),
                   step.gather_s * step.gathers,
                   l.zero >= 3 ? prof.gathered : *prof.time.param_gather ? prof.time.param_gather : prof.time.reduce_bucket});
  }
  const double exposed = m * dp_exposed_per_microbatch_time(s, l, dc, mb) + dp_exposed_tail_time(s, l, dc, mb);
  out.push_back({"exposed of these",
                 dp_overlaps(s)
                     ? fmt::format("the buckets overlap the backward that readies them: E = max(R/n, R - B(n-1)/n), "
                                   "the rest slowing the backward beside it by {} NCCL channels' SMs: E + {:.3f} (R - E)",
                                   nccl_channels(s.cluster, g.dp), dc.contention)
                     : s.training.overlap_dp_comm
                           ? fmt::format("all of it: {}'s collectives measured in line with compute", prof.name)
                           : std::string("no overlap (overlap_dp_comm off): all of it"),
                 exposed,
                 !s.training.overlap_dp_comm ? "training.overlap_dp_comm (the spec)"
                 : !dp_overlaps(s)           ? prof.time.collectives_overlap
                                             : "costmodel/time.cpp dp_exposed_per_microbatch_time, dp_exposed_tail_time "
                                               "(docs/frameworks.md, \"DP overlap\": the last bucket after the "
                                               "backward, the rest beside it)"});
  return out;
}

StageStepTerms stage_step_terms(const Spec& s, const Layout& l, int stage) {
  const Groups g = place_groups(s.cluster, l);
  const StageMicrobatch mb = stage_microbatch(s, l, stage, g, per_layer(s, l, g));
  const double m = num_microbatches(s, l), params = mb.dp_params;
  StageStepTerms r;
  r.forward_s = m * mb.forward_s;
  r.backward_s = m * mb.backward_s;
  r.optimizer_s = optimizer_step_time(s, l, mb.optimizer_params);
  r.tp_comm_s = m * mb.tp_comm_s;
  r.pp_comm_s = m * mb.pp_comm_s;
  r.cp_comm_s = m * mb.cp_comm_s;
  r.ep_comm_s = m * mb.ep_comm_s;
  r.host_wait_s = m * mb.host_wait_s;
  r.bubble_s = estimate_time(s, l).bubble_s;
  r.dp_comm_s = dp_step_comm(s, l, dp_collectives(s, l, g.dp, params)).total();
  return r;
}

struct TimeCache::Impl {
  LayoutMemo<PerLayer, 4> layers;
};
TimeCache::TimeCache() : impl_(std::make_unique<Impl>()) {}
TimeCache::~TimeCache() = default;

namespace {
StepTime estimate_time_with(const Spec& s, const Layout& l, const PerLayer& layer);
}  // namespace

StepTime estimate_time(const Spec& s, const Layout& l, TimeCache* cache) {
  if (!cache) return estimate_time_with(s, l, per_layer(s, l, place_groups(s.cluster, l)));
  return estimate_time_with(
      s, l, cache->impl().layers.get(&s, per_layer_key(l), [&] { return per_layer(s, l, place_groups(s.cluster, l)); }));
}

namespace {
StepTime estimate_time_with(const Spec& s, const Layout& l, const PerLayer& layer) {
  StepTime r;
  r.microbatches = num_microbatches(s, l);
  const double m = r.microbatches;

  // Every middle stage of a layer split has the same layers and no embedding
  // or output layer, so three stages stand for all: the first, one middle
  // (stage 1), the last. nanotron's compute-cost split gives every rank its
  // own contents: all of them.
  const int last = l.pp - 1;
  const Groups& g = layer.groups;
  const bool every = l.balance == StageBalance::kCost && l.pp > 1;
  double all = 0, tail = -1, tail_params = 0, tail_dp = 0, tail_opt = 0;
  int tail_stage = 0;
  StageMicrobatch crit;
  double crit_total = -1;
  auto visit = [&](int stage, double weight) {
    const StageMicrobatch mb = stage_microbatch(s, l, stage, g, layer);
    all += weight * mb.total();
    if (mb.total() > crit_total) crit = mb, crit_total = mb.total(), r.critical_stage = stage;
    // End of step: DP reduction left exposed + optimizer, on the slowest stage.
    const double params = mb.dp_params;
    DpCollectives computed_dp;
    const double dp = dp_exposed_tail_time(s, l, stage_dp(s, l, g, layer, stage, params, &computed_dp), mb),
                 opt = optimizer_step_time(s, l, mb.optimizer_params);
    if (dp + opt > tail) tail = dp + opt, tail_params = params, tail_dp = dp, tail_opt = opt, tail_stage = stage;
  };
  if (every) {
    for (int i = 0; i < l.pp; ++i) visit(i, 1);
  } else {
    // Stage 1 stands for the last - 1 middle stages.
    for (const int i : representative_stages(l)) visit(i, i == 1 && last > 1 ? last - 1 : 1);
  }
  r.microbatch_s = crit_total;
  const double crit_params = crit.dp_params;

  // A pipeline of stages of unequal time t_i (uneven layer counts, the
  // embedding and the output layer): m micro-batches pass the slowest stage
  // one after another, and the first forward and last backward pass every
  // other stage once: step = m·t_crit + Σ_{i≠crit} t_i (the makespan of m
  // identical jobs through a flow shop of p machines, Σ_i t_i + (m − 1)·max_i t_i;
  // with equal stages Narayanan et al. 2021's (m + p − 1)·t, eq. 1). Interleaving
  // divides the fill and drain by v (§2.2).
  const double v = l.interleaved() ? l.vpp : 1;
  r.bubble_s = std::max(0.0, all - r.microbatch_s) / v;
  r.compute_s = m * (crit.forward_s + crit.backward_s);
  r.tp_comm_s = m * crit.tp_comm_s;
  r.pp_comm_s = m * crit.pp_comm_s;
  r.cp_comm_s = m * crit.cp_comm_s;
  r.ep_comm_s = m * crit.ep_comm_s;
  r.host_wait_s = m * crit.host_wait_s;

  DpCollectives computed_dp;
  r.dp_comm_s =
      m * dp_exposed_per_microbatch_time(s, l, stage_dp(s, l, g, layer, r.critical_stage, crit_params, &computed_dp), crit) +
      tail_dp;
  r.optimizer_s = tail_opt;
  r.dp_comm_total_s = dp_step_comm(s, l, stage_dp(s, l, g, layer, tail_stage, tail_params, &computed_dp)).total();

  r.step_s = r.compute_s + r.tp_comm_s + r.pp_comm_s + r.cp_comm_s + r.ep_comm_s + r.dp_comm_s + r.bubble_s + r.optimizer_s +
             r.host_wait_s;

  const Training& t = s.training;
  const Profile& prof = profile(t.framework);
  const double gpus = l.gpus(), peak = s.cluster.gpu.peak_tflops_bf16 * 1e12;
  r.model_flops_per_step = layer.model_flops;  // model_flops_per_step()
  r.hardware_flops_per_step =  // = hardware_flops_per_step(), without recounting the model FLOPs
      r.model_flops_per_step +
      (prof.act.op_sac && l.recompute == Recompute::kSelective
           ? layer.op_sac_flops  // op_sac_recompute_flops()
           : recompute_flops(s.model, layer.recompute_parts, l.recompute, t.flash_attention, recomputed_fraction(s.model, l)));
  r.tokens_per_s = double(t.global_batch_size) * t.seq_length / r.step_s;
  r.tflops_per_gpu = r.model_flops_per_step / r.step_s / gpus / 1e12;
  r.mfu = r.model_flops_per_step / (r.step_s * gpus * peak);
  r.hfu = r.hardware_flops_per_step / (r.step_s * gpus * peak);
  r.bubble_fraction = bubble_fraction_of_step(l, r.microbatches);
  r.bubble_fraction_of_ideal = bubble_fraction_of_ideal(l, r.microbatches);
  r.exposed_comm_fraction = (r.tp_comm_s + r.pp_comm_s + r.cp_comm_s + r.ep_comm_s + r.dp_comm_s) / r.step_s;

  r.tp_nodes = g.tp.nodes;
  r.layer_forward_s = layer.forward.total;
  // The cap of the run's precision: FP8 GEMMs run at twice the BF16 peak, so
  // an FP8 run is held to the best published FP8 figure (MFU still against
  // the BF16 peak), not to the BF16 one.
  r.fp8 = fp8_gemms(t, s.cluster);
  r.best_published_mfu = r.fp8 ? s.cluster.best_published_mfu_fp8 : s.cluster.best_published_mfu;
  if (r.tp_nodes > 1) r.warnings |= StepTime::kWarnTpAcrossNodes;
  // Small work: fixed costs the model does not price dominate, unless the
  // framework's measured host time per layer prices them (tp > 1).
  if (s.model.num_layers > 0 && r.layer_forward_s < kSmallLayerForwardS && prof.time.host_layer_s(l.tp) <= 0)
    r.warnings |= StepTime::kWarnSmallWork;
  // The published figures count the FLOPs the GPUs ran: Narayanan et al. 2021 (A100, 52 %) count the
  // recomputed forward (their eq. 3, 96·B·s·l·h² with full recompute), Megatron-LM's H100 table and NeMo's
  // FP8 405B ran without recompute (model FLOPs = hardware FLOPs). So the bound is on the hardware count
  // (HFU): a layout whose recompute lowers its MFU under the bound while the GPUs run more FLOP/s than
  // anyone has published is no more plausible than one predicted above it without recompute.
  r.clamped_step_s = r.step_s;
  if (r.best_published_mfu > 0 && r.hfu > r.best_published_mfu) {
    r.warnings |= StepTime::kWarnMfuAboveBest;
    // No run has gone faster: the layout is held to the time the best published utilization allows,
    // not ranked behind slower layouts (issue 46's decision rule).
    r.clamped_step_s = r.step_s * r.hfu / r.best_published_mfu;
  }
  // A framework whose pipeline receives poll with sleeps (nanotron's benchmark branch: TimeVariant::
  // p2p_poll_sleep_s): over the network a poll finds the transfer unfinished and the host sleeps; each of a
  // stage's tp ranks polls on its own and the stage's TP collectives wait for the last of them. Where a
  // micro-batch is shorter than one sleep the measured runs scatter from on time to several times slower
  // (costmodel/frameworks/nanotron.cpp): no term prices that, so the layout is flagged.
  r.tp = l.tp;
  r.p2p_poll_sleep_s = prof.time.p2p_poll_sleep_s;
  if (r.p2p_poll_sleep_s > 0 && l.pp > 1 && l.tp > 1 && r.microbatch_s < r.p2p_poll_sleep_s &&
      pipeline_crosses_nodes(s.cluster, l))
    r.warnings |= StepTime::kWarnPipelinePoll;
  return r;
}

}  // namespace

std::vector<std::string> warning_messages(const StepTime& t) {
  std::vector<std::string> w;
  if (t.warnings & StepTime::kWarnTpAcrossNodes)
    w.push_back(fmt::format("the tensor-parallel group spans {} nodes: its collectives cross the inter-node network "
                            "every layer, where contention and the network's real behaviour are not modelled",
                            t.tp_nodes));
  if (t.warnings & StepTime::kWarnSmallWork)
    w.push_back(fmt::format("a layer's forward is {:.0f} us per micro-batch on one GPU, under {:.0f} us: kernel launch "
                            "and framework overhead, which the model does not price, dominate work this small",
                            t.layer_forward_s * 1e6, kSmallLayerForwardS * 1e6));
  if (t.warnings & StepTime::kWarnMfuAboveBest)
    w.push_back(fmt::format("predicted {} is above the best published for this GPU{} ({:.1f}%, the cluster's "
                            "{}, counting the FLOPs the GPUs ran): the time model is optimistic here, and the "
                            "layout is ranked at the {:.3f} s that utilization allows",
                            t.hfu > t.mfu * (1 + 1e-9) ? fmt::format("hardware FLOP utilization {:.1f}% (MFU {:.1f}% + recompute)",
                                                                     100 * t.hfu, 100 * t.mfu)
                                                       : fmt::format("MFU {:.1f}%", 100 * t.mfu),
                            t.fp8 ? " in FP8" : "", 100 * t.best_published_mfu,
                            t.fp8 ? "best_published_mfu_fp8" : "best_published_mfu", t.clamped_step_s));
  if (t.warnings & StepTime::kWarnPipelinePoll)
    w.push_back(fmt::format("pipeline stages on different nodes: the framework's receives poll their metadata with "
                            "{:.0f} ms sleeps, each of a stage's {} tensor-parallel ranks on its own, and a micro-batch "
                            "lasts {:.1f} ms on the slowest stage, under one sleep; such runs measure from on time to "
                            "several times slower than predicted",
                            t.p2p_poll_sleep_s * 1e3, t.tp, t.microbatch_s * 1e3));
  return w;
}

}  // namespace paraplan
