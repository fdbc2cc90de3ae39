#include "costmodel/memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

#include "costmodel/activations.hpp"
#include "costmodel/frameworks/profile.hpp"
#include "costmodel/memo.hpp"
#include "costmodel/schedule.hpp"

namespace paraplan {

const char* category_name(Category c) {
  switch (c) {
    case Category::kWeights: return "weights";
    case Category::kGradients: return "gradients";
    case Category::kOptimizer: return "optimizer";
    case Category::kActivations: return "activations";
    case Category::kTransient: return "transient";
    case Category::kComm: return "comm";
    case Category::kRuntime: return "runtime";
    case Category::kFragmentation: return "fragmentation";
  }
  return "?";
}

namespace {
// std::llround, exactly, without the library call for the non-negative
// values below 2^53 that byte counts are (the search rounds a dozen per
// layout): the fraction x - trunc(x) is exact there, and halves round up.
std::int64_t round_bytes(double x) {
  if (!(x >= 0 && x < 9007199254740992.0)) return std::int64_t(std::llround(x));
  const std::int64_t t = std::int64_t(x);
  return t + (x - double(t) >= 0.5);
}
}  // namespace

std::int64_t gpu_memory_bytes(const Cluster& c) {
  return round_bytes(c.gpu.memory_gib * kGiB);
}

std::int64_t usable_memory_bytes(const Spec& s) {
  const std::int64_t gpu = gpu_memory_bytes(s.cluster);
  return gpu - round_bytes(s.memory_headroom * double(gpu));
}

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Vocabulary rows per tp rank: padded up to a multiple of tp.
std::int64_t vocab_per_rank(const Model& m, int tp) { return ceil_div(m.vocab_size, tp); }

std::string human(std::int64_t bytes) {
  const double b = double(bytes);
  if (b >= kGiB) return fmt::format("{:.2f} GiB", b / kGiB);
  if (b >= 1024.0 * 1024.0) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024.0));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

// 4370000000 -> "4.37e9"
std::string count(std::int64_t n) {
  if (n < 1'000'000) return fmt::format("{}", n);
  int e = 0;
  double x = double(n);
  while (x >= 10.0) x /= 10.0, ++e;
  return fmt::format("{:.2f}e{}", x, e);
}

// Fast sink: bytes only; the formula callback is never called. The running
// sum is m.total() (summing the array right after storing into it stalled
// the loads behind the stores: a tenth of the search's memory terms).
struct BreakdownSink {
  MemoryBreakdown m;
  std::int64_t sum = 0;
  template <class F>
  void add(Category c, const char*, std::int64_t bytes, F&&, const char* = nullptr) {
    m[c] += bytes;
    sum += bytes;
  }
  void in_allocator(std::int64_t bytes) { m.runtime_in_allocator += bytes; }
  template <class F>
  void held(const char*, std::int64_t bytes, std::int64_t wanted, bool in_allocated, F&&, const char*) {
    m.held_for_streams += bytes;
    m.held_wanted += wanted;
    m.held_in_allocated = in_allocated;
  }
  std::int64_t tensor_bytes() const { return sum; }
  std::int64_t category_bytes(Category c) const { return m[c]; }
};

// Explain sink: keeps every term with its formula.
struct TermSink {
  std::vector<Term> terms;
  template <class F>
  void add(Category c, const char* name, std::int64_t bytes, F&& formula, const char* source = nullptr) {
    terms.push_back(Term{c, name, formula(), bytes, source ? source : ""});
  }
  void in_allocator(std::int64_t) {}
  template <class F>
  void held(const char* name, std::int64_t bytes, std::int64_t, bool, F&& formula, const char* source) {
    terms.push_back(Term{Category::kComm, name, formula(), bytes, source, true});
  }
  std::int64_t tensor_bytes() const {
    std::int64_t t = 0;
    for (const Term& x : terms)
      if (!x.held_for_streams) t += x.bytes;
    return t;
  }
  std::int64_t category_bytes(Category c) const {
    std::int64_t t = 0;
    for (const Term& x : terms)
      if (!x.held_for_streams && x.category == c) t += x.bytes;
    return t;
  }
};

// The largest set of gradients produced together (a weight and its bias, a
// norm's scale and shift, an embedding table), in parameters.
std::int64_t largest_grad_group(const Model& m, const Layout& l, int stage) {
  const std::int64_t h = m.hidden_size, t = l.tp, qkv = (m.q_width() + 2 * m.kv_width()) / t;
  const std::int64_t fin = m.ffn_in_width() / t, f = m.ffn_hidden_size / t;
  const std::int64_t norm = m.normalization == Normalization::kRmsNorm ? h : 2 * h;
  std::int64_t g = std::max({norm, qkv * h + (m.has_qkv_bias() ? qkv : 0), h * (m.q_width() / t) + (m.bias ? h : 0),
                             fin * h + (m.bias ? fin : 0), h * f + (m.bias ? h : 0)});
  const std::int64_t vocab_rows = vocab_per_rank(m, l.tp);
  if (stage == 0) {
    g = std::max(g, vocab_rows * h);
    if (m.position_embedding == PositionEmbedding::kLearned) g = std::max(g, std::int64_t(m.max_position_embeddings) * h);
  }
  if (stage == output_stage(m, l) && (!m.tie_embeddings || l.pp > 1)) g = std::max(g, vocab_rows * h);
  return g;
}

// Every memory term of one rank of `stage`, each computed once, here.
// A generous bound, in floating point, on the bytes one rank of a stage could
// need (saved activations of every micro-batch in flight, the loss, model
// state): past kSaturatedBytes the exact 64-bit sums below could overflow.
double stage_bytes_bound(const Spec& s, const Layout& l) {
  const Model& m = s.model;
  const double tokens = double(s.training.seq_length) * l.mbs;
  double width = double(m.hidden_size) + double(m.q_width()) + 2.0 * double(m.kv_width()) + 3.0 * m.ffn_hidden_size;
  // Experts: top-k copies of each token (x etp gathered), the router's num_experts
  // scores, shared experts; multi-latent attention's latents and heads.
  width += double(m.experts_per_token) * (double(m.hidden_size) * l.expert_tp() + 3.0 * m.moe_ffn_hidden_size + 4.0) +
           9.0 * m.num_experts + 3.0 * double(m.num_shared_experts) * m.moe_ffn_hidden_size + double(m.q_lora_rank) +
           double(m.kv_lora_rank) +
           3.0 * double(m.num_attention_heads) * (double(m.qk_nope_head_dim) + m.qk_rope_head_dim + m.v_head_dim);
  const double per_token_layer = 64.0 * width + 16.0 * double(m.num_attention_heads) * s.training.seq_length;
  const double in_flight = double(num_microbatches(s, l)) + double(l.pp) * l.vpp;
  StageSplit split;
  const double layers = stage_split(m.num_layers, l, &split) ? double(split.most()) : double(m.num_layers);
  const double loss = tokens * (double(m.vocab_size) / l.tp + 64.0) * 32.0;
  return in_flight * (tokens * per_token_layer * layers + loss) + approx_params(m) * 2048.0;
}

