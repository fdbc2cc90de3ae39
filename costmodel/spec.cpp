#include "costmodel/spec.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "costmodel/frameworks/profile.hpp"

namespace paraplan {

const char* invalid_name(Invalid r) {
  switch (r) {
    case Invalid::kGpuCount: return "gpu_count";
    case Invalid::kHeadsTp: return "heads_not_divisible_by_tp";
    case Invalid::kKvHeadsTp: return "kv_heads_not_divisible_by_tp";
    case Invalid::kFfnTp: return "ffn_not_divisible_by_tp";
    case Invalid::kSeqSp: return "seq_not_divisible_by_tp";
    case Invalid::kLayersPp: return "layers_not_divisible_by_pp_vpp";
    case Invalid::kBatch: return "batch_not_divisible_by_dp_mbs";
    case Invalid::kVpp: return "vpp_invalid";
    case Invalid::kInterleavedMicrobatches: return "microbatches_not_divisible_by_pp";
    case Invalid::kTpAcrossNodes: return "tp_across_nodes";
    case Invalid::kFramework: return "not_in_framework";
    case Invalid::kRecomputeMethod: return "recompute_method_needs_full";
    case Invalid::kSeqCp: return "seq_not_divisible_by_2cp";
    case Invalid::kCpAttention: return "cp_needs_flash_attention";
    case Invalid::kEpDense: return "ep_needs_experts";
    case Invalid::kEpExperts: return "experts_not_divisible_by_ep";
    case Invalid::kExpertGrid: return "etp_ep_not_dividing_tp_cp_dp";
    case Invalid::kEtpFfn: return "moe_ffn_not_divisible_by_etp";
    case Invalid::kMoeSp: return "moe_tp_needs_sp";
    case Invalid::kMoeFramework: return "moe_not_in_framework";
    case Invalid::kMtpFramework: return "mtp_not_in_framework";
    case Invalid::kMicrobatchGroup: return "microbatch_group";
    case Invalid::kMoeDispatch: return "moe_dispatch_settings";
    case Invalid::kCount: break;
  }
  return "?";
}

CostSplit cost_split(const Model& m, int pp) {
  CostSplit c;
  c.pp = std::max(1, pp);
  c.num_layers = m.num_layers;
  const double h = m.hidden_size;
  c.layer_cost = 4.0 * m.num_attention_heads * m.head_dim * h + 3.0 * double(m.ffn_hidden_size) * h;
  c.total_cost = c.layer_cost * m.num_layers + double(m.vocab_size) * h;
  // The rank after the last decoder layer: the number of thresholds below
  // the running cost num_layers·layer_cost (each layer crosses at most one
  // when layer_cost <= total/pp, what valid() requires).
  int k = 0;
  for (int lo = 0, hi = c.pp; lo < hi;) {  // the first r with threshold(r) >= L·c
    const int mid = lo + (hi - lo) / 2;
    if (c.threshold(mid) < c.layer_cost * m.num_layers) lo = mid + 1, k = lo;
    else hi = mid;
  }
  c.head_stage = std::min(k, c.pp - 1);
  // The lm_head brings the running cost to the total: past its rank's
  // threshold unless that rank is the last; the cast then the loss follow.
  c.cast_stage = std::min(c.head_stage + 1, c.pp - 1);
  c.loss_stage = std::min(c.cast_stage + 1, c.pp - 1);
  return c;
}

int CostSplit::first_layer(int stage) const {
  if (stage <= 0) return 0;
  if (stage >= pp) return num_layers;
  // The first layer j (0-based) whose running cost before it, j·layer_cost,
  // exceeds rank stage-1's threshold.
  const double t = threshold(stage - 1);
  double j = std::floor(t / layer_cost);
  while (j * layer_cost <= t) j += 1;
  while (j > 0 && (j - 1) * layer_cost > t) j -= 1;
  return int(std::min<double>(j, num_layers));
}

bool CostSplit::valid() const {
  if (pp <= 1) return true;
  if (layer_cost <= 0 || layer_cost * pp > total_cost) return false;
  // Ranks up to head_stage hold layers or the output layer; the cast and the
  // loss take the next two; any rank past the loss's would be empty.
  for (int s = 0; s < head_stage; ++s)
    if (layers(s) == 0) return false;
  return loss_stage == pp - 1;
}

namespace {
// How Megatron-LM builds uneven first/last stages of `first`, `middle` and
// `last` layers (`inner` ranks of `middle`), as uneven_form says.
UnevenForm form_of(const Layout& l, std::int64_t first, std::int64_t middle, std::int64_t last, std::int64_t inner) {
  // NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/transformer_config.py:
  // --decoder-first/last-pipeline-num-layers need each of the first, last and
  // middle ranks' layers divisible by vpp (:2294-2368); otherwise only
  // --account-for-embedding/loss-in-pipeline-split give a rank one layer
  // fewer than the others, (L + 1 or 2) / pp each divisible by vpp (:2370-2410),
  // its short chunk the first (last) (transformer_block.py:186-200). The two
  // ways do not combine (:2230-2238).
  const int v = l.vpp;
  if (first % v == 0 && last % v == 0 && (l.pp <= 2 || middle % v == 0)) return UnevenForm::kDecoderLayers;
  // Every rank builds `per` counted layers, the one holding the embedding (the
  // loss) one real layer fewer when it is counted; without inner ranks, per is
  // the longer end, or one more than both when they are equal.
  const std::int64_t per = inner > 0 ? middle : first == last ? first + 1 : std::max(first, last);
  if (per % v) return UnevenForm::kNone;
  const auto ok = [per](int set, std::int64_t n) { return set == 0 || n == per || n == per - 1; };
  if (!ok(l.first_stage_layers, first) || !ok(l.last_stage_layers, last)) return UnevenForm::kNone;
  return UnevenForm::kAccountFor;
}

// The first, middle and last ranks' layers (pp >= 2), and how many ranks
// hold `middle` layers (the ranks without a set count); false when they do not split.
bool split_counts(int L, const Layout& l, StageSplit* out, std::int64_t* inner, std::int64_t* mid) {
  std::int64_t left = L, stages = l.pp;
  if (l.first_stage_layers > 0) left -= l.first_stage_layers, --stages;
  if (l.last_stage_layers > 0) left -= l.last_stage_layers, --stages;
  int middle = 0;
  if (stages > 0) {
    if (left < stages || left % stages) return false;
    middle = int(left / stages);
  } else if (left != 0) {
    return false;
  }
  out->first = l.first_stage_layers > 0 ? l.first_stage_layers : middle;
  out->last = l.last_stage_layers > 0 ? l.last_stage_layers : middle;
  out->middle = l.pp > 2 ? middle : out->first;
  *inner = stages;
  *mid = middle;
  return true;
}
}  // namespace

bool stage_split(int L, const Layout& l, StageSplit* out) {
  if (l.pp < 1 || l.vpp < 1) return false;
  if (l.pp == 1) {
    *out = {L, L, L};
    return !l.uneven() && L % l.vpp == 0;
  }
  std::int64_t inner = 0, mid = 0;
  if (!split_counts(L, l, out, &inner, &mid)) return false;
  // Even: every rank's layers split into vpp equal chunks (transformer_block.py:176-180).
  if (!l.uneven()) return mid % l.vpp == 0;
  return form_of(l, out->first, mid, out->last, inner) != UnevenForm::kNone;
}

UnevenForm uneven_form(int L, const Layout& l) {
  if (!l.uneven()) return UnevenForm::kEven;
  if (l.pp < 2 || l.vpp < 1) return UnevenForm::kNone;
  StageSplit sp;
  std::int64_t inner = 0, mid = 0;
  if (!split_counts(L, l, &sp, &inner, &mid)) return UnevenForm::kNone;
  return form_of(l, sp.first, mid, sp.last, inner);
}

namespace {
// Every layer from the first on is an MoE layer (Mixtral, Qwen-MoE): a chunk's
// MoE layers are its layers.
bool all_moe(const Model& m) { return m.first_dense_layers == 0 && m.moe_layer_freq <= 1; }
}  // namespace

int chunk_moe_layers(const Model& m, const Layout& l, const StageSplit& sp, int stage, int chunk) {
  if (!m.is_moe()) return 0;
  const int vs = chunk * l.pp + stage, n = virtual_stage_layers(sp, l, vs);
  if (all_moe(m)) return n;
  return moe_layers_in(m, virtual_stage_first_layer(sp, l, vs), n);
}

int chunk_moe_layers(const Model& m, const Layout& l, int stage, int chunk) {
  if (!m.is_moe()) return 0;
  if (l.balance == StageBalance::kCost && l.pp > 1) {
    const CostSplit cs = cost_split(m, l.pp);
    return moe_layers_in(m, cs.first_layer(stage), cs.layers(stage));
  }
  StageSplit sp;
  if (!stage_split(m.num_layers, l, &sp)) return 0;
  return chunk_moe_layers(m, l, sp, stage, chunk);
}

int stage_moe_layers(const Model& m, const Layout& l, int stage) {
  if (!m.is_moe()) return 0;
  if (l.balance == StageBalance::kCost && l.pp > 1) return chunk_moe_layers(m, l, stage, 0);
  StageSplit sp;
  if (!stage_split(m.num_layers, l, &sp)) return 0;
  if (all_moe(m)) return sp.of(stage, l.pp);
  if (m.moe_layer_freq <= 1) {
    // A dense prefix of first_dense_layers: the rank's layers less those of its
    // chunks that fall in the prefix, walking rounds of chunks only until a
    // round starts past it (O(chunks in the prefix), not O(vpp^2)).
    const int p = l.pp, fd = m.first_dense_layers;
    int dense = 0;
    std::int64_t round_start = 0;
    for (int c = 0; c < l.vpp && round_start < fd; ++c) {
      const int first = chunk_layers(sp.first, l, 0, c), middle = p > 2 ? chunk_layers(sp.middle, l, 1, c) : 0,
                last = p > 1 ? chunk_layers(sp.last, l, p - 1, c) : 0;
      const std::int64_t start = round_start + (stage > 0 ? first + std::int64_t(stage - 1) * middle : 0);
      const int n = chunk_layers(sp.of(stage, p), l, stage, c);
      dense += int(std::max<std::int64_t>(0, std::min<std::int64_t>(start + n, fd) - start));
      round_start += first + std::int64_t(p > 2 ? p - 2 : 0) * middle + last;
    }
    return sp.of(stage, p) - dense;
  }
  int n = 0;
  for (int c = 0; c < l.vpp; ++c) n += chunk_moe_layers(m, l, sp, stage, c);
  return n;
}

// Why the MoE dispatch settings cannot run this layout (nullptr: they can). Megatron-LM@d98e8a64
// transformer_config.py:3002-3032 asserts EP overlap's conditions (ep > 1, the alltoall or flex dispatcher,
// no full recomputation, interleaving with pp > 1); paraplan also refuses it with pp > 1, where the combined
// schedule runs one more warm-up micro-batch (schedules.py:966-969) that the memory model does not hold.
namespace {
struct DispatchProblem {
  const char* field;  // the layout field at fault, or "framework"
  const char* message;
};
std::optional<DispatchProblem> moe_dispatch_problem(const Spec& s, const Layout& l) {
  const Training& t = s.training;
  if (t.moe_dispatcher == Training::MoeDispatcher::kAllGather && t.framework != Framework::kMegatron)
    return DispatchProblem{"framework", "moe_token_dispatcher allgather is Megatron-LM's (token_dispatcher.py:233); "
                                        "expected framework megatron or alltoall"};
  if (!t.moe_ep_overlap) return std::nullopt;
  if (t.framework != Framework::kMegatron)
    return DispatchProblem{"framework", "moe_ep_overlap is Megatron-LM's --overlap-moe-expert-parallel-comm; expected "
                                        "framework megatron"};
  if (l.ep < 2) return DispatchProblem{"ep", "moe_ep_overlap needs ep > 1 (Megatron-LM transformer_config.py:3013-3015 asserts it)"};
  if (t.moe_dispatcher != Training::MoeDispatcher::kAllToAll)
    return DispatchProblem{"framework", "moe_ep_overlap needs the alltoall dispatcher (transformer_config.py:3016-3019 "
                                        "asserts it)"};
  if (l.recompute == Recompute::kFull)
    return DispatchProblem{"recompute", "moe_ep_overlap cannot run with full recomputation "
                                        "(transformer_config.py:3021-3023 asserts it)"};
  if (l.pp > 1)
    return DispatchProblem{"pp", "moe_ep_overlap with pp > 1 is not modelled (the combined 1F1B schedule's extra "
                                 "warm-up micro-batch, schedules.py:966-969); expected pp 1"};
  return std::nullopt;
}
}  // namespace

std::optional<Invalid> layout_invalid(const Spec& s, const Layout& l, bool check_tp_span) {
  const Model& m = s.model;
  // Every factor is checked against its bound before any product, so the
  // products below stay far inside 64 bits (factors <= 2^24, 2^16 layers).
  const std::int64_t gpus = s.num_gpus();
  if (l.dp < 1 || l.tp < 1 || l.pp < 1 || l.cp < 1 || l.dp > gpus || l.tp > gpus || l.pp > gpus || l.cp > gpus)
    return Invalid::kGpuCount;
  if (std::int64_t(l.dp) * l.tp * l.pp > gpus || std::int64_t(l.dp) * l.tp * l.pp * l.cp != gpus) return Invalid::kGpuCount;
  if (check_tp_span && l.tp > s.cluster.gpus_per_node && !s.search.allow_tp_across_nodes)
    return Invalid::kTpAcrossNodes;
  if (m.num_attention_heads % l.tp) return Invalid::kHeadsTp;
  if (m.num_kv_heads % l.tp) return Invalid::kKvHeadsTp;
  if (m.ffn_hidden_size % l.tp) return Invalid::kFfnTp;
  // Megatron-LM arguments.py:1335-1338: seq % (2·cp), each rank holding two
  // chunks of s/(2cp) for causal load balance; with SP, s/cp splits over tp.
  if (l.cp > 1 && s.training.seq_length % (2 * std::int64_t(l.cp))) return Invalid::kSeqCp;
  if (l.sp && (s.training.seq_length / l.cp) % l.tp) return Invalid::kSeqSp;
  // Context parallelism runs inside Transformer Engine's fused / flash
  // attention (TE context_parallel.py); there is no unfused path.
  if (l.cp > 1 && !s.training.flash_attention) return Invalid::kCpAttention;
  if (s.training.mtp && !profile(s.training.framework).mtp) return Invalid::kMtpFramework;
  if (!m.is_moe()) {
    if (l.ep != 1 || l.etp > 0) return Invalid::kEpDense;
  } else {
    // Megatron-LM@d98e8a64 arguments.py:1655-1658 (num_experts % ep),
    // parallel_state.py:873-884 (world % (etp·ep·pp)), moe_layer.py:636-639
    // (MoE with tp > 1 raises without sequence parallelism).
    const int etp = l.expert_tp();
    if (l.ep < 1 || etp < 1 || l.ep > gpus || etp > gpus) return Invalid::kExpertGrid;
    if (m.num_experts % l.ep) return Invalid::kEpExperts;
    if ((std::int64_t(l.dp) * l.tp * l.cp) % (std::int64_t(etp) * l.ep)) return Invalid::kExpertGrid;
    if (m.moe_ffn_hidden_size % etp) return Invalid::kEtpFfn;
    if (l.tp > 1 && !l.sp) return Invalid::kMoeSp;
    if (moe_unsupported(profile(s.training.framework), m, l)) return Invalid::kMoeFramework;
    if (moe_dispatch_problem(s, l)) return Invalid::kMoeDispatch;
  }
  if (l.vpp < 1 || (l.vpp > 1 && (l.pp < 2 || l.schedule == Schedule::kGPipe))) return Invalid::kVpp;
  if (l.pp > m.num_layers || l.vpp > m.num_layers) return Invalid::kLayersPp;
  if (l.balance == StageBalance::kCost && l.pp > 1) {
    // nanotron's split: no interleaving, no Megatron stage counts, and every
    // rank must receive a block.
    if (l.vpp > 1 || l.uneven()) return Invalid::kVpp;
    if (!cost_split(m, l.pp).valid()) return Invalid::kLayersPp;
  } else if (!l.uneven()) {
    if (m.num_layers % (std::int64_t(l.pp) * l.vpp)) return Invalid::kLayersPp;
  } else if (StageSplit split; !stage_split(m.num_layers, l, &split)) {
    return Invalid::kLayersPp;
  }
  if (l.mbs < 1 || l.mbs > s.training.global_batch_size ||
      s.training.global_batch_size % (std::int64_t(l.dp) * l.mbs))
    return Invalid::kBatch;
  if (l.microbatch_group > 0 && !l.interleaved()) return Invalid::kMicrobatchGroup;
  if (l.interleaved()) {
    // Megatron-LM@d98e8a64 schedules.py:1160-1179: the group g (pp by default)
    // lies in [pp, m], and the last group is whole or holds at least pp (with
    // the default g = pp: m divisible by pp; m >= 1 after the batch check).
    const int m = num_microbatches(s, l), g = l.group();
    if (l.microbatch_group > 0 && (g < l.pp || g > m)) return Invalid::kMicrobatchGroup;
    if (m % g > 0 && m % g < l.pp) return Invalid::kInterleavedMicrobatches;
  }
  if (l.partial_recompute_set() && l.recompute != Recompute::kFull) return Invalid::kRecomputeMethod;
  if (framework_unsupported(profile(s.training.framework), l, &m, &s.training)) return Invalid::kFramework;
  return std::nullopt;
}

namespace {
// dp·tp·cp·pp as text, exact while it fits in 64 bits (each factor is at most 2^24).
std::string gpu_product_text(const Layout& l) {
  const double x = double(l.dp) * l.tp * l.pp * l.cp;
  if (x > double(std::int64_t(1) << 62)) return "more than 2^62";
  return std::to_string(std::int64_t(l.dp) * l.tp * l.pp * l.cp);
}
// Why first_stage_layers / last_stage_layers cannot split the model's layers.
LayoutProblem uneven_problem(const Model& m, const Layout& l) {
  using std::to_string;
  const std::string field = l.first_stage_layers > 0 ? "first_stage_layers" : "last_stage_layers";
  if (l.pp < 2)
    return {Invalid::kLayersPp, field, field + " needs pp >= 2, got pp = " + to_string(l.pp)};
  std::int64_t left = m.num_layers, stages = l.pp;
  std::string taken;
  if (l.first_stage_layers > 0) left -= l.first_stage_layers, --stages, taken += " - first_stage_layers " + to_string(l.first_stage_layers);
  if (l.last_stage_layers > 0) left -= l.last_stage_layers, --stages, taken += " - last_stage_layers " + to_string(l.last_stage_layers);
  const std::string rest = "num_layers " + to_string(m.num_layers) + taken + " = " + to_string(left);
  if (stages == 0 && left != 0)
    return {Invalid::kLayersPp, field, rest + " layers left for no other stage; expected 0"};
  if (stages > 0 && (left < stages || left % stages))
    return {Invalid::kLayersPp, field,
            rest + " layers, not a positive multiple of the " + to_string(stages) + " other pipeline stages"};
  return {Invalid::kLayersPp, "vpp",
          "each pipeline stage's layers must be divisible by vpp " + to_string(l.vpp) + " (" + rest + " over " +
              to_string(stages) + " other stages), or the first and last stages one layer short of the others' " +
              "multiple of vpp, as Megatron-LM's --account-for-embedding/loss-in-pipeline-split builds them " +
              "(transformer_config.py:2294-2410)"};
}

}  // namespace

std::optional<LayoutProblem> resolve_layout(const Spec& s, Layout* l, bool check_tp_span) {
  using std::to_string;
  const int gpus = s.num_gpus();
  if (l->tp == 1) l->sp = false;
  if (l->dp == 0) {
    const std::int64_t tp_pp = std::int64_t(l->tp) * l->pp;  // each at most kMaxGpus (layout parser)
    const std::int64_t tp_cp_pp = tp_pp <= gpus ? tp_pp * l->cp : tp_pp;
    if (l->tp < 1 || l->pp < 1 || l->cp < 1 || tp_pp > gpus || tp_cp_pp > gpus || gpus % tp_cp_pp)
      return LayoutProblem{Invalid::kGpuCount, "tp",
                           std::string(l->cp > 1 ? "tp*cp*pp = " : "tp*pp = ") + to_string(tp_cp_pp) + " does not divide the " +
                               to_string(gpus) + " GPUs of the spec (num_nodes " +
                               to_string(s.num_nodes) + " x gpus_per_node " +
                               to_string(s.cluster.gpus_per_node) + ")"};
    l->dp = int(gpus / tp_cp_pp);
  }
  // A framework that splits its pipeline by compute cost always does (nanotron, base.py:214-240).
  // Megatron's expert tensor-parallel size defaults to tp (arguments.py:587-588).
  if (s.model.is_moe() && l->etp == 0) l->etp = l->tp;
  if (profile(s.training.framework).cost_balanced_pipeline && l->pp > 1 && !l->uneven() && l->vpp == 1)
    l->balance = StageBalance::kCost;
  const auto r = layout_invalid(s, *l, check_tp_span);
  if (!r) return std::nullopt;
  const Model& m = s.model;
  const Training& t = s.training;
  switch (*r) {
    case Invalid::kGpuCount:
      return LayoutProblem{*r, "dp",
                           std::string(l->cp > 1 ? "dp*tp*cp*pp = " : "dp*tp*pp = ") + to_string(l->dp) + "*" +
                               to_string(l->tp) + "*" + (l->cp > 1 ? to_string(l->cp) + "*" : std::string()) +
                               to_string(l->pp) + " = " + gpu_product_text(*l) +
                               " GPUs, but the spec has " + to_string(gpus) + " (num_nodes " +
                               to_string(s.num_nodes) + " x gpus_per_node " +
                               to_string(s.cluster.gpus_per_node) + ")"};
    case Invalid::kHeadsTp:
      return LayoutProblem{*r, "tp",
                           "num_attention_heads " + to_string(m.num_attention_heads) +
                               " is not divisible by tp " + to_string(l->tp)};
    case Invalid::kKvHeadsTp:
      return LayoutProblem{*r, "tp",
                           "num_kv_heads " + to_string(m.num_kv_heads) +
                               " is not divisible by tp " + to_string(l->tp)};
    case Invalid::kFfnTp:
      return LayoutProblem{*r, "tp",
                           "ffn_hidden_size " + to_string(m.ffn_hidden_size) +
                               " is not divisible by tp " + to_string(l->tp)};
    case Invalid::kSeqSp:
      return LayoutProblem{*r, "sp",
                           "sequence parallelism needs seq_length " + to_string(t.seq_length) +
                               (l->cp > 1 ? " / cp " + to_string(l->cp) : std::string()) + " divisible by tp " +
                               to_string(l->tp)};
    case Invalid::kVpp:
      if (l->balance == StageBalance::kCost && l->pp > 1)
        return LayoutProblem{*r, l->uneven() ? "first_stage_layers" : "vpp",
                             "balance=cost (nanotron's compute-cost split) has no interleaving and no fixed first/last stage "
                             "layer counts"};
      return LayoutProblem{*r, "vpp",
                           "vpp = " + to_string(l->vpp) +
                               " needs pp > 1 and the 1f1b (interleaved) schedule"};
    case Invalid::kLayersPp:
      if (l->balance == StageBalance::kCost && l->pp > 1)
        return LayoutProblem{*r, "pp",
                             "nanotron's compute-cost split of " + to_string(m.num_layers) + " layers and the output layer over pp " +
                                 to_string(l->pp) + " leaves a pipeline rank without a block (src/nanotron/models/base.py:214-240)"};
      if (l->uneven()) return uneven_problem(m, *l);
      return LayoutProblem{*r, "pp",
                           "num_layers " + to_string(m.num_layers) +
                               " is not divisible by pp*vpp = " + to_string(l->pp * l->vpp)};
    case Invalid::kBatch:
      return LayoutProblem{*r, "mbs",
                           "global_batch_size " + to_string(t.global_batch_size) +
                               " is not divisible by dp*mbs = " + to_string(std::int64_t(l->dp) * l->mbs)};
    case Invalid::kInterleavedMicrobatches:
      if (l->microbatch_group > 0)
        return LayoutProblem{*r, "microbatch_group",
                             "the interleaved schedule's last group of micro-batches (" +
                                 to_string(num_microbatches(s, *l)) + " mod microbatch_group " +
                                 to_string(l->microbatch_group) + ") must be whole or hold at least pp " +
                                 to_string(l->pp) + " (Megatron-LM schedules.py:1170-1179)"};
      return LayoutProblem{*r, "vpp",
                           "the interleaved schedule needs the number of micro-batches (" +
                               to_string(num_microbatches(s, *l)) + ") divisible by pp " +
                               to_string(l->pp)};
    case Invalid::kTpAcrossNodes:
      return LayoutProblem{*r, "tp",
                           "tp = " + to_string(l->tp) + " spans more than one node (gpus_per_node " +
                               to_string(s.cluster.gpus_per_node) +
                               "); set search.allow_tp_across_nodes: true to allow it"};
    case Invalid::kFramework: {
      const bool zero = !profile(t.framework).zero_supported[l->zero];
      const bool rc = !profile(t.framework).recompute_supported[int(l->recompute)];
      const bool method = l->partial_recompute_set() && profile(t.framework).partial_recompute_note;
      const bool cp = l->cp > 1 && profile(t.framework).cp_note;
      const Profile& p = profile(t.framework);
      const bool sac = l->recompute == Recompute::kSelective && p.selective_unsupported &&
                       p.selective_unsupported(s.model, *l, t);
      const bool gpipe = l->pp > 1 && l->schedule == Schedule::kGPipe && p.gpipe_note;
      return LayoutProblem{*r,
                           zero          ? "zero"
                           : rc || sac   ? "recompute"
                           : method      ? "recompute_method"
                           : cp          ? "cp"
                           : gpipe       ? "schedule"
                                         : "balance",
                           std::string("framework ") + framework_name(t.framework) + ": " +
                               framework_unsupported(p, *l, &s.model, &t)};
    }
    case Invalid::kSeqCp:
      return LayoutProblem{*r, "cp",
                           "context parallelism needs seq_length " + to_string(t.seq_length) +
                               " divisible by 2*cp = " + to_string(2 * std::int64_t(l->cp)) +
                               " (Megatron-LM arguments.py:1335-1338)"};
    case Invalid::kCpAttention:
      return LayoutProblem{*r, "cp",
                           "context parallelism runs in flash / fused attention (Transformer Engine); set "
                           "training.flash_attention: true"};
    case Invalid::kRecomputeMethod:
      return LayoutProblem{*r, l->recompute_method != RecomputeMethod::kUniform ? "recompute_method" : "recompute_layers",
                           std::string("recompute_method and recompute_layers apply to recompute=full (Megatron-LM "
                                       "transformer_config.py:1908-1929); got recompute=") +
                               recompute_name(l->recompute)};
    case Invalid::kEpDense:
      return LayoutProblem{*r, l->ep != 1 ? "ep" : "etp",
                           "expert parallelism (ep, etp) needs a mixture-of-experts model; " + m.name + " has no experts"};
    case Invalid::kEpExperts:
      return LayoutProblem{*r, "ep",
                           "num_experts " + to_string(m.num_experts) + " is not divisible by ep " + to_string(l->ep) +
                               " (Megatron-LM arguments.py:1655-1658)"};
    case Invalid::kExpertGrid:
      return LayoutProblem{*r, "ep",
                           "etp*ep = " + to_string(std::int64_t(l->expert_tp()) * l->ep) + " does not divide tp*cp*dp = " +
                               to_string(std::int64_t(l->tp) * l->cp * l->dp) +
                               ", the ranks of a pipeline stage the expert grid etp x ep x edp covers "
                               "(Megatron-LM parallel_state.py:873-884)"};
    case Invalid::kEtpFfn:
      return LayoutProblem{*r, "etp",
                           "moe_ffn_hidden_size " + to_string(m.moe_ffn_hidden_size) + " is not divisible by etp " +
                               to_string(l->expert_tp())};
    case Invalid::kMoeSp:
      return LayoutProblem{*r, "sp",
                           "a mixture of experts with tp " + to_string(l->tp) +
                               " > 1 needs sequence parallelism, sp=1 (Megatron-LM moe_layer.py:636-639 raises without it)"};
    case Invalid::kMoeFramework:
      return LayoutProblem{*r, "framework",
                           std::string("framework ") + framework_name(t.framework) + ": " +
                               moe_unsupported(profile(t.framework), s.model, *l)};
    case Invalid::kMicrobatchGroup:
      return LayoutProblem{*r, "microbatch_group",
                           l->interleaved()
                               ? "microbatch_group " + to_string(l->microbatch_group) + " must lie in [pp " +
                                     to_string(l->pp) + ", micro-batches " + to_string(num_microbatches(s, *l)) +
                                     "] (Megatron-LM schedules.py:1160-1168)"
                               : std::string("microbatch_group applies to the interleaved schedule (vpp > 1, schedule 1f1b)")};
    case Invalid::kMtpFramework:
      return LayoutProblem{*r, "framework",
                           std::string("framework ") + framework_name(t.framework) +
                               " has no multi-token-prediction modules to train (training.mtp: true is Megatron-LM's "
                               "--mtp-num-layers); expected framework megatron or mtp: false"};
    case Invalid::kMoeDispatch: {
      const std::optional<DispatchProblem> d = moe_dispatch_problem(s, *l);
      return LayoutProblem{*r, d ? d->field : "layout", d ? d->message : invalid_name(*r)};
    }
    case Invalid::kCount: break;
  }
  return LayoutProblem{*r, "layout", invalid_name(*r)};
}

}  // namespace paraplan
