// A Spec is everything a plan is made from: model + cluster + training + search
// constraints. Loaded and validated once (planner/spec_loader); nothing in
// costmodel/ re-checks the input, but layouts are checked against the spec here
// because an impossible layout is a rejected candidate, not a crash.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "costmodel/layout.hpp"
#include "costmodel/model.hpp"

namespace paraplan {

// Allowed values per layout dimension for the search; empty = unconstrained.
struct SearchSpace {
  std::vector<int> dp, tp, cp, pp, vpp, zero, mbs, ep, etp;
  std::vector<Recompute> recompute;
  std::vector<int> sp;  // 0 / 1
  std::vector<Schedule> schedule;
  bool allow_tp_across_nodes = false;
};

struct Spec {
  Model model;
  Cluster cluster;
  Training training;
  int num_nodes = 1;
  double memory_headroom = 0.05;  // fraction of GPU memory kept free
  SearchSpace search;
  std::optional<std::string> default_layout;  // `layout:` in the plan spec

  int num_gpus() const { return num_nodes * cluster.gpus_per_node; }
};

// Why a layout cannot run at all (as opposed to "does not fit").
enum class Invalid {
  kGpuCount,        // dp·tp·cp·pp != GPUs
  kHeadsTp,         // attention heads % tp
  kKvHeadsTp,       // kv heads % tp
  kFfnTp,           // ffn hidden % tp
  kSeqSp,           // seq length % tp with sequence parallelism
  kLayersPp,        // layers % (pp·vpp)
  kBatch,           // global batch % (dp·mbs)
  kVpp,             // vpp > 1 without pp > 1, or with GPipe
  kInterleavedMicrobatches,  // interleaved 1F1B needs micro-batches % pp == 0
  kTpAcrossNodes,   // tp larger than a node without the search flag
  kFramework,       // a ZeRO stage or recompute policy the framework does not have
  kRecomputeMethod, // recompute_method / recompute_layers without recompute = full
  kSeqCp,           // seq length % (2·cp) with context parallelism
  kCpAttention,     // context parallelism without flash (fused) attention
  kEpDense,         // ep > 1 or etp set on a model without experts
  kEpExperts,       // num_experts % ep
  kExpertGrid,      // (tp·cp·dp) % (etp·ep): the expert grid does not tile the stage's ranks
  kEtpFfn,          // moe_ffn_hidden_size % etp
  kMoeSp,           // a mixture of experts with tp > 1 and no sequence parallelism
  kMoeFramework,    // a mixture of experts under a framework (or layout) whose MoE is not modelled
  kMtpFramework,    // multi-token-prediction modules trained under a framework that has none
  kMicrobatchGroup,  // microbatch_group without interleaving, or outside [pp, micro-batches]
  kMoeDispatch,     // moe_token_dispatcher / moe_ep_overlap settings Megatron refuses or paraplan does not model
  kCount
};
const char* invalid_name(Invalid r);

struct LayoutProblem {
  Invalid reason;
  std::string field;    // the layout or spec field at fault
  std::string message;  // what was expected
};

// Fills in dp when it is 0 (derived from the GPU count), turns sp off when
// tp == 1 (as Megatron-LM does), and reports the first reason the layout cannot
// run. `check_tp_span` enforces that a tp group fits in one node.
std::optional<LayoutProblem> resolve_layout(const Spec& spec, Layout* layout,
                                            bool check_tp_span = true);
// Allocation-free variant for the search: returns only the reason.
std::optional<Invalid> layout_invalid(const Spec& spec, const Layout& layout,
                                      bool check_tp_span = true);

// Transformer layers per pipeline rank (all of its model chunks), as
// Megatron-LM builds them (NVIDIA/Megatron-LM@d98e8a64
// megatron/core/transformer/transformer_block.py:103-143): the first and last
// ranks take first_stage_layers / last_stage_layers when set, the other ranks
// share the remaining layers evenly. With pp = 1 all three are num_layers.
// Each rank's layers split over its vpp model chunks evenly; when the first
// (last) rank's count is not a multiple of vpp, its first (last) chunk is the
// short one, as with --account-for-embedding-in-pipeline-split
// (--account-for-loss-...; transformer_block.py:186-200).
struct StageSplit {
  int first = 0, middle = 0, last = 0;
  int of(int stage, int pp) const { return stage == 0 ? first : stage == pp - 1 ? last : middle; }
  int most() const { return first > middle ? (first > last ? first : last) : (middle > last ? middle : last); }
};
// False when the layers cannot be split so (a remainder, a stage left with no
// layers, a rank's layers not divisible by vpp other than as uneven_form's
// kAccountFor allows).
bool stage_split(int num_layers, const Layout& l, StageSplit* out);

// How Megatron-LM expresses a layout's first/last stage layer counts:
// --decoder-first/last-pipeline-num-layers (every rank's layers divisible by
// vpp), or with vpp > 1 and a rank one layer short, only
// --account-for-embedding/loss-in-pipeline-split; kNone when neither can.
enum class UnevenForm { kEven, kDecoderLayers, kAccountFor, kNone };
UnevenForm uneven_form(int num_layers, const Layout& l);

// nanotron's pipeline split (balance=cost; huggingface/nanotron@67c5ebb6
// src/nanotron/models/base.py:214-240): the blocks in order (embedding,
// num_layers decoder layers, final norm, lm_head, fp32 cast, loss) with costs
// (llama.py:913-925: a decoder layer 4·heads·head_dim·h + 3·ffn·h, the
// lm_head vocab·h, the others 0); rank r's threshold is total·(r+1)/pp, and a
// block goes to the current rank, which advances once the running cost
// exceeds its threshold. So a rank may hold no decoder layer, and with a large
// vocabulary the lm_head, the cast and the loss can sit on three ranks.
struct CostSplit {
  int pp = 1, num_layers = 0;
  double layer_cost = 0, total_cost = 0;
  int head_stage = 0, cast_stage = 0, loss_stage = 0;
  // The global index of rank `stage`'s first decoder layer (num_layers past the last).
  int first_layer(int stage) const;
  int layers(int stage) const { return first_layer(stage + 1) - first_layer(stage); }
  // Every rank holds at least one block, each layer's cost fits a rank's share.
  bool valid() const;
  double threshold(int r) const { return total_cost * (double(r + 1) / double(pp)); }
};
CostSplit cost_split(const Model& m, int pp);

// Layers on pipeline rank `stage` of a valid layout.
inline int stage_layers(const Model& m, const Layout& l, int stage) {
  if (l.balance == StageBalance::kCost && l.pp > 1) return cost_split(m, l.pp).layers(stage);
  StageSplit sp;
  stage_split(m.num_layers, l, &sp);
  return sp.of(stage, l.pp);
}
// The pipeline rank that runs the output layer (final norm, lm_head) and the
// one that runs the loss: the last, except where nanotron's cost split puts
// them earlier (CostSplit).
inline int output_stage(const Model& m, const Layout& l) {
  return l.balance == StageBalance::kCost && l.pp > 1 ? cost_split(m, l.pp).head_stage : l.pp - 1;
}
inline int loss_stage(const Model& m, const Layout& l) {
  return l.balance == StageBalance::kCost && l.pp > 1 ? cost_split(m, l.pp).loss_stage : l.pp - 1;
}
// Layers of model chunk `chunk` (0 <= chunk < vpp) of a rank holding `n`
// layers: n / vpp, the first rank's first chunk or the last rank's last chunk
// taking the shortfall when vpp does not divide n.
inline int chunk_layers(int n, const Layout& l, int stage, int chunk) {
  const int v = l.vpp;
  if (n % v == 0) return n / v;
  const int base = (n + v - 1) / v, short_chunk = n - (v - 1) * base;
  const int at = stage == 0 ? 0 : v - 1;
  return chunk == at ? short_chunk : base;
}
// Layers of virtual stage vs = chunk·pp + stage (Megatron's order of model
// chunks through the pipeline), and the global index of its first layer.
inline int virtual_stage_layers(const StageSplit& sp, const Layout& l, int vs) {
  const int stage = vs % l.pp, chunk = vs / l.pp;
  return chunk_layers(sp.of(stage, l.pp), l, stage, chunk);
}
// In O(vpp): every earlier round of chunks (each rank's chunk c' < chunk:
// the first rank's, pp - 2 middle ranks' and the last rank's), then this
// round's chunks on the ranks before `stage` (the first, then middle ones).
inline int virtual_stage_first_layer(const StageSplit& sp, const Layout& l, int vs) {
  const int p = l.pp, stage = vs % p, chunk = vs / p;
  auto first = [&](int c) { return chunk_layers(sp.first, l, 0, c); };
  auto middle = [&](int c) { return p > 2 ? chunk_layers(sp.middle, l, 1, c) : 0; };
  auto last = [&](int c) { return p > 1 ? chunk_layers(sp.last, l, p - 1, c) : 0; };
  std::int64_t n = 0;
  for (int c = 0; c < chunk; ++c) n += first(c) + std::int64_t(p > 2 ? p - 2 : 0) * middle(c) + last(c);
  if (stage > 0) n += first(chunk) + std::int64_t(stage - 1) * middle(chunk);
  return int(n);
}

// Mixture-of-experts layers among the n layers from global layer `first`
// (Model::is_moe_layer: from first_dense_layers on, every moe_layer_freq-th).
inline int moe_layers_in(const Model& m, int first, int n) {
  if (!m.is_moe() || n <= 0) return 0;
  const std::int64_t f = m.moe_layer_freq > 0 ? m.moe_layer_freq : 1;
  // Multiples of f in [max(first, first_dense_layers), first + n).
  auto upto = [&](std::int64_t x) { return x <= 0 ? std::int64_t(0) : (x + f - 1) / f; };  // multiples of f in [0, x)
  const std::int64_t lo = first > m.first_dense_layers ? first : m.first_dense_layers, hi = std::int64_t(first) + n;
  return hi <= lo ? 0 : int(upto(hi) - upto(lo));
}
// The layers and MoE layers of rank `stage`'s model chunks 0, 1, ... in
// turn, O(1) each (chunk_moe_layers recounts a chunk's first layer in
// O(chunk): O(vpp^2) over a rank): each round of chunks adds the first
// rank's, pp - 2 middle ranks' and the last rank's chunk to the running start.
class ChunkWalk {
 public:
  ChunkWalk(const Model& m, const Layout& l, const StageSplit& sp, int stage) : m_(m), l_(l), sp_(sp), stage_(stage) {}
  // Advances to the next chunk: its MoE layers (and its layers, if asked).
  int next(int* layers = nullptr) {
    const int p = l_.pp, c = chunk_++;
    const int first = chunk_layers(sp_.first, l_, 0, c), middle = p > 2 ? chunk_layers(sp_.middle, l_, 1, c) : 0,
              last = p > 1 ? chunk_layers(sp_.last, l_, p - 1, c) : 0;
    const int n = stage_ == 0 ? first : stage_ == p - 1 ? last : middle;
    const std::int64_t start = round_start_ + (stage_ > 0 ? first + std::int64_t(stage_ - 1) * middle : 0);
    round_start_ += first + std::int64_t(p > 2 ? p - 2 : 0) * middle + last;
    if (layers) *layers = n;
    return moe_layers_in(m_, int(start), n);
  }