// What one layer saves, rounds and holds transiently: the same on every
// stage of a layout, so computed once per layout (peak_memory walks three
// stages, estimate_memory all of them).
struct LayerMemory {
  // stage_bytes_bound (the same for every stage) past kSaturatedBytes: nothing
  // else is computed and every stage is one saturated term.
  bool saturated = false;
  std::int64_t per_layer = 0, whole = 0, slack = 0, whole_slack = 0;
  // The same for a mixture-of-experts layer (0 for a dense model).
  std::int64_t moe_per_layer = 0, moe_whole = 0, moe_slack = 0, moe_whole_slack = 0;
  TransientPeak transient, transient_none;
  int output_stage = 0, loss_stage = 0;  // output_stage(), loss_stage() of the layout
  // What the first stage saves for the embedding and the output layer's rank
  // for the final norm and output layer, per micro-batch in flight.
  std::int64_t embedding = 0, head = 0;
  // stage_params() of representative_stages() (-1: none).
  std::array<StageParams, 3> params{};
  std::array<int, 3> params_stage{-1, -1, -1};
  StageParams params_of(const Model& m, const Layout& l, int stage, bool mtp) const {
    for (int i = 0; i < 3; ++i)
      if (params_stage[i] == stage) return params[i];
    return stage_params(m, l, stage, mtp);
  }
};

LayerMemory layer_memory(const Spec& s, const Layout& l) {
  LayerMemory r;
  if (stage_bytes_bound(s, l) > double(kSaturatedBytes)) {
    r.saturated = true;
    return r;
  }
  const Model& m = s.model;
  const Training& t = s.training;
  const Profile& prof = profile(t.framework);
  const ActShape a{t.seq_length / l.cp, l.mbs, l.tp, l.sp, dtype_bytes(t.precision), t.fp8, l.expert_tp(),
                   moe_expert_load(prof, t, l.ep), l.ep,
                   m.is_moe() ? m.num_experts / l.ep : 1};
  const bool full = l.recompute == Recompute::kFull;
  // Segment rounding of the saved activations, unless the allocator's
  // expandable segments split them at 512 B (Profile::expandable_segments).
  const bool fragmentation = s.cluster.fragmentation_modelled() && !prof.expandable_segments;
  // One pass over each kind's saved tensors gives every mode's bytes and slack.
  auto fill = [&](LayerKind kind, std::int64_t* per_layer, std::int64_t* whole, std::int64_t* slack, std::int64_t* whole_slack,
                  TransientPeak* transient, TransientPeak* transient_none) {
    const LayerActivationSummary a_s = layer_activation_summary(m, t.flash_attention, a, prof.act, kind);
    *per_layer = a_s.bytes(l.recompute);
    *whole = a_s.none;
    *slack = fragmentation ? a_s.slack(l.recompute) : 0;
    *whole_slack = fragmentation ? (full ? a_s.slack_none : *slack) : 0;
    if (!full) *whole = *per_layer;
    const std::int64_t core = a_s.none - a_s.selective;
    if (prof.act.op_sac && l.recompute == Recompute::kSelective)
      // Per-op checkpointing re-runs the block's forward less what it kept:
      // full recompute's transient with the kept tensors in place of the input.
      *transient = layer_transient_peak(m, t.flash_attention, Recompute::kFull, a, a_s.none - a_s.selective + a_s.input,
                                        core, kind, prof.act.moe);
    else
      *transient = layer_transient_peak(m, t.flash_attention, l.recompute, a, a_s.none, core, kind, prof.act.moe);
    *transient_none = full ? layer_transient_peak(m, t.flash_attention, Recompute::kNone, a, a_s.none, core, kind, prof.act.moe)
                           : *transient;
    transient->source = transient_none->source = kind == LayerKind::kMoe ? prof.act.moe_source : prof.act.layer_spec;
  };
  fill(LayerKind::kDense, &r.per_layer, &r.whole, &r.slack, &r.whole_slack, &r.transient, &r.transient_none);
  if (m.is_moe()) {
    TransientPeak mt, mn;
    fill(LayerKind::kMoe, &r.moe_per_layer, &r.moe_whole, &r.moe_slack, &r.moe_whole_slack, &mt, &mn);
    // The larger of a dense and an MoE layer's (a model may have both).
    if (mt.bytes > r.transient.bytes) r.transient = mt;
    if (mn.bytes > r.transient_none.bytes) r.transient_none = mn;
  }
  r.output_stage = output_stage(m, l);
  r.loss_stage = loss_stage(m, l);
  for (const SavedTensor& x : embedding_saved_tensors(m)) r.embedding += tensor_bytes(x, a);
  for (const SavedTensor& x : output_saved_tensors(m, prof.act)) r.head += tensor_bytes(x, a);
  if (!(l.balance == StageBalance::kCost && l.pp > 1)) {
    const FixedList<int, 3> stages = representative_stages(l);
    for (int i = 0; i < stages.size(); ++i) r.params_stage[i] = stages[i], r.params[i] = stage_params(m, l, stages[i], t.mtp);
  }
  return r;
}

// The key a layer's memory terms depend on: the layout less its ZeRO stage
// and recompute method (layer_memory reads neither).
Layout layer_memory_key(Layout l) {
  l.zero = 0;
  l.recompute_method = RecomputeMethod::kUniform;
  l.recompute_layers = 1;
  return l;
}

