#include "costmodel/activations.hpp"

#include <algorithm>

namespace paraplan {

std::int64_t tensor_bytes(const SavedTensor& t, const ActShape& a) {
  const std::int64_t elems = a.s * a.b * (t.width + t.quad_heads * a.s);
  const std::int64_t per_elem = t.kind == ElemKind::kAct ? a.act_bytes : t.kind == ElemKind::kMask ? 1 : 4;
  const bool split = t.shard == Shard::kTp || (t.shard == Shard::kSp && a.sp);
  // Exact: heads, kv heads and ffn divide tp; with SP the sequence does.
  return split ? elems * per_elem / a.tp : elems * per_elem;
}

TensorList layer_saved_tensors(const Model& m, bool flash) {
  const std::int64_t h = m.hidden_size, q = m.q_width(), kv = m.kv_width(),
                     heads = m.num_attention_heads;
  const bool attn_drop = m.attention_dropout > 0, hid_drop = m.hidden_dropout > 0;
  TensorList l;
  // Attention block (pre-norm).
  l.add({"attn_norm", "input", h, 0, ElemKind::kAct, Shard::kSp, false});
  l.add({"qkv_linear", "input (norm output)", h, 0, ElemKind::kAct, Shard::kSp, false});
  if (flash) {
    // Flash attention saves Q, K, V, its output (counted as out_proj's input)
    // and the fp32 log-sum-exp per head and token (Dao et al. 2022).
    l.add({"flash_attention", "Q", q, 0, ElemKind::kAct, Shard::kTp, false});
    l.add({"flash_attention", "K", kv, 0, ElemKind::kAct, Shard::kTp, false});
    l.add({"flash_attention", "V", kv, 0, ElemKind::kAct, Shard::kTp, false});
    l.add({"flash_attention", "log-sum-exp", heads, 0, ElemKind::kFp32, Shard::kTp, true});
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
  l.add({"out_proj", "input (attention output)", q, 0, ElemKind::kAct, Shard::kTp, false});
  if (hid_drop) l.add({"attn_residual_dropout", "mask", h, 0, ElemKind::kMask, Shard::kSp, false});
  // MLP block.
  l.add({"mlp_norm", "input", h, 0, ElemKind::kAct, Shard::kSp, false});
  l.add({"fc1", "input (norm output)", h, 0, ElemKind::kAct, Shard::kSp, false});
  l.add({m.activation == Activation::kSwiglu ? "swiglu" : "gelu", "input", m.ffn_in_width(), 0,
         ElemKind::kAct, Shard::kTp, false});
  l.add({"fc2", "input (activation output)", m.ffn_hidden_size, 0, ElemKind::kAct, Shard::kTp,
         false});
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

std::int64_t layer_activation_bytes(const Model& m, bool flash, Recompute r, const ActShape& a) {
  if (r == Recompute::kFull) {
    const SavedTensor input{"layer", "input", m.hidden_size, 0, ElemKind::kAct, Shard::kSp, false};
    return tensor_bytes(input, a);
  }
  std::int64_t sum = 0;
  for (const SavedTensor& t : layer_saved_tensors(m, flash))
    if (!(r == Recompute::kSelective && t.core_attention)) sum += tensor_bytes(t, a);
  return sum;
}

std::int64_t layer_grad_working_bytes(const Model& m, bool flash, const ActShape& a) {
  // Gradients of the gathered hidden state are full width even with SP.
  std::int64_t widest = a.s * a.b * m.hidden_size;
  widest = std::max(widest, a.s * a.b * m.ffn_in_width() / a.tp);
  if (!flash) widest = std::max(widest, a.s * a.b * m.num_attention_heads * a.s / a.tp);
  return 2 * widest * a.act_bytes;
}

}  // namespace paraplan