 private:
  const Model& m_;
  const Layout& l_;
  const StageSplit& sp_;
  int stage_, chunk_ = 0;
  std::int64_t round_start_ = 0;
};

// Of model chunk `chunk` of pipeline rank `stage` (of a valid layout), and of the whole rank.
int chunk_moe_layers(const Model& m, const Layout& l, int stage, int chunk);
int chunk_moe_layers(const Model& m, const Layout& l, const StageSplit& split, int stage, int chunk);
int stage_moe_layers(const Model& m, const Layout& l, int stage);

// Full recomputation of a model chunk of n layers (Megatron-LM
// megatron/core/recompute.py:157-180): the layers re-run in the backward, the
// layer inputs kept as checkpoints, and the layers kept whole (block only).
inline int recomputed_layers(const Layout& l, int n) {
  if (l.recompute != Recompute::kFull) return 0;
  return l.recompute_method == RecomputeMethod::kBlock ? (l.recompute_layers < n ? l.recompute_layers : n) : n;
}
inline int checkpointed_inputs(const Layout& l, int n) {
  if (l.recompute != Recompute::kFull) return 0;
  if (l.recompute_method == RecomputeMethod::kBlock) return recomputed_layers(l, n);
  return (n + l.recompute_layers - 1) / l.recompute_layers;
}
inline int whole_layers(const Layout& l, int n) {
  return l.recompute == Recompute::kFull ? n - recomputed_layers(l, n) : n;
}
// Share of the model's layers that full recomputation re-runs.
inline double recomputed_fraction(const Model& m, const Layout& l) {
  if (l.recompute != Recompute::kFull || !l.partial_recompute_set()) return l.recompute == Recompute::kFull ? 1.0 : 0.0;
  StageSplit sp;
  if (!stage_split(m.num_layers, l, &sp)) return 1.0;
  double n = 0;
  for (int vs = 0; vs < l.pp * l.vpp; ++vs) n += recomputed_layers(l, virtual_stage_layers(sp, l, vs));
  return n / m.num_layers;
}

inline int num_microbatches(const Spec& s, const Layout& l) {
  return int(s.training.global_batch_size / (std::int64_t(l.dp) * l.mbs));
}

}  // namespace paraplan