template <class Sink>
void stage_memory_terms(const Spec& s, const Layout& l, int stage, Sink& out, const LayerMemory& lm) {
  const Model& m = s.model;
  const Training& t = s.training;
  if (lm.saturated) {
    // Too large to count exactly: one term, and the layout never fits.
    out.add(Category::kActivations, "beyond 2^60 bytes (1 EiB) per GPU", kSaturatedBytes, [&] {
      return fmt::format("seq {} x mbs {} x {} layers x {} heads: more than 2^60 bytes; not counted exactly",
                         t.seq_length, l.mbs, m.num_layers, m.num_attention_heads);
    }, "costmodel/memory.cpp kSaturatedBytes (a guard against int64 overflow, not a framework's term)");
    return;
  }
  const StageParams sp = lm.params_of(m, l, stage, t.mtp);
  const std::int64_t psi = sp.total();
  const Profile& prof = profile(t.framework);
  const LossVariant& loss = prof.loss_for(l.tp);
  const int wbytes = dtype_bytes(t.precision), gbytes = dtype_bytes(t.grad_dtype);
  // Model state is sharded over the data-parallel ranks and, with context
  // parallelism, the cp ranks too: Megatron's DDP and distributed optimizer
  // use the dp x cp group (NVIDIA/Megatron-LM@d98e8a64
  // megatron/core/distributed/distributed_data_parallel.py:148-149, 283-293).
  const int dp = l.dp_cp();
  // The output layer's and the loss's rank: the last, or where nanotron's
  // compute-cost split puts them (CostSplit); `last` is the pipeline's end.
  const bool first = stage == 0, last = stage == l.pp - 1;
  const bool holds_output = stage == lm.output_stage, holds_loss = stage == lm.loss_stage;

  // Model state: the framework's buffers, whole or sharded over dp
  // (Rajbhandari et al. 2020 §5 for ZeRO; costmodel/frameworks/ per stack).
  // Routed experts' state is sharded over the expert data-parallel group
  // instead, edp = tp x cp x dp / (etp x ep): Megatron's DDP keeps expert
  // parameters in buffers of their own over that group (NVIDIA/Megatron-LM@d98e8a64
  // megatron/core/distributed/distributed_data_parallel.py:191-213, 282-289).
  const std::int64_t experts = sp.experts(), dense = psi - experts;
  const int edp = m.is_moe() ? l.edp() : 1;
  const std::int64_t shard = ceil_div(dense, dp) + (experts > 0 ? ceil_div(experts, edp) : 0);
  StateBuffers buffers;
  prof.state_buffers(t, l, &buffers);
  // Buffers only the optimizer step allocates (StateBuffer::step_only): after the backward's peak, below.
  std::int64_t step_only = 0;
  const StateBuffer* step_buffer = nullptr;
  for (const StateBuffer& b : buffers) {
    const std::int64_t bytes = round_bytes(b.bytes_per_param * double(b.sharded ? shard : psi));
    if (b.step_only) {
      step_only += bytes;
      step_buffer = &b;
      continue;
    }
    out.add(b.category, b.name, bytes, [&] {
      if (experts > 0)
        return b.sharded ? fmt::format("{:g} B x ({} params / {} {} + {} expert params / edp {})", b.bytes_per_param,
                                       count(dense), l.cp > 1 ? "dp x cp" : "dp", dp, count(experts), edp)
                         : fmt::format("{:g} B x ({} params + {} expert params)", b.bytes_per_param, count(dense),
                                       count(experts));
      return b.sharded ? fmt::format("{:g} B x {} params / {} {}", b.bytes_per_param, count(psi),
                                     l.cp > 1 ? "dp x cp" : "dp", dp)
                       : fmt::format("{:g} B x {} params", b.bytes_per_param, count(psi));
    }, b.source);
  }
  if (l.zero >= 2 && dp > 1 && m.tie_embeddings && l.pp > 1 && (first || holds_output)) {
    // The tied embedding's two copies must sum their gradients across stages
    // after the last micro-batch, so that one stays whole until then.
    const std::int64_t rows = first ? sp.embedding - (m.position_embedding == PositionEmbedding::kLearned
                                                          ? std::int64_t(m.max_position_embeddings) * m.hidden_size
                                                          : 0)
                                    : sp.output;
    out.add(Category::kGradients, "tied embedding gradient (whole)", rows * gbytes,
            [&] { return fmt::format("vocab/tp x h = {} params x {} B", count(rows), gbytes); }, prof.terms.tied_grad);
  }

  if (t.fp8) {
    // Transformer Engine quantizes each linear layer's weight once per step
    // (is_first_microbatch) into a cached workspace, row-wise for the forward
    // and column-wise (the transpose) for the backward's dgrad: 2 bytes per
    // linear weight beside the bf16 weight (linear.py:479-488). With FP8
    // primary weights (--fp8-param-gather) the weight itself is the 1-byte
    // row-wise copy: only the 1-byte transpose is extra, 1 byte less than bf16.
    const std::int64_t linear = sp.layers * (linear_layer_weights(m) / l.tp);
    if (!t.fp8_param_gather)
      out.add(Category::kWeights, "FP8 weight workspaces (row-wise + transpose)", 2 * linear, [&] {
        return fmt::format("2 x 1 B x {} linear-layer params", count(linear));
      }, "NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/module/linear.py:479-488 (quantize_weight, cached)");
    else
      out.add(Category::kWeights, "FP8 primary weights: 1-byte row-wise + 1-byte transpose, not the bf16 copy",
              (2 - wbytes) * linear, [&] {
                return fmt::format("(1 + 1 - {} B) x {} linear-layer params", wbytes, count(linear));
              }, "NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/transformer_config.py:602 (fp8_param), "
                 "megatron/core/extensions/transformer_engine.py:296 (fp8_model_init); TE linear.py:479-488 (transpose workspace)");
    // Delayed scaling: each linear GEMM has 3 forward quantizers (input,
    // weight, output) and 2 backward ones (TE module/base.py:1139), each an
    // fp32 scale and an fp32 amax history (quantization.py:1436-1442), the
    // history Megatron's --fp8-amax-history-len long (default 1).
    const std::int64_t scaling = sp.layers * 4 * 5 * (t.fp8_amax_history_len + 1) * 4;
    out.add(Category::kWeights, "FP8 scaling state (amax histories, scales)", scaling, [&] {
      return fmt::format("{} layers x 4 linears x 5 quantizers x (history {} + 1) x 4 B", sp.layers, t.fp8_amax_history_len);
    }, "NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/module/base.py:1139, quantization.py:1436-1442; "
       "Megatron-LM@d98e8a64 transformer_config.py:621 (fp8_amax_history_len = 1)");
  }

  // Activations saved for backward, times the micro-batches in flight.
  // With context parallelism each rank holds s/cp tokens of every sequence.
  const ActShape a{t.seq_length / l.cp, l.mbs, l.tp, l.sp, dtype_bytes(t.precision), t.fp8, l.expert_tp(),
                   moe_expert_load(prof, t, l.ep), l.ep,
                   m.is_moe() ? m.num_experts / l.ep : 1};
  const int micro = num_microbatches(s, l);
  const int in_flight = in_flight_chunks(l, micro, stage);
  const std::int64_t per_layer = lm.per_layer;
  // Layer forwards whose activations are held: in-flight chunk forwards times
  // their chunk's layers (chunks differ only on an uneven first or last rank).
  // Full recomputation keeps one input per checkpoint (uniform: per group of
  // recompute_layers; block: per checkpointed layer) and the rest whole.
  const bool full = l.recompute == Recompute::kFull;
  const std::int64_t whole = lm.whole;
  // A chunk of n layers, e of them MoE layers (the later ones: a model's
  // dense layers come first, and the layers block recompute keeps whole are
  // a chunk's last).
  auto chunk_bytes = [&](int n, int e) -> std::int64_t {
    if (!full) return (n - e) * per_layer + std::int64_t(e) * lm.moe_per_layer;
    const int w = whole_layers(l, n), we = std::min(w, e);
    return checkpointed_inputs(l, n) * per_layer + (w - we) * whole + std::int64_t(we) * lm.moe_whole;
  };
  // Their rounding slack (allocator segments) goes with them: checkpointed
  // inputs and whole layers round separately.
  const std::int64_t slack = lm.slack, whole_slack = lm.whole_slack;
  auto chunk_slack = [&](int n, int e) -> std::int64_t {
    if (!full) return (n - e) * slack + std::int64_t(e) * lm.moe_slack;
    const int w = whole_layers(l, n), we = std::min(w, e);
    return checkpointed_inputs(l, n) * slack + (w - we) * whole_slack + std::int64_t(we) * lm.moe_whole_slack;
  };
  const std::int64_t layers_per_chunk = (sp.layers + l.vpp - 1) / l.vpp;  // the largest chunk
  const bool even_chunks = sp.layers % l.vpp == 0 && !m.is_moe();
  std::int64_t held_layers = in_flight * layers_per_chunk, held_bytes = in_flight * chunk_bytes(int(layers_per_chunk), 0),
               held_slack = in_flight * chunk_slack(int(layers_per_chunk), 0), held_moe = 0;
  if (!even_chunks) {
    held_layers = held_bytes = held_slack = 0;
    StageSplit split;
    const bool by_split = m.is_moe() && !(l.balance == StageBalance::kCost && l.pp > 1) && stage_split(m.num_layers, l, &split);
    ChunkWalk walk(m, l, split, stage);
    for (int c = 0; c < l.vpp; ++c) {
      const int n = chunk_layers(int(sp.layers), l, stage, c), k = in_flight_of_chunk(l, micro, stage, c);
      const int e = by_split ? walk.next() : chunk_moe_layers(m, l, stage, c);
      held_layers += std::int64_t(k) * n;
      held_moe += std::int64_t(k) * e;
      held_bytes += k * chunk_bytes(n, e);
      held_slack += k * chunk_slack(n, e);
    }
  }
  const bool partial = full && l.partial_recompute_set();
  out.add(Category::kActivations, "transformer layers", held_bytes,
          [&] {
            const char* unit = l.vpp > 1 ? "chunk forwards" : in_flight == 1 ? "micro-batch" : "micro-batches";
            const char* sched = l.schedule == Schedule::kGPipe ? "GPipe" : l.vpp > 1 ? "interleaved 1F1B" : "1F1B";
            if (m.is_moe())
              return fmt::format("{} layer forwards in flight ({} schedule), {} of them MoE layers x {} (dense layers x {}), "
                                 "{} recompute, etp {}, {} at {:g}x the mean: {}",
                                 held_layers, sched, held_moe, human(full ? lm.moe_whole : lm.moe_per_layer),
                                 human(full ? whole : per_layer), recompute_name(l.recompute), l.expert_tp(),
                                 prof.moe_padded_to_capacity ? "every expert's buffer padded to its capacity"
                                                             : "the busiest expert rank's tokens",
                                 moe_expert_load(prof, t, l.ep), human(held_bytes));
            if (partial && even_chunks) {
              const int n = int(layers_per_chunk);
              return fmt::format("{} {} in flight ({} schedule) x ({} checkpointed inputs x {} + {} whole layers x {}) "
                                 "(full recompute, {} method, recompute_layers {}, {} layers per chunk)",
                                 in_flight, unit, sched, checkpointed_inputs(l, n), human(per_layer), whole_layers(l, n),
                                 human(whole), recompute_method_name(l.recompute_method), l.recompute_layers, n);
            }
            if (!even_chunks || partial)
              return fmt::format("{} layer forwards ({} {} in flight, {} schedule, {} layers in {} chunks, one short), "
                                 "{} recompute{}: {}",
                                 held_layers, in_flight, unit, sched, sp.layers, l.vpp, recompute_name(l.recompute),
                                 partial ? fmt::format(" ({} {})", recompute_method_name(l.recompute_method), l.recompute_layers)
                                         : std::string(),
                                 human(held_bytes));
            return fmt::format("{} {} in flight ({} schedule) x {} layers x {} per layer ({} recompute)",
                               in_flight, unit, sched, layers_per_chunk, human(per_layer), recompute_name(l.recompute));
          }, partial ? "NVIDIA/Megatron-LM@d98e8a64 megatron/core/recompute.py:157-180 (uniform groups / first N layers per chunk)"
             : l.recompute == Recompute::kSelective && prof.act.op_sac ? prof.act.op_sac_source
             : m.is_moe() ? prof.act.moe_source
                          : prof.act.layer_spec);
  if (first) {
    const int n0 = in_flight_of_chunk(l, micro, stage, 0);
    const std::int64_t emb = lm.embedding;
    if (emb > 0)
      out.add(Category::kActivations, "embedding dropout masks", n0 * emb,
              [&] { return fmt::format("{} in flight x {}", n0, human(emb)); }, prof.terms.embedding);
    const int tb = prof.terms.token_bytes;
    out.add(Category::kActivations, "token ids", n0 * tb * a.s * a.b,
            [&] { return fmt::format("{} in flight x {} B x s {} x b {}", n0, tb, a.s, a.b); }, prof.terms.batch);
  }
  const std::int64_t vocab = vocab_per_rank(m, l.tp);
  const std::int64_t softmax = a.s * a.b * vocab * 4;  // fp32 softmax of the logit shard
  // One [s, b, h] activation on a rank (its sequence shard with SP).
  const std::int64_t X = a.s * a.b * m.hidden_size * a.act_bytes / (l.sp ? l.tp : 1);
  const int nl = in_flight_of_chunk(l, micro, stage, l.vpp - 1);
  if (holds_output) {
    const std::int64_t head = lm.head;
    const bool gathered = l.sp && l.tp > 1 && prof.act.sp_saves_gathered_linear_inputs;
    out.add(Category::kActivations, "final norm + output layer inputs", nl * head, [&] {
      return fmt::format("{} in flight x {}{}", nl, human(head),
                         gathered ? " (the output layer's input all-gathered whole, the norm's a sequence shard)" : "");
    }, gathered ? prof.act.sp_gathered : prof.terms.output_input);
  }
  if (holds_loss) {
    const int tb = prof.terms.token_bytes;
    out.add(Category::kActivations, "labels", nl * tb * a.s * a.b,
            [&] { return fmt::format("{} in flight x {} B x s {} x b {}", nl, tb, a.s, a.b); }, prof.terms.batch);
    out.add(Category::kActivations, "cross-entropy fp32 softmax", nl * softmax, [&] {
      return fmt::format("{} in flight x 4 B x s {} x b {} x vocab/tp {}", nl, a.s, a.b, vocab);
    }, loss.source);
  }
  if (prof.pipe_output_partition && l.pp > 1 && l.tp > 1 && !last) {
    // The stage's output, [s, b, h] (its sequence shard with SP), kept per
    // micro-batch in flight as this rank's 1/tp partition.
    const std::int64_t part = ceil_div(X, l.tp);
    out.add(Category::kActivations, "pipeline stage outputs kept partitioned", in_flight * part, [&] {
      return fmt::format("{} in flight x {} / tp {}", in_flight, human(X), l.tp);
    }, prof.pipe_output_partition);
  }
  if (t.mtp && m.mtp_layers > 0 && last) {
    // Megatron's MTP modules run after the last chunk's layers, per micro-batch
    // in flight there, each: enorm and hnorm (inputs kept), their
    // concatenation [s, b, 2h] kept as eh_proj's input (multi_token_prediction.py:
    // 1331-1342), one transformer layer as the decoder's last, its final norm
    // and the shared output layer's input (:1439; the head's terms), and a
    // second loss over its own logits with its labels (:1013-1027,
    // process_mtp_loss). Under full recompute the module is one checkpoint
    // (:1700-1712): its two inputs are kept, the layer re-run in the backward.
    const bool moe = m.is_moe_layer(m.num_layers - 1);
    const std::int64_t norms = 2 * X + 2 * 4 * std::int64_t(a.s) * a.b / (l.sp ? l.tp : 1);  // inputs + fp32 rstd
    const std::int64_t layer = full ? 2 * X : (moe ? lm.moe_per_layer : per_layer) + norms + 2 * X;
    const std::int64_t mtp = std::int64_t(m.mtp_layers) * nl;
    out.add(Category::kActivations, "multi-token prediction: norms, eh_proj input, its layer", mtp * layer, [&] {
      return full ? fmt::format("{} modules x {} in flight x 2 checkpointed inputs x {} (full recompute)", m.mtp_layers,
                                nl, human(X))
                  : fmt::format("{} modules x {} in flight x ({} {} layer + enorm/hnorm inputs {} + [s, b, 2h] concat {})",
                                m.mtp_layers, nl, human(moe ? lm.moe_per_layer : per_layer), moe ? "MoE" : "dense",
                                human(norms), human(2 * X));
    }, "NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/multi_token_prediction.py:1331-1342, 1395-1445, 1700-1712; "
       "gpt_builders.py:80-84 (the decoder's last layer's spec)");
    if (!full) held_slack += mtp * (moe ? lm.moe_slack : slack);
    out.add(Category::kActivations, "multi-token prediction: output layer input, labels, fp32 softmax",
            mtp * (lm.head + 4 * a.s * a.b + softmax), [&] {
              return fmt::format("{} modules x {} in flight x (final norm + output input {} + labels 4 B x s x b + "
                                 "4 B x s {} x b {} x vocab/tp {})",
                                 m.mtp_layers, nl, human(lm.head), a.s, a.b, vocab);
            }, "NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/multi_token_prediction.py:1013-1027 (process_mtp_loss)");
  }

  // Transient: the largest set of short-lived buffers at any point of the step
  // (costmodel/activations.cpp walks one layer; the head and embedding here).
  TransientPeak lt = lm.transient;
  if (full && l.recompute_method == RecomputeMethod::kUniform && l.recompute_layers > 1) {
    // Re-running a group of g layers holds every layer of it whole, less the
    // checkpointed input: (g − 1) more whole layers than re-running one
    // (Megatron-LM@d98e8a64 megatron/core/recompute.py:157-166: one
    // checkpoint over custom(l, l + recompute_num_layers)).
    const std::int64_t g = std::min<std::int64_t>(l.recompute_layers, layers_per_chunk);
    if (g > 1)
      lt = {lt.bytes + (g - 1) * whole, "backward: residual grad + a recomputed group of recompute_layers layers",
            "NVIDIA/Megatron-LM@d98e8a64 megatron/core/recompute.py:157-166 (one checkpoint over recompute_num_layers "
            "layers)"};
  }
  if (full && whole_layers(l, int(layers_per_chunk)) > 0) {
    // Block recompute: the layers kept whole run a plain backward.
    if (lm.transient_none.bytes > lt.bytes) lt = lm.transient_none;
  }
  const std::int64_t H = a.s * a.b * m.hidden_size * a.act_bytes;
  TransientPeak peak = lt;
  const int per_logit = loss_transient_bytes_per_logit(loss, a.act_bytes);
  // The fused cross-entropy's extra fp32 logit shards (LossVariant::fused_extra_fp32).
  const int fused_copies = t.cross_entropy_fusion ? loss.fused_extra_fp32 : 0;
  if (holds_loss) {
    // At the loss's forward peak, besides the saved fp32 softmax: the logits
    // in the activation dtype if still referenced, any extra fp32 copies
    // (framework profile), and fp32 max | sum | target | loss per token.
    const std::int64_t logits = loss_forward_peak_bytes(loss, a.s * a.b, vocab, a.act_bytes) - softmax +
                                fused_copies * softmax;  // the saved softmax is an activation
    if (logits > peak.bytes) peak = {logits, "logits", fused_copies > 0 ? loss.fused : loss.source};
    // The loss's backward, where autograd runs PyTorch's cross-entropy: G and
    // dX beside the saved softmax (LossVariant::backward_fp32_extra).
    const std::int64_t backward = loss_backward_peak_bytes(loss, a.s * a.b, vocab);
    if (backward > 0 && backward - softmax > peak.bytes) peak = {backward - softmax, "loss backward", loss.backward};
  }
  // Then the output layer's input gradient H and the residual gradient X.
  if (holds_output && H + X > peak.bytes)
    peak = {H + X, "output layer backward: input grad + residual grad", prof.terms.output_input};
  if (first && l.sp && H > peak.bytes) peak = {H, "embedding: partial sum before the reduce-scatter", prof.terms.embedding};
  if (l.cp > 1) {
    // Ring attention (NVIDIA/TransformerEngine@d0067d0d transformer_engine/
    // pytorch/attention/dot_product_attention/context_parallel.py): the
    // forward keeps every received K|V chunk in p2p_comm_buffers until it
    // returns (:1685-1717), cp chunks; the backward double-buffers K|V with
    // dK|dV, 2 x 2 chunks (:2397-2401), beside the residual gradient.
    const std::int64_t kv_chunk = 2 * a.s * a.b * m.kv_width() / l.tp * a.act_bytes;
    const std::int64_t fwd = l.cp * kv_chunk, bwd = X + 4 * kv_chunk;
    const char* ring = "NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/attention/dot_product_attention/"
                       "context_parallel.py:1685-1717 (p2p_comm_buffers of the forward), :2397-2401 (the backward's)";
    if (fwd > peak.bytes) peak = {fwd, "context-parallel ring: every K|V chunk of the forward", ring};
    if (bwd > peak.bytes) peak = {bwd, "context-parallel ring: residual grad + K|V and dK|dV double buffers", ring};
  }
  const bool loss_backward_peak = std::string_view(peak.phase) == "loss backward";
  out.add(Category::kTransient, "short-lived buffers (peak)", peak.bytes, [&] {
    if (loss_backward_peak)
      return fmt::format("loss backward: {} fp32 logit tensors ({}) x 4 B x s {} x b {} x vocab/tp {}, beside the saved "
                         "softmax", loss.backward_fp32_extra, loss.backward_tensors, a.s, a.b, vocab);
    if (std::string_view(peak.phase) == "logits")
      return fmt::format("logits {} B x s {} x b {} x vocab/tp {} + {} B x s x b (cross-entropy row statistics){}",
                         per_logit + 4 * fused_copies, a.s, a.b, vocab, loss.row_bytes_per_token,
                         fused_copies > 0 ? fmt::format(" (with {} fp32 copy of the fused cross-entropy)", fused_copies)
                                          : std::string());
    return fmt::format("{} ({})", peak.phase, human(peak.bytes));
  }, peak.source);

  if (step_buffer) {
    // The optimizer step runs after the last backward, when the activations
    // (with their segments' rounding slack, counted below) and the backward's
    // short-lived buffers are gone: its own buffers raise the peak only by
    // what they exceed those by.
    const std::int64_t slack_freed = s.cluster.fragmentation_modelled() && !prof.expandable_segments ? held_slack : 0;
    const std::int64_t freed =
        out.category_bytes(Category::kActivations) + out.category_bytes(Category::kTransient) + slack_freed;
    out.add(Category::kTransient, "optimizer step beyond the backward's peak", std::max<std::int64_t>(0, step_only - freed),
            [&] {
              return fmt::format("max(0, {} {:g} B x {} params - activations and short-lived buffers {})", step_buffer->name,
                                 step_buffer->bytes_per_param, count(step_buffer->sharded ? shard : psi), human(freed));
            }, step_buffer->source);
  }

  // Communication buffers.
  std::int64_t biggest = sp.largest_layer();  // the largest group gathered at once (a layer, or the embedding)
  if (first) biggest = std::max(biggest, sp.embedding);
  if (holds_output) biggest = std::max(biggest, sp.output);
  if (l.zero >= 3 && prof.gathered_by_prefetch_bucket) {
    // DeepSpeed: the current module's weight, and up to the prefetch bucket more, within the live cap.
    const std::int64_t module = largest_grad_group(m, l, stage);
    const std::int64_t prefetch =
        std::max<std::int64_t>(0, std::min(t.zero3_prefetch_bucket_size, t.zero3_max_live_parameters - module));
    // At the forward's end the modules whose backward use lies within max_reuse_distance stay gathered: the
    // reuse of a module with P parameters after it is 2P away (the rest of the forward, then the backward back to it).
    const std::int64_t kept = t.zero3_max_reuse_distance / 2;
    const std::int64_t params = std::min(module + prefetch + kept, psi);
    out.add(Category::kComm, "ZeRO-3 gathered parameters", params * wbytes, [&] {
      return fmt::format("min(largest module {} + prefetch min({}, max_live {} - module) + kept for reuse max_reuse_distance "
                         "{} / 2, stage {}) params x {} B",
                         count(module), count(t.zero3_prefetch_bucket_size), count(t.zero3_max_live_parameters),
                         count(t.zero3_max_reuse_distance), count(psi), wbytes);
    }, prof.gathered_by_prefetch_bucket);
  } else if (l.zero >= 3 || (l.zero == 2 && prof.zero2_keeps_params_unsharded)) {
    const bool whole = l.zero == 2;
    const std::int64_t params = whole ? psi : prof.gathered_groups * biggest;
    out.add(Category::kComm, whole ? "unsharded parameters (kept through backward)" : "ZeRO-3 gathered parameters",
            params * wbytes, [&] {
              return whole ? fmt::format("{} params x {} B", count(psi), wbytes)
                           : fmt::format("{} (current + prefetch) x {} params x {} B", prof.gathered_groups, count(biggest),
                                         wbytes);
            }, prof.gathered);
  }
  if (l.zero >= 3 || (l.zero == 2 && prof.zero2_keeps_params_unsharded)) {
    if (prof.group_grad_bytes_per_param > 0)
      out.add(Category::kComm, "unsharded gradients + reduce-scatter input (one group)",
              round_bytes(prof.group_grad_bytes_per_param * double(biggest)), [&] {
                return fmt::format("{:g} B x {} params", prof.group_grad_bytes_per_param, count(biggest));
              }, prof.gathered);
  }
  const std::int64_t bucket_size = bucket_params(prof, t);
  if (prof.bucket_rule == BucketRule::kShardedGrads && l.zero >= 2 && dp > 1) {
    // A bucket holds whole gradient groups (a weight and its bias), so at least the largest.
    const std::int64_t group = largest_grad_group(m, l, stage);
    const std::int64_t bucket = std::min(std::max(bucket_size, group), psi);
    out.add(Category::kComm, "gradient reduce-scatter bucket", bucket * gbytes, [&] {
      return fmt::format("min(max(bucket {}, largest weight+bias {}), {}) params x {} B",
                         count(bucket_size), count(group), count(psi), gbytes);
    }, prof.bucket);
  }
  if (prof.bucket_rule == BucketRule::kFixedIpg && (l.zero == 1 || l.zero == 2))
    out.add(Category::kComm, "IPG reduce bucket", bucket_size * wbytes, [&] {
      return fmt::format("reduce_bucket_size {} x {} B", count(bucket_size), wbytes);
    }, prof.bucket);
  // Megatron's allgather MoE dispatcher gathers the etp x ep group's tokens into the same persistent "mpu"
  // buffer (NVIDIA/Megatron-LM@d98e8a64 moe/token_dispatcher.py:299-301, use_global_buffer=True;
  // tensor_parallel/mappings.py:142-150; GlobalMemoryBuffer keeps one tensor per name and dtype, grown to the
  // largest request): the buffer is the larger of the two gathers.
  const std::int64_t moe_group = std::int64_t(l.ep) * l.expert_tp();
  const bool moe_gather = t.moe_dispatcher == Training::MoeDispatcher::kAllGather && sp.moe_layers > 0 &&
                          moe_group > 1 && t.framework == Framework::kMegatron;
  const std::int64_t moe_gathered = moe_gather ? a.s * a.b / (l.sp ? l.tp : 1) * moe_group * m.hidden_size * a.act_bytes : 0;
  const std::int64_t sp_gathered = l.sp && prof.sp_gather_buffer_persistent ? a.s * a.b * m.hidden_size * a.act_bytes : 0;
  if (moe_gathered > sp_gathered) {
    out.add(Category::kComm, "MoE all-gather dispatch buffer", moe_gathered, [&] {
      return fmt::format("{} B x s {} / tp {} x b {} x etp*ep {} x h {}", a.act_bytes, a.s, l.sp ? l.tp : 1, a.b,
                         moe_group, m.hidden_size);
    }, "NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/moe/token_dispatcher.py:299-301 (use_global_buffer), "
       "megatron/core/tensor_parallel/mappings.py:142-150 (get_global_memory_buffer().get_tensor(..., \"mpu\"))");
  } else if (sp_gathered > 0) {
    out.add(Category::kComm, "sequence-parallel all-gather buffer", sp_gathered, [&] {
      return fmt::format("{} B x s {} x b {} x h {}", a.act_bytes, a.s, a.b, m.hidden_size);
    }, prof.sp_gather);
  }
  if (l.pp > 1) {
    // One send buffer per direction this rank sends in (receives land in the
    // activation or gradient they become): forward unless it is the last
    // stage, backward unless the first; interleaving sends both ways.
    const int slots = l.vpp > 1 ? 2 : int(!last) + int(!first);
    const std::int64_t msg = a.s * a.b * m.hidden_size * a.act_bytes / (l.sp ? l.tp : 1);
    out.add(Category::kComm, "pipeline send buffers", slots * msg, [&] {
      return fmt::format("{} x {} B x s {} x b {} x h {}{}", slots, a.act_bytes, a.s, a.b, m.hidden_size,
                         l.sp ? fmt::format(" / tp {}", l.tp) : "");
    }, prof.terms.pipeline_send);
  }

  // Runtime and allocator slack, after every tensor above.
  const std::int64_t tensors = out.tensor_bytes();
  const Cluster& c = s.cluster;
  if (!c.runtime_modelled()) {
    out.add(Category::kRuntime, "CUDA context, cuBLAS, NCCL", round_bytes(c.runtime_overhead_gib * kGiB),
            [&] { return fmt::format("runtime_overhead_gib {:g} GiB (cluster spec)", c.runtime_overhead_gib); },
            "cluster spec runtime_overhead_gib");
  } else {
    out.add(Category::kRuntime, "CUDA context", round_bytes(c.cuda_context_gib * kGiB),
            [&] { return fmt::format("cuda_context_gib {:g} GiB", c.cuda_context_gib); },
            "FACTS.md: 0.3-0.5 GiB with lazy module loading (pytorch#107667, PR #86509); cluster key cuda_context_gib");
    // Communicators this rank joins that carry traffic (NCCL connects lazily):
    // tp, dp, the pipeline's point-to-point pair, the tied-embedding group.
    // Mixtures of experts add the expert groups that carry traffic: ep (the
    // token all-to-alls), etp when it is not tp, edp (expert gradients).
    const int moe_comms = m.is_moe() && sp.moe_layers > 0
                              ? int(l.ep > 1) + int(l.expert_tp() > 1 && l.expert_tp() != l.tp) + int(l.edp() > 1 && l.edp() != dp)
                              : 0;
    const int comms = int(l.tp > 1) + int(dp > 1) + int(l.pp > 1) + int(l.pp > 1 && m.tie_embeddings && (first || holds_output)) +
                      int(l.cp > 1) + moe_comms;
    out.add(Category::kRuntime, "NCCL buffers", round_bytes(comms * c.nccl_comm_mib * 1024 * 1024), [&] {
      return fmt::format("{} communicators (tp {}, dp {}, pp {}{}{}) x nccl_comm_mib {:g} MiB", comms, l.tp, l.dp, l.pp,
                         l.cp > 1 ? fmt::format(", cp {}", l.cp) : std::string(),
                         moe_comms > 0 ? fmt::format(", ep {}, etp {}, edp {}", l.ep, l.expert_tp(), l.edp()) : std::string(),
                         c.nccl_comm_mib);
    }, "NVIDIA/nccl@5067397c src/init.cc:810-828, src/include/device.h:26,97-98,114-115 (per-connection buffers)");
    const std::int64_t cublas = round_bytes(c.cublas_workspace_mib * 1024 * 1024);
    if (prof.cublas_workspace_in_allocator) {
      out.add(Category::kRuntime, "cuBLAS workspace (inside the allocator)", cublas,
              [&] { return fmt::format("cublas_workspace_mib {:g} MiB", c.cublas_workspace_mib); },
              "pytorch aten/src/ATen/cuda/CublasHandlePool.cpp (32 MiB on sm90 + 1 MiB cuBLASLt, via the caching allocator)");
      out.in_allocator(cublas);
    } else {
      out.add(Category::kRuntime, "cuBLAS workspace", cublas,
              [&] { return fmt::format("cublas_workspace_mib {:g} MiB", c.cublas_workspace_mib); },
              "validate/gpu/cuda_context.cpp:70-71 (cudaMalloc + cublasSetWorkspace, outside the pool)");
    }
    if (prof.te_workspaces && t.transformer_engine) {
      // Transformer Engine's workspaces, each allocated on first use and kept:
      // its GEMMs', the grouped GEMMs' four streams' where this rank runs
      // experts, userbuffers' three with --tp-comm-overlap.
      const bool grouped = t.moe_grouped_gemm && (sp.moe_layers > 0 || sp.mtp_experts > 0);
      const int n = 1 + (grouped ? 4 : 0) + (t.tp_comm_overlap ? 3 : 0);
      const std::int64_t te = round_bytes(n * c.te_cublas_workspace_mib * 1024 * 1024);
      out.add(Category::kRuntime, "Transformer Engine cuBLAS workspaces (inside the allocator)", te, [&] {
        return fmt::format("{} x te_cublas_workspace_mib {:g} MiB (1 for its GEMMs{}{})", n, c.te_cublas_workspace_mib,
                           grouped ? ", 4 grouped-GEMM streams" : "", t.tp_comm_overlap ? ", 3 userbuffers" : "");
      }, prof.te_workspaces);
      out.in_allocator(te);
    }
    if (prof.runtime_extra_mib > 0)
      out.add(Category::kRuntime, "the framework's own device buffers",
              round_bytes(prof.runtime_extra_mib * 1024 * 1024),
              [&] { return fmt::format("{:g} MiB", prof.runtime_extra_mib); }, prof.runtime_extra);
  }
  if (l.sp && prof.held_reduce_scatter_inputs_per_layer > 0) {
    // Each layer's row-parallel outputs, full [s, b, h], wait for their
    // reduce-scatter on the NCCL stream: one micro-batch's forward worth, in
    // the memory left over (the allocator frees them before it would fail).
    const std::int64_t full = a.s * a.b * m.hidden_size * a.act_bytes;
    const std::int64_t n = prof.held_reduce_scatter_inputs_per_layer * layers_per_chunk;
    const std::int64_t left = std::max<std::int64_t>(0, gpu_memory_bytes(c) - out.tensor_bytes());
    const std::int64_t bytes = std::min(n * full, left);
    out.held(prof.held_in_allocated ? "reduce-scatter inputs held for the NCCL stream (allocated and reserved)"
                                    : "reduce-scatter inputs held for the NCCL stream (reserved only)",
             bytes, n * full, prof.held_in_allocated, [&] {
      return fmt::format("min({} per layer x {} layers x {} B x s {} x b {} x h {} = {}, memory left {})",
                         prof.held_reduce_scatter_inputs_per_layer, layers_per_chunk, a.act_bytes, a.s, a.b, m.hidden_size,
                         human(n * full), human(left));
    }, prof.held_reduce_scatter);
  }
  if (!c.fragmentation_modelled()) {
    out.add(Category::kFragmentation, "allocator slack", round_bytes(c.fragmentation * double(tensors)),
            [&] { return fmt::format("fragmentation {:g} x tensors {}", c.fragmentation, human(tensors)); },
            "cluster spec fragmentation");
  } else {
    // Requests of 10 MiB or more get a segment rounded up to 2 MiB: the
    // remainder of each saved activation is reserved but not allocated.
    out.add(Category::kFragmentation, "segment rounding of saved activations", held_slack, [&] {
      return prof.expandable_segments ? std::string("none: expandable segments split each block at 512 B")
                                      : fmt::format("{} layer forwards in flight x {} per layer", held_layers, human(slack));
    }, prof.expandable_segments ? prof.expandable
                                : "pytorch c10/cuda/CUDACachingAllocator.cpp@001074d2 (kMinLargeAlloc 10 MiB, kRoundLarge 2 MiB, :117-124)");
    if (holds_loss && loss.logits_block_stranded && a.act_bytes < 4) {
      const std::int64_t bytes = a.act_bytes * a.s * a.b * vocab;
      out.add(Category::kFragmentation, "logits block stranded before the larger fp32 request", bytes, [&] {
        return fmt::format("{} B x s {} x b {} x vocab/tp {}", a.act_bytes, a.s, a.b, vocab);
      }, loss.stranded);
    }
    if (loss_backward_peak && loss.backward_logits_stranded && a.act_bytes < 4) {
      const std::int64_t bytes = a.act_bytes * a.s * a.b * vocab;
      out.add(Category::kFragmentation, "logits block stranded before the loss backward's fp32 output", bytes, [&] {
        return fmt::format("{} B x s {} x b {} x vocab/tp {}", a.act_bytes, a.s, a.b, vocab);
      }, loss.backward);
    }
  }
}

}  // namespace

