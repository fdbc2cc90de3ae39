#include "costmodel/activations.hpp"

#include <algorithm>
#include <cmath>

namespace paraplan {

std::int64_t tensor_bytes(const SavedTensor& t, const ActShape& a) {
  if (!saved_under(t, a)) return 0;
  const std::int64_t elems = a.s * a.b * (t.width + t.quad_heads * a.s) * (t.per_etp ? a.etp : 1);
  // Per-layer elements: not sized by the tokens (nor by the expert load).
  const std::int64_t fixed = t.fixed / (t.per_local_expert ? a.ep : 1);
  // FP8: Transformer Engine's Linear saves the FP8 cast of its input, column-
  // wise data only (NVIDIA/TransformerEngine@d0067d0d
  // transformer_engine/pytorch/module/linear.py:600-621), 1 byte per element.
  const std::int64_t per_elem = a.fp8 && t.linear_input ? 1
                                : t.kind == ElemKind::kAct ? a.act_bytes
                                : t.kind == ElemKind::kMask ? 1
                                : t.kind == ElemKind::kIndex ? 8
                                                            : 4;  // fp32, int32
  const bool split = t.shard == Shard::kTp || (t.shard == Shard::kSp && a.sp);
  // Exact: heads, kv heads and ffn divide tp; with SP the sequence does.
  const std::int64_t b = split ? elems * per_elem / a.tp : elems * per_elem;
  return (t.expert_rows ? at_expert_load(b, a) : b) + fixed * per_elem;
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

namespace {
void add_dense_mlp(TensorList* l, const Model& m, const ActivationVariant& v);
void add_moe_mlp(TensorList* l, const Model& m);
void add_torchtitan_moe_mlp(TensorList* l, const Model& m);
void add_deepspeed_moe_mlp(TensorList* l, const Model& m);
}  // namespace

TensorList layer_saved_tensors(const Model& m, bool flash, const ActivationVariant& v, LayerKind kind) {
  const std::int64_t h = m.hidden_size, q = m.q_width(), kv = m.kv_width(),
                     heads = m.num_attention_heads;
  const bool attn_drop = m.attention_dropout > 0, hid_drop = m.hidden_dropout > 0;
  TensorList l;
  // Attention block (pre-norm).
  const std::int64_t stats = m.normalization == Normalization::kRmsNorm ? 1 : 2;  // rstd (+ mean)
  add_norm_inputs(&l, "attn_norm", m, v);
  if (v.norm_saves_stats) l.add({"attn_norm", "fp32 statistics", stats, 0, ElemKind::kFp32, Shard::kSp, false});
  // Under DTensor SP the column-parallel linears save the gathered input.
  const Shard linear_in = v.sp_saves_gathered_linear_inputs ? Shard::kNone : Shard::kSp;
  l.add({"qkv_linear", "input (norm output)", h, 0, ElemKind::kAct, linear_in, false, true});
  // Q, K and V widths per token: GQA narrows K and V to the kv heads;
  // multi-latent attention (below) gives Q and K qk_nope + qk_rope per head
  // and V v_head_dim.
  std::int64_t qw = q, kw = kv, vw = kv, ow = q;
  if (m.mla()) {
    // Multi-latent attention (Megatron-LM@d98e8a64 megatron/core/transformer/
    // multi_latent_attention.py:526-616, 638-663): the down projections are
    // replicated over tp ('duplicated') and run on the rank's s/tp tokens;
    // their outputs pass a norm each and the column-parallel up projections
    // (which save their sequence-sharded input, as SP linears do).
    if (m.q_lora_rank > 0) {
      l.add({"q_layernorm", "input", m.q_lora_rank, 0, ElemKind::kAct, Shard::kSp, false});
      l.add({"q_up_proj", "input (normed q latent)", m.q_lora_rank, 0, ElemKind::kAct, Shard::kSp, false, true});
    }
    l.add({"kv_layernorm", "input", m.kv_lora_rank, 0, ElemKind::kAct, Shard::kSp, false});
    l.add({"kv_up_proj", "input (normed kv latent)", m.kv_lora_rank, 0, ElemKind::kAct, Shard::kSp, false, true});
    qw = kw = heads * (m.qk_nope_head_dim + m.qk_rope_head_dim);
    vw = ow = heads * m.v_head_dim;
  }
  if (flash) {
    // Flash attention saves Q, K, V, its output (counted as out_proj's input)
    // and the fp32 log-sum-exp per head and token (Dao et al. 2022).
    l.add({"flash_attention", "Q", qw, 0, ElemKind::kAct, Shard::kTp, false});
    l.add({"flash_attention", "K", kw, 0, ElemKind::kAct, Shard::kTp, false});
    l.add({"flash_attention", "V", vw, 0, ElemKind::kAct, Shard::kTp, false});
    // MHA: Q is a view of the contiguous [3, b, s, a, d] copy, which stays
    // whole, and K, V live in a second, concatenated copy.
    if (v.mha_keeps_qkv_copy && m.num_kv_heads == m.num_attention_heads && !m.mla())
      l.add({"qkv_copy", "K, V slots of the [3,b,s,a,d] copy", 2 * kv, 0, ElemKind::kAct, Shard::kTp, false});
    // Flash attention's core saves nothing quadratic, so selective
    // recomputation has nothing to drop: the log-sum-exp stays (Korthikanti
    // et al. §5 recompute the s×s tensors flash never stores).
    l.add({"flash_attention", "log-sum-exp", heads, 0, ElemKind::kFp32, Shard::kTp, false});
  } else {
    l.add({"q_kt", "Q", qw, 0, ElemKind::kAct, Shard::kTp, false});
    l.add({"q_kt", "K", kw, 0, ElemKind::kAct, Shard::kTp, false});
    // The softmax output is saved by softmax's backward and, without dropout,
    // is also the input attention-over-values saves: one tensor.
    l.add({"softmax", "output", 0, heads, ElemKind::kAct, Shard::kTp, true});
    if (attn_drop) {
      l.add({"attention_dropout", "mask", 0, heads, ElemKind::kMask, Shard::kTp, true});
      l.add({"attention_dropout", "output", 0, heads, ElemKind::kAct, Shard::kTp, true});
    }
    l.add({"attn_v", "V", vw, 0, ElemKind::kAct, Shard::kTp, false});
  }
  l.add({"out_proj", "input (attention output)", ow, 0, ElemKind::kAct, Shard::kTp, false, true});
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
  if (kind == LayerKind::kMoe) {
    if (v.moe == MoeImpl::kTorchtitan) add_torchtitan_moe_mlp(&l, m);
    else if (v.moe == MoeImpl::kDeepSpeed) add_deepspeed_moe_mlp(&l, m);
    else add_moe_mlp(&l, m);
  } else {
    add_dense_mlp(&l, m, v);
  }
  if (m.post_norms) {
    add_norm_inputs(&l, "post_mlp_norm", m, v);
    if (v.norm_saves_stats) l.add({"post_mlp_norm", "fp32 statistics", stats, 0, ElemKind::kFp32, Shard::kSp, false});
  }
  if (hid_drop) l.add({"mlp_residual_dropout", "mask", h, 0, ElemKind::kMask, Shard::kSp, false});
  return l;
}

namespace {
void add_dense_mlp(TensorList* lp, const Model& m, const ActivationVariant& v) {
  TensorList& l = *lp;
  const std::int64_t h = m.hidden_size;
  // Under DTensor SP the column-parallel linears save the gathered input.
  const Shard linear_in = v.sp_saves_gathered_linear_inputs ? Shard::kNone : Shard::kSp;
  l.add({"fc1", "input (norm output)", h, 0, ElemKind::kAct, linear_in, false, true});
  const char* act = activation_name(m.activation);
  // Squared ReLU runs as relu then a square, unfused (NVIDIA/Megatron-LM@d98e8a64 megatron/core/activations.py:9-11
  // torch.pow(F.relu(x), 2); transformers activations.py ReLUSquaredActivation: relu, then torch.square): relu keeps
  // its output for its backward and the square keeps its input, the same tensor; fc1's output is not kept. As many
  // bytes as GeLU's kept input.
  l.add({act, m.activation == Activation::kRelu2 ? "relu output (kept by relu and the square)" : "input",
         m.ffn_in_width(), 0, ElemKind::kAct, Shard::kTp, false});
  // An unfused gated MLP's multiply saves the activation's output (SiLU or
  // GeLU): act_fn(gate_proj(x)) * up_proj(x) (transformers@9a80143c
  // modeling_gemma2.py Gemma2MLP.forward; LlamaMLP the same with SiLU).
  if (v.swiglu_saves_silu_output && m.gated())
    l.add({act, "activation output (unfused multiply)", m.ffn_hidden_size, 0, ElemKind::kAct, Shard::kTp, false});
  l.add({"fc2", "input (activation output)", m.ffn_hidden_size, 0, ElemKind::kAct, Shard::kTp,
         false, true});
}

// A mixture-of-experts MLP as Megatron-core runs it with the all-to-all token
// dispatcher and grouped experts (NVIDIA/Megatron-LM@d98e8a64
// megatron/core/transformer/moe/), per token of the rank's s/tp (SP) share,
// top-k routing, dropless and balanced (each expert rank receives the tokens
// it sends on average):
//  * router.py:106-111: the gating GEMM saves its input, the MLP norm's
//    output, which the shared experts' fc1 reads too (one tensor); the scores
//    (softmax or sigmoid output, fp32: moe_router_dtype fp32), the aux loss's
//    scores (fp32) and the routing map (bool), num_experts wide;
//  * token_dispatcher.py:660-679 (permute: index_select, its backward needs
//    the int64 row indices only), :705-710 (all-to-all over ep), :745-751
//    (all-gather over etp): an expert rank's grouped fc1 saves k x etp token
//    rows of h (experts.py:928-931);
//  * experts.py:943-985: the fused weighted SwiGLU saves fc1's output (2 x
//    moe_ffn / etp per received row = k x 2·moe_ffn per token) and the
//    permuted fp32 probabilities; fc2 saves its input (k x moe_ffn);
//  * token_dispatcher.py:796-900: the combine (reduce-scatter over etp,
//    all-to-all back, unpermute's scatter-add) saves nothing but indices;
//  * shared_experts.py: a tensor-parallel MLP of num_shared_experts x moe_ffn.
void add_moe_mlp(TensorList* lp, const Model& m) {
  TensorList& l = *lp;
  const std::int64_t h = m.hidden_size, k = m.experts_per_token, e = m.num_experts, f = m.moe_ffn_hidden_size;
  const std::int64_t fin = m.gated() ? 2 * f : f;
  l.add({"router", "input (norm output; also the shared experts' fc1 input)", h, 0, ElemKind::kAct, Shard::kSp, false, true});
  l.add({"router", "scores (fp32)", e, 0, ElemKind::kFp32, Shard::kSp, false});
  l.add({"router", "aux-loss scores (fp32)", e, 0, ElemKind::kFp32, Shard::kSp, false});
  l.add({"router", "routing map", e, 0, ElemKind::kMask, Shard::kSp, false});
  l.add({"permute", "row indices (top-k)", k, 0, ElemKind::kIndex, Shard::kSp, false});
  l.add({"experts_fc1", "input (dispatched tokens, top-k x etp)", k * h, 0, ElemKind::kAct, Shard::kSp, false, true, true, true});
  l.add({"experts_act", "input (fc1 output, top-k)", k * fin, 0, ElemKind::kAct, Shard::kSp, false, false, false, true});
  l.add({"experts_act", "permuted probabilities (fp32, top-k x etp)", k, 0, ElemKind::kFp32, Shard::kSp, false, false, true,
         true});
  l.add({"experts_fc2", "input (activation output, top-k)", k * f, 0, ElemKind::kAct, Shard::kSp, false, true, false, true});
  if (m.num_shared_experts > 0) {
    const std::int64_t fs = std::int64_t(m.num_shared_experts) * f;
    l.add({"shared_act", "input (shared experts' fc1 output)", m.gated() ? 2 * fs : fs, 0, ElemKind::kAct, Shard::kTp, false});
    l.add({"shared_fc2", "input (activation output)", fs, 0, ElemKind::kAct, Shard::kTp, false, true});
  }
}

// A router whose linear runs in fp32 on fp32 casts of its input and weight
// (torchtitan's autocast, DeepSpeed's .float()): F.linear saves both casts,
// h per token and num_experts x h per layer.
void add_fp32_gate(TensorList* l, const Model& m, const char* op) {
  l->add({op, "input (fp32 copy)", m.hidden_size, 0, ElemKind::kFp32, Shard::kSp, false});
  SavedTensor w{op, "gate weight (fp32 copy)", 0, 0, ElemKind::kFp32, Shard::kNone, false};
  w.fixed = std::int64_t(m.num_experts) * m.hidden_size;
  l->add(w);
}

// A mixture-of-experts MLP as torchtitan runs it (pytorch/torchtitan@b5bcd76c
// torchtitan/models/common/), per token of the rank (tp = 1), T tokens, N = k·T
// routed copies, R = the copies the rank's experts receive (N at balance):
//  * moe.py:290-292: the gate runs under fp32 autocast, so F.linear saves fp32
//    casts of its input (h per token) and of the gate weight (num_experts x h,
//    per layer); :296-299 sigmoid / softmax save their fp32 output (E);
//    :311-317 topk and gather save the int64 expert ids (k; one tensor);
//  * token_dispatcher.py:93-100: the argsort permutation indexes the scores (k
//    int64 saved) and, divided by k, the tokens (k int64: x[indices] saves the
//    indices; the scatter_add in combine saves the same tensor, expanded);
//    with ep > 1, :541-559 permute to expert-major order (R int64, saved by the
//    index and by the unpermute's index_put);
//  * moe.py:94-108: torch._grouped_mm saves both operands (pytorch
//    tools/autograd/derivatives.yaml _grouped_mm) and the int32 group offsets
//    (the rank's num_experts / ep); the routed rows' h (x_RD, read by w1 and
//    w3), w1's output (SiLU's input), SiLU's output and w3's output (the
//    multiply's), their product (w2's input): h + 4 x moe_ffn per row;
//  * token_dispatcher.py:614-619: the combine multiplies an fp32 copy of the
//    expert output by the sorted scores, keeping both (h fp32 + 1 fp32 per
//    copy of the rank's own N rows);
//  * feed_forward.py:53-54: shared experts w2(silu(w1(x)) * w3(x)) keep the
//    norm output x (only they read it in bf16), w1's, SiLU's and w3's outputs
//    and the product; :73-75 a sigmoid gate on their output (Qwen2-MoE's
//    shared_expert_gate) keeps the sigmoid's output and the experts' output.
void add_torchtitan_moe_mlp(TensorList* lp, const Model& m) {
  TensorList& l = *lp;
  const std::int64_t h = m.hidden_size, k = m.experts_per_token, e = m.num_experts, f = m.moe_ffn_hidden_size;
  add_fp32_gate(&l, m, "router");
  l.add({"router", "scores (sigmoid / softmax output, fp32)", e, 0, ElemKind::kFp32, Shard::kSp, false});
  l.add({"router", "top-k expert ids (topk, gather)", k, 0, ElemKind::kIndex, Shard::kSp, false});
  l.add({"reorder", "argsort permutation (the scores' index)", k, 0, ElemKind::kIndex, Shard::kSp, false});
  l.add({"reorder", "token indices (x[...] and scatter_add's index)", k, 0, ElemKind::kIndex, Shard::kSp, false});
  SavedTensor permute{"ep_permute", "expert-major indices (ep > 1)", k, 0, ElemKind::kIndex, Shard::kSp, false};
  permute.expert_rows = permute.ep_only = true;
  l.add(permute);
  SavedTensor offsets{"grouped_mm", "group offsets (int32, local experts)", 0, 0, ElemKind::kInt32, Shard::kNone, false};
  offsets.fixed = e;
  offsets.per_local_expert = true;
  l.add(offsets);
  auto rows = [&](const char* op, const char* what, std::int64_t width, bool linear) {
    SavedTensor t{op, what, k * width, 0, ElemKind::kAct, Shard::kSp, false, linear};
    t.expert_rows = true;
    l.add(t);
  };
  rows("experts_w1_w3", "input (routed tokens, top-k)", h, true);
  rows("experts_silu", "input (w1 output)", f, false);
  rows("experts_mul", "SiLU output", f, false);
  rows("experts_mul", "w3 output", f, false);
  rows("experts_w2", "input (SwiGLU product)", f, true);
  l.add({"combine", "expert output (fp32 copy, top-k)", k * h, 0, ElemKind::kFp32, Shard::kSp, false});
  l.add({"combine", "sorted scores (fp32, top-k)", k, 0, ElemKind::kFp32, Shard::kSp, false});
  if (m.num_shared_experts > 0) {
    const std::int64_t fs = std::int64_t(m.num_shared_experts) * f;
    l.add({"shared_w1_w3", "input (norm output)", h, 0, ElemKind::kAct, Shard::kSp, false, true});
    l.add({"shared_silu", "input (w1 output)", fs, 0, ElemKind::kAct, Shard::kTp, false});
    l.add({"shared_mul", "SiLU output", fs, 0, ElemKind::kAct, Shard::kTp, false});
    l.add({"shared_mul", "w3 output", fs, 0, ElemKind::kAct, Shard::kTp, false});
    l.add({"shared_w2", "input (SwiGLU product)", fs, 0, ElemKind::kAct, Shard::kTp, false, true});
    // SigmoidGatedFeedForward (feed_forward.py:73-75): sigmoid(gate(x)) * ffn(x)
    // keeps the sigmoid's output (one per token) and the experts' output.
    if (m.shared_expert_gate) {
      l.add({"shared_gate", "sigmoid output", 1, 0, ElemKind::kAct, Shard::kSp, false});
      l.add({"shared_gate", "shared experts' output (multiply input)", h, 0, ElemKind::kAct, Shard::kSp, false});
    }
  }
}

// A mixture-of-experts MLP as DeepSpeed-MoE runs it (deepspeedai/DeepSpeed@edaa7221
// deepspeed/moe/sharded_moe.py; tp = 1, etp = 1, top-k >= 2), per token of the
// rank, T tokens, the k routed copies padded to the experts' capacity (R = E x C
// rows = T x k x the load: the capacity factor, or the busiest expert's share
// when dropless):
//  * TopKGate.forward :587-591: F.linear saves fp32 copies of the input (h per
//    token) and of the gate weight (num_experts x h per layer);
//  * top2gating (k = 2) :341-431: softmax saves its fp32 output (E); the
//    einsums "se,se->s" their fp32 one-hot masks (2 x E); the clamp its input
//    and the in-place divisions the denominator and both normalised gates
//    (4 fp32); the aux loss's product its fp32 per-expert fractions (E per
//    layer). The masked_fill over the noisy logits and, in topkgating, the
//    capacity topk feed only argmax / indices: their nodes (and what they
//    saved) are freed at once;
//  * topkgating (k > 2) :434-525: softmax's output (E), topk's int64 indices
//    (k; the gathers share them), gates x mask its bool mask (E), the clamp
//    its input, the division both operands and the gather the normalised
//    gates (pytorch derivatives.yaml: gather_backward(grad, self, ...)): 2 +
//    2 x E fp32; the aux loss's fractions (E per layer);
//  * _sparse_encode :207-220: index_select saves the int64 source of every
//    slot (R + 1); experts.py:27-37 runs each local expert on its slice of the
//    dispatched rows: an HF-style expert (w2(act(w1 x) * w3 x), or fc2(act(fc1
//    x))) saves its input (h per row; with ep > 1 and several local experts the
//    slice is strided and each linear that reads it saves its own contiguous
//    copy), w1's output, the activation's output, w3's output and the product
//    (gated), or fc1's output and the activation's (not gated);
//  * _sparse_decode :223-232: index_select saves its int64 slots (k per
//    token), the fp32 gate multiply the routed rows (k x h per token, the
//    activation dtype) and the gates (k fp32).
void add_deepspeed_moe_mlp(TensorList* lp, const Model& m) {
  TensorList& l = *lp;
  const std::int64_t h = m.hidden_size, k = m.experts_per_token, e = m.num_experts, f = m.moe_ffn_hidden_size;
  add_fp32_gate(&l, m, "gate");
  l.add({"gate", "softmax output (fp32)", e, 0, ElemKind::kFp32, Shard::kSp, false});
  SavedTensor aux{"gate", "aux-loss expert fractions (fp32)", 0, 0, ElemKind::kFp32, Shard::kNone, false};
  aux.fixed = e;
  l.add(aux);
  if (k == 2) {
    l.add({"top2gating", "one-hot masks (fp32, 2 einsums)", 2 * e, 0, ElemKind::kFp32, Shard::kSp, false});
    l.add({"top2gating", "gate sum, denominator and the two normalised gates (fp32)", 4, 0, ElemKind::kFp32, Shard::kSp, false});
  } else {
    l.add({"topkgating", "top-k indices", k, 0, ElemKind::kIndex, Shard::kSp, false});
    l.add({"topkgating", "routing mask", e, 0, ElemKind::kMask, Shard::kSp, false});
    l.add({"topkgating", "gate sum, denominator, masked gates and their normalised copy (fp32)", 2 + 2 * e, 0,
           ElemKind::kFp32, Shard::kSp, false});
  }
  SavedTensor source{"sparse_encode", "slot sources (int64)", k, 0, ElemKind::kIndex, Shard::kSp, false};
  source.expert_rows = true;
  source.fixed = 1;  // the scratch slot
  l.add(source);
  const bool gated = m.gated();
  auto rows = [&](const char* op, const char* what, std::int64_t width, bool linear) {
    SavedTensor t{op, what, k * width, 0, ElemKind::kAct, Shard::kSp, false, linear};
    t.expert_rows = true;
    return t;
  };
  l.add(rows(gated ? "expert_w1_w3" : "expert_fc1", "input (dispatched rows)", h, true));
  if (gated) {
    SavedTensor copy = rows("expert_w3", "input (its own contiguous copy of a strided slice)", h, true);
    copy.strided_only = true;
    l.add(copy);
  }
  l.add(rows("expert_act", gated ? "input (w1 output)" : "input (fc1 output)", f, false));
  if (gated) {
    l.add(rows("expert_mul", "activation output", f, false));
    l.add(rows("expert_mul", "w3 output", f, false));
  }
  l.add(rows(gated ? "expert_w2" : "expert_fc2", gated ? "input (product)" : "input (activation output)", f, true));
  l.add({"sparse_decode", "slots (int64)", k, 0, ElemKind::kIndex, Shard::kSp, false});
  l.add({"sparse_decode", "routed rows (gate multiply)", k * h, 0, ElemKind::kAct, Shard::kSp, false});
  l.add({"sparse_decode", "gates (fp32)", k, 0, ElemKind::kFp32, Shard::kSp, false});
}
}  // namespace

TensorList op_sac_saved_tensors(const Model& m, bool flash) {
  // pytorch/torchtitan@9dec370 torchtitan/parallelisms/parallelize_llama.py:214-285 (the policy
  // torchtitan's published Llama 3.1 benchmarks ran; b5bcd76c keeps the every-second-mm rule,
  // torchtitan/distributed/activation_checkpoint.py:243-273, with a wider save set of PyTorch's
  // compute-intensive ops, not checked op by op here): MUST_SAVE the outputs of aten.mm, SDPA (flash or efficient) and a few
  // others, except every second mm of the block (a per-checkpoint count: 1st, 3rd, 5th, 7th are
  // kept); PREFER_RECOMPUTE the rest. A Llama block runs its linears as wq, wk, wv, wo
  // (torchtitan/models/llama/model.py Attention.forward), then w1, w3, w2 (FeedForward:
  // w2(F.silu(w1(x)) * w3(x))); a non-gated MLP w1, w2. The checkpoint keeps the block input.
  TensorList l;
  const std::int64_t h = m.hidden_size, q = m.q_width(), kv = m.kv_width(), f = m.ffn_hidden_size;
  l.add({"checkpoint", "block input", h, 0, ElemKind::kAct, Shard::kSp, false});
  struct Mm {
    const char* op;
    std::int64_t width;
    Shard shard;
  };
  const Mm attn[] = {{"wq", q, Shard::kTp}, {"wk", kv, Shard::kTp}, {"wv", kv, Shard::kTp}, {"wo", h, Shard::kNone}};
  const Mm gated[] = {{"w1", f, Shard::kTp}, {"w3", f, Shard::kTp}, {"w2", h, Shard::kNone}};
  const Mm plain[] = {{"w1", f, Shard::kTp}, {"w2", h, Shard::kNone}};
  int count = 0;
  auto mm = [&](const Mm& x) {
    if (++count % 2 == 1) l.add({x.op, "mm output (kept: an odd mm)", x.width, 0, ElemKind::kAct, x.shard, false});
  };
  for (const Mm& x : attn) mm(x);
  if (flash) {
    // _scaled_dot_product_flash_attention's outputs: the attention output and the fp32 log-sum-exp per head.
    l.add({"sdpa", "output", q, 0, ElemKind::kAct, Shard::kTp, false});
    l.add({"sdpa", "log-sum-exp (fp32)", m.num_attention_heads, 0, ElemKind::kFp32, Shard::kTp, false});
  }
  if (m.gated())
    for (const Mm& x : gated) mm(x);
  else
    for (const Mm& x : plain) mm(x);
  return l;
}

TensorList embedding_saved_tensors(const Model& m) {
  TensorList l;
  if (m.hidden_dropout > 0)
    l.add({"embedding_dropout", "mask", m.hidden_size, 0, ElemKind::kMask, Shard::kSp, false});
  return l;
}

TensorList output_saved_tensors(const Model& m, const ActivationVariant& v) {
  TensorList l;
  l.add({"final_norm", "input", m.hidden_size, 0, ElemKind::kAct, Shard::kSp, false});
  l.add({"output_linear", "input (norm output)", m.hidden_size, 0, ElemKind::kAct,
         v.sp_saves_gathered_linear_inputs ? Shard::kNone : Shard::kSp, false});
  // Vocab-parallel cross-entropy keeps the fp32 softmax of its logit shard.
  // The vocabulary is padded up to a multiple of tp; callers pass the padded width.
  return l;
}

std::int64_t layer_activation_bytes(const Model& m, bool flash, Recompute r, const ActShape& a,
                                    const ActivationVariant& v, LayerKind kind) {
  if (r == Recompute::kFull) {
    const SavedTensor input{"layer", "input", m.hidden_size, 0, ElemKind::kAct, Shard::kSp, false};
    return tensor_bytes(input, a);
  }
  std::int64_t sum = 0;
  if (r == Recompute::kSelective && v.op_sac) {
    for (const SavedTensor& t : op_sac_saved_tensors(m, flash)) sum += tensor_bytes(t, a);
    return sum;
  }
  for (const SavedTensor& t : layer_saved_tensors(m, flash, v, kind))
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
                                  const ActivationVariant& v, LayerKind kind) {
  if (r == Recompute::kFull) {
    const SavedTensor input{"layer", "input", m.hidden_size, 0, ElemKind::kAct, Shard::kSp, false};
    return segment_slack(tensor_bytes(input, a));
  }
  std::int64_t sum = 0;
  if (r == Recompute::kSelective && v.op_sac) {
    for (const SavedTensor& t : op_sac_saved_tensors(m, flash)) sum += segment_slack(tensor_bytes(t, a));
    return sum;
  }
  for (const SavedTensor& t : layer_saved_tensors(m, flash, v, kind))
    if (!(r == Recompute::kSelective && t.core_attention)) sum += segment_slack(tensor_bytes(t, a));
  return sum;
}

LayerActivationSummary layer_activation_summary(const Model& m, bool flash, const ActShape& a,
                                                const ActivationVariant& v, LayerKind kind) {
  LayerActivationSummary r;
  for (const SavedTensor& t : layer_saved_tensors(m, flash, v, kind)) {
    const std::int64_t b = tensor_bytes(t, a), slack = segment_slack(b);
    r.none += b, r.slack_none += slack;
    if (!t.core_attention && !v.op_sac) r.selective += b, r.slack_selective += slack;
  }
  if (v.op_sac)
    for (const SavedTensor& t : op_sac_saved_tensors(m, flash)) {
      const std::int64_t b = tensor_bytes(t, a);
      r.selective += b, r.slack_selective += segment_slack(b);
    }
  const SavedTensor input{"layer", "input", m.hidden_size, 0, ElemKind::kAct, Shard::kSp, false};
  r.input = tensor_bytes(input, a);
  r.slack_input = segment_slack(r.input);
  return r;
}

TransientPeak layer_transient_peak(const Model& m, bool flash, Recompute r, const ActShape& a,
                                   const ActivationVariant& v, LayerKind kind) {
  const std::int64_t none = layer_activation_bytes(m, flash, Recompute::kNone, a, v, kind);
  const std::int64_t core = none - layer_activation_bytes(m, flash, Recompute::kSelective, a, v, kind);
  return layer_transient_peak(m, flash, r, a, none, core, kind, v.moe);
}

TransientPeak layer_transient_peak(const Model& m, bool flash, Recompute r, const ActShape& a, std::int64_t none,
                                   std::int64_t core, LayerKind kind, MoeImpl moe) {
  const std::int64_t sb = a.s * a.b, tp = a.tp, e = a.act_bytes;
  const std::int64_t X = sb * m.hidden_size * e / (a.sp ? tp : 1);  // hidden state, sequence-sharded with SP
  const std::int64_t H = sb * m.hidden_size * e;                    // full hidden state (row-parallel partial sum)
  const std::int64_t U = sb * m.ffn_in_width() * e / tp, G = sb * m.ffn_hidden_size * e / tp;
  // Attention output and Q|K|V widths (multi-latent: qk_nope + qk_rope for Q and K, v_head_dim for V).
  const std::int64_t qw = m.mla() ? std::int64_t(m.num_attention_heads) * (m.qk_nope_head_dim + m.qk_rope_head_dim) : m.q_width();
  const std::int64_t vw = m.mla() ? std::int64_t(m.num_attention_heads) * m.v_head_dim : m.q_width();
  const std::int64_t kvw = m.mla() ? qw + vw : 2 * m.kv_width();
  const std::int64_t C = sb * vw * e / tp, Q = sb * (qw + kvw) * e / tp;
  const std::int64_t D = m.hidden_dropout > 0 ? sb * m.hidden_size / (a.sp ? tp : 1) : 0;  // 1-byte mask
  const std::int64_t RS = a.sp ? X : 0;  // a reduce-scatter's output, alive with its input
  const std::int64_t DX = m.hidden_dropout > 0 ? X : 0;  // gradient through a residual dropout
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
  if (kind == LayerKind::kMoe) {
    // The expert MLP (token_dispatcher.py:796-900, experts.py): P = the
    // rank's k token copies of h, Pg = P x etp after the etp all-gather.
    // Forward: the experts' fc2 output Pg, with etp > 1 its fp32 copy and the
    // fp32 reduce-scatter output (token_dispatcher.py:829-833), then the
    // all-to-all back beside it. Backward: the gradients the other way, with
    // the experts' fc2-input (Gk) and fc1-output (Uk) gradients.
    const std::int64_t k = m.experts_per_token, f = m.moe_ffn_hidden_size, fin = m.gated() ? 2 * f : f;
    const std::int64_t rows = sb * k / (a.sp ? tp : 1);  // the rank's dispatched token copies
    // What the busiest expert rank receives: x expert_load (its sent copies, P, stay the mean).
    auto load = [&](std::int64_t x) { return at_expert_load(x, a); };
    const std::int64_t P = rows * m.hidden_size * e, Pg = load(P * a.etp);
    const std::int64_t Gk = load(rows * f * e), Uk = load(rows * fin * e);
    if (moe == MoeImpl::kTorchtitan) {
      // torchtitan's combine (token_dispatcher.py:614-619; etp = 1): the expert
      // output Pg (still referenced by RoutedExperts.forward), the combine's
      // input P (the all-to-all output with ep > 1, the same tensor without),
      // the fp32 score product 2P and its cast back P; the fp32 copy of the
      // output is saved (counted above). Backward: the cast's fp32 gradient and
      // the multiply's fp32 input gradient, 2P each.
      at(dres_if_recompute + R + Pg + (a.ep > 1 ? P : 0) + 2 * P + P,
         "forward: expert output, the combine's fp32 score product and its cast");
      at(base + 4 * P, "backward: the combine's fp32 product gradient and its input gradient");
    } else if (moe == MoeImpl::kDeepSpeed) {
      // DeepSpeed's _sparse_decode (sharded_moe.py:223-232; etp = 1): the
      // expert output Pg (MOELayer.forward still holds it) and its padded
      // copy (torch.cat), the gathered rows P (saved, counted above), their
      // fp32 product with the gates 2P and its fp32 sum over the routes 2X.
      // Backward: the sum's fp32 gradient 2X, the product's fp32 gradient 2P
      // and its cast P, and the index_select's gradient into the padded
      // expert output Pg.
      at(dres_if_recompute + R + 2 * Pg + 2 * P + 2 * X, "forward: expert output, its padded copy, the fp32 gate product and its sum");
      at(base + 2 * X + 3 * P + Pg, "backward: the gate product's fp32 gradients and the padded expert-output gradient");
    } else if (a.etp > 1) {
      at(dres_if_recompute + R + Pg + 2 * Pg + 2 * P, "forward: expert output, its fp32 copy and the reduce-scatter output");
    } else {
      at(dres_if_recompute + R + 2 * P, "forward: expert output and the combine all-to-all output");
    }
    at(base + 2 * P + Pg, "backward: residual grad + combine gradients (all-to-all, all-gather)");
    at(base + Pg + Gk, "backward: residual grad + expert output grad + fc2-input grad");
    at(base + Gk + Uk, "backward: residual grad + expert fc2-input grad + fc1-output grad");
    at(base + Uk + Pg, "backward: residual grad + expert fc1-output grad + dispatched-token grad");
    at(base + Pg + P + H, "backward: residual grad + dispatch gradients + MLP-norm-output grad");
  } else {
    at(base + DX + G, "backward: residual grad + MLP output grad + fc2-input grad");
    at(base + G + U, "backward: residual grad + fc2-input grad + fc1-output grad");
    at(base + U + H, "backward: residual grad + fc1-output grad + MLP-norm-output grad");
  }
  at(base + H + RS, "backward: residual grad + MLP-norm-output grad and its reduce-scatter");
  const std::int64_t recore = r == Recompute::kSelective && !flash ? core : 0;
  at(base + DX + C, "backward: residual grad + attention output grad + context grad");
  at(base + C + recore + Q + scratch, "backward: residual grad + context grad + recomputed core + QKV grad + scratch");
  at(base + Q + H, "backward: residual grad + QKV grad + attention-norm-output grad");
  at(base + H + RS, "backward: residual grad + attention-norm-output grad and its reduce-scatter");
  return p;
}

}  // namespace paraplan
