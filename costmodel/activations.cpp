#include "costmodel/activations.hpp"

#include <algorithm>

namespace paraplan {

std::int64_t tensor_bytes(const SavedTensor& t, const ActShape& a) {
  const std::int64_t elems = a.s * a.b * (t.width + t.quad_heads * a.s);
  // FP8: Transformer Engine's Linear saves the FP8 cast of its input, column-
  // wise data only (NVIDIA/TransformerEngine@d0067d0d
  // transformer_engine/pytorch/module/linear.py:600-621), 1 byte per element.
  const std::int64_t per_elem = a.fp8 && t.linear_input ? 1
                                : t.kind == ElemKind::kAct ? a.act_bytes
                                : t.kind == ElemKind::kMask ? 1
                                                            : 4;
  const bool split = t.shard == Shard::kTp || (t.shard == Shard::kSp && a.sp);
  // Exact: heads, kv heads and ffn divide tp; with SP the sequence does.
  return split ? elems * per_elem / a.tp : elems * per_elem;
}

namespace {
// What a norm keeps of its input: the input itself, or (eager RMSNorm) an fp32
// upcast of it and the normalized tensor the weight multiplies.
void add_norm_inputs(TensorList* l, const char* op, const Model& m, const ActivationVariant& v) {
  const std::int64_t h = m.hidden_size;
  if (v.rmsnorm_eager_upcast && m.normalization == Normalization::kRmsNorm) {
    l->add({op, "fp32 upcast of the input", h, 0, ElemKind::kFp32, Shard::kSp, false});
    l->add({op, "normalized (before the weight)", h, 0, ElemKind::kAct, Shard::kSp, false});
  } else {
    l->add({op, "input", h, 0, ElemKind::kAct, Shard::kSp, false});
  }
}
}  // namespace

TensorList layer_saved_tensors(const Model& m, bool flash, const ActivationVariant& v) {
  const std::int64_t h = m.hidden_size, q = m.q_width(), kv = m.kv_width(),
                     heads = m.num_attention_heads;
  const bool attn_drop = m.attention_dropout > 0, hid_drop = m.hidden_dropout > 0;
  TensorList l;
  // Attention block (pre-norm).
  const std::int64_t stats = m.normalization == Normalization::kRmsNorm ? 1 : 2;  // rstd (+ mean)
  add_norm_inputs(&l, "attn_norm", m, v);
  if (v.norm_saves_stats) l.add({"attn_norm", "fp32 statistics", stats, 0, ElemKind::kFp32, Shard::kSp, false});
  l.add({"qkv_linear", "input (norm output)", h, 0, ElemKind::kAct, Shard::kSp, false, true});
  if (flash) {
    // Flash attention saves Q, K, V, its output (counted as out_proj's input)
    // and the fp32 log-sum-exp per head and token (Dao et al. 2022).
    l.add({"flash_attention", "Q", q, 0, ElemKind::kAct, Shard::kTp, false});
    l.add({"flash_attention", "K", kv, 0, ElemKind::kAct, Shard::kTp, false});
    l.add({"flash_attention", "V", kv, 0, ElemKind::kAct, Shard::kTp, false});
    // MHA: Q is a view of the contiguous [3, b, s, a, d] copy, which stays
    // whole, and K, V live in a second, concatenated copy.
    if (v.mha_keeps_qkv_copy && m.num_kv_heads == m.num_attention_heads)
      l.add({"qkv_copy", "K, V slots of the [3,b,s,a,d] copy", 2 * kv, 0, ElemKind::kAct, Shard::kTp, false});
    // Flash attention's core saves nothing quadratic, so selective
    // recomputation has nothing to drop: the log-sum-exp stays (Korthikanti
    // et al. §5 recompute the s×s tensors flash never stores).
    l.add({"flash_attention", "log-sum-exp", heads, 0, ElemKind::kFp32, Shard::kTp, false});
  } else {
    l.add({"q_kt", "Q", q, 0, ElemKind::kAct, Shard::kTp, false});
    l.add({"q_kt", "K", kv, 0, ElemKind::kAct, Shard::kTp, false});
    // The softmax output is saved by softmax's backward and, without dropout,
    // is also the input attention-over-values saves: one tensor.
    l.add({"softmax", "output", 0, heads, ElemKind::kAct, Shard::kTp, true});
    if (attn_drop) {
      l.add({"attention_dropout", "mask", 0, heads, ElemKind::kMask, Shard::kTp, true});
      l.add({"attention_dropout", "output", 0, heads, ElemKind::kAct, Shard::kTp, true});
    }
    l.add({"attn_v", "V", kv, 0, ElemKind::kAct, Shard::kTp, false});
  }
  l.add({"out_proj", "input (attention output)", q, 0, ElemKind::kAct, Shard::kTp, false, true});
  if (m.post_norms) {
    // Gemma-2's post_attention_layernorm normalises the attention output
    // before the residual add: it saves its input (huggingface/transformers@9a80143c
    // src/transformers/models/gemma2/modeling_gemma2.py Gemma2DecoderLayer.forward).
    add_norm_inputs(&l, "post_attn_norm", m, v);
    if (v.norm_saves_stats) l.add({"post_attn_norm", "fp32 statistics", stats, 0, ElemKind::kFp32, Shard::kSp, false});
  }
  if (hid_drop) l.add({"attn_residual_dropout", "mask", h, 0, ElemKind::kMask, Shard::kSp, false});
  // MLP block.
  add_norm_inputs(&l, "mlp_norm", m, v);
  if (v.norm_saves_stats) l.add({"mlp_norm", "fp32 statistics", stats, 0, ElemKind::kFp32, Shard::kSp, false});
  l.add({"fc1", "input (norm output)", h, 0, ElemKind::kAct, Shard::kSp, false, true});
  const char* act = m.activation == Activation::kSwiglu ? "swiglu" : m.activation == Activation::kGeglu ? "geglu" : "gelu";
  l.add({act, "input", m.ffn_in_width(), 0, ElemKind::kAct, Shard::kTp, false});
  // An unfused gated MLP's multiply saves the activation's output (SiLU or
  // GeLU): act_fn(gate_proj(x)) * up_proj(x) (transformers@9a80143c
  // modeling_gemma2.py Gemma2MLP.forward; LlamaMLP the same with SiLU).
  if (v.swiglu_saves_silu_output && m.gated())
    l.add({act, "activation output (unfused multiply)", m.ffn_hidden_size, 0, ElemKind::kAct, Shard::kTp, false});
  l.add({"fc2", "input (activation output)", m.ffn_hidden_size, 0, ElemKind::kAct, Shard::kTp,
         false, true});
  if (m.post_norms) {
    add_norm_inputs(&l, "post_mlp_norm", m, v);
    if (v.norm_saves_stats) l.add({"post_mlp_norm", "fp32 statistics", stats, 0, ElemKind::kFp32, Shard::kSp, false});
  }
  if (hid_drop) l.add({"mlp_residual_dropout", "mask", h, 0, ElemKind::kMask, Shard::kSp, false});
  return l;
}

TensorList embedding_saved_tensors(const Model& m) {
  TensorList l;
  if (m.hidden_dropout > 0)
    l.add({"embedding_dropout", "mask", m.hidden_size, 0, ElemKind::kMask, Shard::kSp, false});
  return l;
}

TensorList output_saved_tensors(const Model& m) {
  TensorList l;
  l.add({"final_norm", "input", m.hidden_size, 0, ElemKind::kAct, Shard::kSp, false});
  l.add({"output_linear", "input (norm output)", m.hidden_size, 0, ElemKind::kAct, Shard::kSp,
         false});
  // Vocab-parallel cross-entropy keeps the fp32 softmax of its logit shard.
  // The vocabulary is padded up to a multiple of tp; callers pass the padded width.
  return l;
}

std::int64_t layer_activation_bytes(const Model& m, bool flash, Recompute r, const ActShape& a,
                                    const ActivationVariant& v) {
  if (r == Recompute::kFull) {
    const SavedTensor input{"layer", "input", m.hidden_size, 0, ElemKind::kAct, Shard::kSp, false};
    return tensor_bytes(input, a);
  }
  std::int64_t sum = 0;
  for (const SavedTensor& t : layer_saved_tensors(m, flash, v))
    if (!(r == Recompute::kSelective && t.core_attention)) sum += tensor_bytes(t, a);
  return sum;
}

namespace {
// Reserved minus requested bytes of one allocation (c10/cuda/CUDACachingAllocator.cpp:
// kMinLargeAlloc = 10 MiB, kRoundLarge = 2 MiB; smaller requests share segments).
std::int64_t segment_slack(std::int64_t bytes) {
  constexpr std::int64_t kMinLargeAlloc = 10 << 20, kRoundLarge = 2 << 20;
  if (bytes < kMinLargeAlloc) return 0;
  return (bytes + kRoundLarge - 1) / kRoundLarge * kRoundLarge - bytes;
}
}  // namespace

std::int64_t layer_rounding_slack(const Model& m, bool flash, Recompute r, const ActShape& a,
                                  const ActivationVariant& v) {
  if (r == Recompute::kFull) {
    const SavedTensor input{"layer", "input", m.hidden_size, 0, ElemKind::kAct, Shard::kSp, false};
    return segment_slack(tensor_bytes(input, a));
  }
  std::int64_t sum = 0;
  for (const SavedTensor& t : layer_saved_tensors(m, flash, v))
    if (!(r == Recompute::kSelective && t.core_attention)) sum += segment_slack(tensor_bytes(t, a));
  return sum;
}

TransientPeak layer_transient_peak(const Model& m, bool flash, Recompute r, const ActShape& a,
                                   const ActivationVariant& v) {
  const std::int64_t sb = a.s * a.b, tp = a.tp, e = a.act_bytes;
  const std::int64_t X = sb * m.hidden_size * e / (a.sp ? tp : 1);  // hidden state, sequence-sharded with SP
  const std::int64_t H = sb * m.hidden_size * e;                    // full hidden state (row-parallel partial sum)
  const std::int64_t U = sb * m.ffn_in_width() * e / tp, G = sb * m.ffn_hidden_size * e / tp;
  const std::int64_t C = sb * m.q_width() * e / tp, Q = sb * (m.q_width() + 2 * m.kv_width()) * e / tp;
  const std::int64_t D = m.hidden_dropout > 0 ? sb * m.hidden_size / (a.sp ? tp : 1) : 0;  // 1-byte mask
  const std::int64_t RS = a.sp ? X : 0;  // a reduce-scatter's output, alive with its input
  const std::int64_t DX = m.hidden_dropout > 0 ? X : 0;  // gradient through a residual dropout
  const std::int64_t none = layer_activation_bytes(m, flash, Recompute::kNone, a, v);
  const std::int64_t core = none - layer_activation_bytes(m, flash, Recompute::kSelective, a, v);
  const std::int64_t scratch = 8 * a.s;  // attention backward: 2·s fp32
  TransientPeak p;
  auto at = [&](std::int64_t bytes, const char* phase) {
    if (bytes > p.bytes) p = {bytes, phase};
  };
  const bool full = r == Recompute::kFull;
  const std::int64_t R = full ? none - X : 0;  // full: every saved tensor but the layer input
  // Forward (and full recomputation's re-run of it): the row-parallel partial
  // sum H, with its reduce-scatter output under SP; full recomputation holds
  // every re-created tensor (the MLP dropout mask only after the fc2 sum).
  const std::int64_t dres_if_recompute = full ? X : 0;
  at(dres_if_recompute + (full ? R - D : 0) + H + RS, full ? "residual grad + recomputed layer + fc2 partial sum" : "forward: row-parallel partial sum");
  at(dres_if_recompute + R + (a.sp ? X : H), full ? "residual grad + recomputed layer + fc2 output" : "forward: fc2 output");
  if (r == Recompute::kSelective && !flash) at(core, "forward: attention core (dropped after use)");
  // Backward, with the residual gradient X alive and R held to the end.
  const std::int64_t base = X + R;
  at(base + DX + G, "backward: residual grad + MLP output grad + fc2-input grad");
  at(base + G + U, "backward: residual grad + fc2-input grad + fc1-output grad");
  at(base + U + H, "backward: residual grad + fc1-output grad + MLP-norm-output grad");
  at(base + H + RS, "backward: residual grad + MLP-norm-output grad and its reduce-scatter");
  const std::int64_t recore = r == Recompute::kSelective && !flash ? core : 0;
  at(base + DX + C, "backward: residual grad + attention output grad + context grad");
  at(base + C + recore + Q + scratch, "backward: residual grad + context grad + recomputed core + QKV grad + scratch");
  at(base + Q + H, "backward: residual grad + QKV grad + attention-norm-output grad");
  at(base + H + RS, "backward: residual grad + attention-norm-output grad and its reduce-scatter");
  return p;
}

}  // namespace paraplan