ModelState model_state_bytes(std::int64_t psi, int zero, int dp, int wb, int gb, double k) {
  const std::int64_t shard = ceil_div(psi, dp);
  return ModelState{wb * (zero >= 3 ? shard : psi), gb * (zero >= 2 ? shard : psi),
                    round_bytes(k * double(zero >= 1 ? shard : psi))};
}

StageParams stage_params(const Model& m, const Layout& l, int stage, bool mtp) {
  const std::int64_t h = m.hidden_size, q = m.q_width(), kv = m.kv_width(), t = l.tp;
  const std::int64_t fin = m.ffn_in_width();
  const std::int64_t norm = m.normalization == Normalization::kRmsNorm ? h : 2 * h;
  StageParams p;
  p.layers = stage_layers(m, l, stage);
  if (!m.is_moe() && !m.mla()) {
    // Column-parallel QKV and fc1, row-parallel out-proj and fc2 (Shoeybi et al.
    // 2019); row-parallel biases and norms are replicated.
    p.layer = linear_layer_weights(m) / t + m.norms_per_layer() * norm;
    if (m.has_qkv_bias()) p.layer += (q + 2 * kv) / t;
    if (m.bias) p.layer += h + fin / t + h;
    if (m.qk_norm) p.layer += 2 * std::int64_t(m.head_dim);  // replicated per-head norms
  } else {
    // Attention per tp rank. Multi-latent: the down projections and the
    // latent norms replicated ('duplicated', NVIDIA/Megatron-LM@d98e8a64
    // megatron/core/transformer/multi_latent_attention.py:526-600), the up
    // projections column-parallel and the output projection row-parallel.
    std::int64_t attn = 0;
    if (m.mla()) {
      const std::int64_t heads = m.num_attention_heads, qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
      attn = m.q_lora_rank > 0 ? h * m.q_lora_rank + m.q_lora_rank + std::int64_t(m.q_lora_rank) * heads * qk / t
                               : h * heads * qk / t;
      attn += h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank +
              std::int64_t(m.kv_lora_rank) * heads * (m.qk_nope_head_dim + m.v_head_dim) / t;
      attn += heads * m.v_head_dim * h / t;
    } else {
      attn = (h * q + 2 * h * kv + q * h) / t;
      if (m.has_qkv_bias()) attn += (q + 2 * kv) / t;
      if (m.bias) attn += h;
      if (m.qk_norm) attn += 2 * std::int64_t(m.head_dim);
    }
    // An MLP of width f split over n ranks (column fc1, row fc2, its bias whole).
    auto mlp = [&](std::int64_t f, std::int64_t n) {
      const std::int64_t in = m.gated() ? 2 * f : f;
      return (h * in + f * h) / n + (m.bias ? in / n + h : 0);
    };
    const std::int64_t norms = m.norms_per_layer() * norm;
    p.layer = attn + norms + mlp(m.ffn_hidden_size, t);
    if (m.is_moe()) {
      // Megatron-core MoE (megatron/core/transformer/moe/): the router's
      // num_experts x h weight (+ the expert bias) on every rank (router.py:
      // 60-88), shared experts a tensor-parallel MLP (shared_experts.py), each
      // rank's num_experts / ep local experts split over etp (experts.py:183-240).
      p.moe_layers = stage_moe_layers(m, l, stage);
      p.moe_layer = attn + norms + std::int64_t(m.num_experts) * h + (m.router_bias ? m.num_experts : 0) +
                    (m.shared_expert_gate ? h : 0) +
                    (m.num_shared_experts > 0 ? mlp(std::int64_t(m.num_shared_experts) * m.moe_ffn_hidden_size, t) : 0);
      p.expert = std::int64_t(m.num_experts / l.ep) * mlp(m.moe_ffn_hidden_size, l.expert_tp());
    }
  }
  const std::int64_t vocab_rows = vocab_per_rank(m, l.tp);
  if (stage == 0) {
    p.embedding = vocab_rows * h;
    if (m.position_embedding == PositionEmbedding::kLearned) p.embedding += m.max_position_embeddings * h;
  }
  if (stage == output_stage(m, l)) {
    p.final_norm = norm;
    // Untied: own output matrix. Tied with pp > 1: the last stage keeps a copy
    // of the word embedding, kept in sync by an all-reduce (Megatron-LM).
    if (!m.tie_embeddings || l.pp > 1) p.output = vocab_rows * h;
  }
  if (mtp && m.mtp_layers > 0 && stage == l.pp - 1) {
    // Megatron's MTP modules (NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/
    // multi_token_prediction.py:1157-1187, 1247): enorm, hnorm and a final norm
    // (replicated), eh_proj 2h -> h column-parallel without bias, and one
    // transformer layer built from the decoder's last layer's spec
    // (gpt_builders.py:80-84): MoE when that layer is. On the last rank, which
    // also builds the word embedding for them (gpt_model.py:173-181) unless it
    // holds it already (stage 0, or tied with pp > 1: the output copy).
    const bool moe = m.is_moe_layer(m.num_layers - 1);
    p.mtp = std::int64_t(m.mtp_layers) * (3 * norm + 2 * h * h / t + (moe ? p.moe_layer : p.layer));
    if (moe) p.mtp_experts = std::int64_t(m.mtp_layers) * p.expert;
    if (stage != 0 && !m.tie_embeddings) p.mtp += vocab_rows * h;
  }
  return p;
}

