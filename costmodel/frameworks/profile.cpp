#include "costmodel/frameworks/profile.hpp"

namespace paraplan {

const Profile& profile(Framework f) {
  switch (f) {
    case Framework::kMegatron: return megatron_profile();
    case Framework::kDeepSpeed: return deepspeed_profile();
    case Framework::kFsdp: return fsdp_profile();
    case Framework::kNanotron: return nanotron_profile();
    case Framework::kParaplan: return paraplan_profile();
  }
  return megatron_profile();
}

std::int64_t bucket_params(const Profile& p, const Training& t) {
  return t.grad_bucket_params_given ? t.grad_bucket_params : p.default_bucket_params;
}

int loss_transient_bytes_per_logit(const LossVariant& v, int act_bytes) {
  const int extra = 4 * v.forward_fp32_extra;
  if (act_bytes < 4)  // L and F are distinct tensors
    return (v.logits_live ? act_bytes : 0) + (v.upcast_live && !v.softmax_in_place ? 4 : 0) + extra;
  // fp32 activations: F is L. If S is made in place it is L too.
  if (v.softmax_in_place) return extra;
  return (v.logits_live || v.upcast_live ? 4 : 0) + extra;
}

std::int64_t loss_forward_peak_bytes(const LossVariant& v, std::int64_t tokens, std::int64_t vocab_rows, int act_bytes) {
  return tokens * vocab_rows * (4 + loss_transient_bytes_per_logit(v, act_bytes)) + tokens * v.row_bytes_per_token;
}

std::int64_t loss_backward_peak_bytes(const LossVariant& v, std::int64_t tokens, std::int64_t vocab_rows) {
  return v.backward_fp32_extra > 0 ? tokens * vocab_rows * 4 * (1 + v.backward_fp32_extra) : 0;
}

double grad_reduce_bytes(const Profile& p, const Training& t) {
  if (t.grad_reduce_dtype_given) return dtype_bytes(t.grad_reduce_dtype);
  return p.grad_reduce_bytes ? p.grad_reduce_bytes(t) : dtype_bytes(t.grad_dtype);
}

const char* moe_unsupported(const Profile& p, const Model& m, const Layout& l) {
  if (!m.is_moe()) return nullptr;
  if (p.moe_note) return p.moe_note;
  return p.moe_layout_unsupported ? p.moe_layout_unsupported(m, l) : nullptr;
}

double moe_expert_load(const Profile& p, const Training& t, int ep) {
  if (p.moe_padded_to_capacity) return t.moe_capacity_factor > 0 ? t.moe_capacity_factor : t.moe_load_imbalance;
  return t.moe_expert_load(ep);
}

const char* framework_unsupported(const Profile& p, const Layout& l, const Model* m, const Training* t) {
  if (l.zero < 0 || l.zero > 3 || !p.zero_supported[l.zero]) return p.zero_note;
  if (!p.recompute_supported[int(l.recompute)]) return p.recompute_note;
  if (l.recompute == Recompute::kSelective && p.selective_unsupported && m && t)
    if (const char* why = p.selective_unsupported(*m, l, *t)) return why;
  if (l.partial_recompute_set() && p.partial_recompute_note) return p.partial_recompute_note;
  if (l.cp > 1 && p.cp_note) return p.cp_note;
  if (l.pp > 1 && l.schedule == Schedule::kGPipe && p.gpipe_note) return p.gpipe_note;
  if (l.balance == StageBalance::kCost && l.pp > 1 && !p.cost_balanced_pipeline)
    return "balance=cost is nanotron's compute-cost pipeline split; this framework splits by layers "
           "(first_stage_layers / last_stage_layers for uneven stages)";
  return nullptr;
}

}  // namespace paraplan