namespace {
MemoryBreakdown stage_memory(const Spec& s, const Layout& l, int stage, const LayerMemory& lm) {
  BreakdownSink sink;
  stage_memory_terms(s, l, stage, sink, lm);
  return sink.m;
}
// stage_memory(...).total(), from the sink's running sum, and with the
// stream-held blocks it would keep.
struct StageTotal {
  std::int64_t total, with_held;
};
StageTotal stage_total(const Spec& s, const Layout& l, int stage, const LayerMemory& lm) {
  BreakdownSink sink;
  stage_memory_terms(s, l, stage, sink, lm);
  return {sink.sum, sink.sum + sink.m.held_wanted};
}
}  // namespace

MemoryBreakdown stage_memory(const Spec& s, const Layout& l, int stage) {
  BreakdownSink sink;
  stage_memory_terms(s, l, stage, sink, layer_memory(s, l));
  return sink.m;
}

std::vector<Term> stage_terms(const Spec& s, const Layout& l, int stage) {
  TermSink sink;
  stage_memory_terms(s, l, stage, sink, layer_memory(s, l));
  return sink.terms;
}

struct MemoryCache::Impl {
  LayoutMemo<LayerMemory, 4> layers;
};
MemoryCache::MemoryCache() : impl_(std::make_unique<Impl>()) {}
MemoryCache::~MemoryCache() = default;

namespace {
PeakMemory peak_memory_with(const Spec& s, const Layout& l, const LayerMemory& lm);
}  // namespace

PeakMemory peak_memory(const Spec& s, const Layout& l, MemoryCache* cache) {
  if (!cache) return peak_memory_with(s, l, layer_memory(s, l));
  return peak_memory_with(s, l, cache->impl().layers.get(&s, layer_memory_key(l), [&] { return layer_memory(s, l); }));
}

namespace {
// The heaviest stage is one of representative_stages(): three evaluations
// instead of pp.
PeakMemory peak_memory_with(const Spec& s, const Layout& l, const LayerMemory& lm) {
  PeakMemory p{0, -1};
  if (l.balance == StageBalance::kCost && l.pp > 1) {
    // nanotron's compute-cost split gives every rank its own count: all of them.
    for (int i = 0; i < l.pp; ++i) {
      const StageTotal b = stage_total(s, l, i, lm);
      if (b.total > p.bytes) p.stage = i, p.bytes = b.total;
      p.with_held = std::max(p.with_held, b.with_held);
    }
    return p;
  }
  for (const int i : representative_stages(l)) {
    const StageTotal b = stage_total(s, l, i, lm);
    if (b.total > p.bytes) p.stage = i, p.bytes = b.total;  // ties keep the earlier stage, as estimate_memory does
    p.with_held = std::max(p.with_held, b.with_held);
  }
  return p;
}

}  // namespace

MemoryEstimate estimate_memory(const Spec& s, const Layout& l) {
  MemoryEstimate e;
  e.stages.reserve(l.pp);
  const LayerMemory lm = layer_memory(s, l);
  for (int i = 0; i < l.pp; ++i) {
    e.stages.push_back(stage_memory(s, l, i, lm));
    if (e.stages[i].total() > e.stages[e.heaviest_stage].total()) e.heaviest_stage = i;
    e.with_held_bytes = std::max(e.with_held_bytes, e.stages[i].total() + e.stages[i].held_wanted);
  }
  e.heaviest_rank = e.heaviest_stage * l.dp * l.tp * l.cp;
  e.gpu_bytes = gpu_memory_bytes(s.cluster);
  e.usable_bytes = usable_memory_bytes(s);
  e.headroom_bytes = e.gpu_bytes - e.usable_bytes;
  e.peak_bytes = e.heaviest().total();
  e.allocated_bytes = e.heaviest().allocated();
  e.reserved_bytes = e.heaviest().reserved();
  e.device_bytes = e.heaviest().device();
  e.margin_bytes = e.usable_bytes - e.peak_bytes;
  e.fits = e.margin_bytes >= 0;
  e.flush_risk = e.fits && e.with_held_bytes > e.usable_bytes;
  e.params_total = total_params(s.model);
  e.params_per_rank = stage_params(s.model, l, e.heaviest_stage, s.training.mtp).total();
  return e;
}

std::string memory_warning_message(std::int64_t device_bytes, std::int64_t with_held_bytes, std::int64_t usable_bytes) {
  if (device_bytes > usable_bytes || with_held_bytes <= usable_bytes) return {};
  return fmt::format(
      "fits only if the caching allocator flushes mid-step: the {:.1f} GiB on the device and the reduce-scatter "
      "inputs the NCCL stream would hold with the host a forward ahead come to {:.1f} GiB, over the {:.1f} GiB "
      "usable; PyTorch then synchronizes and frees them (CUDACachingAllocator release_cached_blocks), and the "
      "request still fails where the freed blocks are too small for it and the segments holding them cannot be "
      "returned to the driver while partly in use: of the Playbook's nanotron runs in this state 31 of 38 crashed "
      "(pp = 1: 4 of 8, pp > 1: 27 of 30), against 86 of the 1,202 that fit without it",
      double(device_bytes) / kGiB, double(with_held_bytes) / kGiB, double(usable_bytes) / kGiB);
}

std::string memory_warning_message(const MemoryEstimate& e) {
  if (!e.fits) return {};
  return memory_warning_message(e.peak_bytes, e.with_held_bytes, e.usable_bytes);
}

}  // namespace paraplan
