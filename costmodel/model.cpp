#include "costmodel/model.hpp"

#include <algorithm>
#include <cmath>

namespace paraplan {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kBf16: return "bf16";
    case DType::kFp16: return "fp16";
    case DType::kFp32: return "fp32";
  }
  return "?";
}
const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kGelu: return "gelu";
    case Activation::kSwiglu: return "swiglu";
    case Activation::kGeglu: return "geglu";
    case Activation::kRelu2: return "relu2";
  }
  return "?";
}
const char* normalization_name(Normalization n) {
  return n == Normalization::kLayerNorm ? "layernorm" : "rmsnorm";
}
const char* position_embedding_name(PositionEmbedding p) {
  return p == PositionEmbedding::kRope ? "rope" : "learned";
}
const char* optimizer_name(OptimizerKind o) { return o == OptimizerKind::kAdam ? "adam" : "sgd"; }

const char* framework_name(Framework f) {
  switch (f) {
    case Framework::kMegatron: return "megatron";
    case Framework::kDeepSpeed: return "deepspeed";
    case Framework::kFsdp: return "fsdp";
    case Framework::kNanotron: return "nanotron";
    case Framework::kParaplan: return "paraplan";
  }
  return "?";
}

bool parse_framework(const std::string& text, Framework* out) {
  for (int i = 0; i < kNumFrameworks; ++i)
    if (text == framework_name(Framework(i))) {
      *out = Framework(i);
      return true;
    }
  return false;
}

double AttentionTable::at(double s, double d) const {
  auto along_seq = [&](const double* y) {
    if (s <= seq[0]) return y[0];
    for (int i = 1; i < n; ++i)
      if (s <= seq[i]) {
        const double f = std::log(s / seq[i - 1]) / std::log(seq[i] / seq[i - 1]);
        return y[i - 1] + f * (y[i] - y[i - 1]);
      }
    return y[n - 1];
  };
  const double a = along_seq(tflops_hd64), b = along_seq(tflops_hd128);
  const double f = std::clamp((d - 64) / 64, 0.0, 1.0);
  return a + f * (b - a);
}

double default_optimizer_state_bytes(OptimizerKind o, DType precision) {
  const double master = precision == DType::kFp32 ? 0 : 4;  // fp32 master copy of 16-bit weights
  return o == OptimizerKind::kAdam ? master + 8 : master + 4;  // Adam m+v; SGD momentum
}

void set_precision(Training* t, DType p) {
  t->precision = p;
  if (!t->grad_dtype_given) t->grad_dtype = p;
  if (!t->optimizer_state_bytes_given)
    t->optimizer_state_bytes = default_optimizer_state_bytes(t->optimizer, p);
}

std::string no_bf16_reason(const Gpu& g) { return "GPU " + g.name + " has no BF16 (cluster gpu.bf16: false)"; }

namespace {
std::int64_t norm_params(const Model& m) {
  // RMSNorm has a scale; LayerNorm a scale and a bias.
  return (m.normalization == Normalization::kRmsNorm ? 1 : 2) * std::int64_t(m.hidden_size);
}
}  // namespace

std::int64_t linear_layer_weights(const Model& m) {
  const std::int64_t h = m.hidden_size, q = m.q_width(), kv = m.kv_width();
  return h * q + 2 * h * kv + q * h + h * m.ffn_in_width() + std::int64_t(m.ffn_hidden_size) * h;
}

std::int64_t layer_params(const Model& m) {
  const std::int64_t h = m.hidden_size, q = m.q_width(), kv = m.kv_width();
  std::int64_t p = linear_layer_weights(m);
  if (m.has_qkv_bias()) p += q + 2 * kv;
  if (m.qk_norm) p += 2 * std::int64_t(m.head_dim);
  if (m.bias) p += h + m.ffn_in_width() + h;  // out-proj, fc1, fc2 biases
  return p + m.norms_per_layer() * norm_params(m);
}

std::int64_t embedding_params(const Model& m) {
  std::int64_t e = std::int64_t(m.vocab_size) * m.hidden_size;
  if (m.position_embedding == PositionEmbedding::kLearned)
    e += std::int64_t(m.max_position_embeddings) * m.hidden_size;
  return e;
}

std::int64_t output_params(const Model& m) {
  return m.tie_embeddings ? 0 : std::int64_t(m.vocab_size) * m.hidden_size;
}

std::int64_t final_norm_params(const Model& m) { return norm_params(m); }

std::int64_t total_params(const Model& m) {
  if (m.is_moe() || m.mla() || m.hybrid()) return count_params(m).total;
  return m.num_layers * layer_params(m) + embedding_params(m) + output_params(m) +
         final_norm_params(m);
}

// ---- mixtures of experts and multi-latent attention ----
// Module by module as HF transformers builds them: models/mixtral/modeling_mixtral.py
// (MixtralSparseMoeBlock: gate Linear(h, E, bias=False), E experts of w1, w2, w3) and
// models/deepseek_v3/modeling_deepseek_v3.py (DeepseekV3Attention: q_a_proj, q_a_layernorm,
// q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj, no biases;
// DeepseekV3MoE: experts of moe_intermediate_size, shared_experts of
// moe_intermediate_size x n_shared_experts, DeepseekV3TopkRouter weight (E, h)
// and e_score_correction_bias (E)); models/qwen2_moe/modeling_qwen2_moe.py (Qwen2MoeSparseMoeBlock:
// gate Linear(h, E), E experts of moe_intermediate_size, one shared expert of shared_expert_intermediate_size,
// shared_expert_gate Linear(h, 1)); models/qwen3_moe/modeling_qwen3_moe.py (no shared expert; q_norm and
// k_norm RMSNorm(head_dim) in attention).

std::int64_t attention_params(const Model& m) {
  const std::int64_t h = m.hidden_size;
  if (!m.mla()) {
    const std::int64_t q = m.q_width(), kv = m.kv_width();
    std::int64_t p = h * q + 2 * h * kv + q * h;
    if (m.has_qkv_bias()) p += q + 2 * kv;
    if (m.bias) p += h;
    if (m.qk_norm) p += 2 * std::int64_t(m.head_dim);
    return p;
  }
  const std::int64_t heads = m.num_attention_heads, qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
  const std::int64_t q = m.q_lora_rank > 0 ? h * m.q_lora_rank + m.q_lora_rank + std::int64_t(m.q_lora_rank) * heads * qk
                                           : h * heads * qk;
  const std::int64_t kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank +
                          std::int64_t(m.kv_lora_rank) * heads * (m.qk_nope_head_dim + m.v_head_dim);
  return q + kv + heads * m.v_head_dim * h;
}

namespace {
// One gated (or plain) MLP of width f.
std::int64_t mlp_of(const Model& m, std::int64_t f) {
  const std::int64_t h = m.hidden_size;
  std::int64_t p = h * (m.gated() ? 2 * f : f) + f * h;
  if (m.bias) p += (m.gated() ? 2 * f : f) + h;
  return p;
}
}  // namespace

std::int64_t dense_mlp_params(const Model& m) { return mlp_of(m, m.ffn_hidden_size); }

std::int64_t moe_mlp_params(const Model& m) {
  const std::int64_t e = m.num_experts;
  return (e + m.num_shared_experts) * mlp_of(m, m.moe_ffn_hidden_size) + e * m.hidden_size + (m.router_bias ? e : 0) +
         (m.shared_expert_gate ? m.hidden_size : 0);
}

std::int64_t moe_mlp_active_params(const Model& m) {
  return moe_mlp_params(m) - std::int64_t(m.num_experts - m.experts_per_token) * mlp_of(m, m.moe_ffn_hidden_size);
}

std::int64_t mamba_mixer_params(const Model& m) {
  const std::int64_t h = m.hidden_size, inner = std::int64_t(m.mamba_heads) * m.mamba_head_dim;
  const std::int64_t conv_dim = inner + 2 * std::int64_t(m.mamba_groups) * m.mamba_state;
  const std::int64_t in_out = inner + conv_dim + m.mamba_heads;
  std::int64_t p = h * in_out + conv_dim * m.mamba_conv_kernel + 3 * std::int64_t(m.mamba_heads) + inner + inner * h;
  if (m.mamba_conv_bias) p += conv_dim;
  if (m.mamba_proj_bias) p += in_out + h;
  return p;
}

ParamCounts count_params(const Model& m) {
  const std::int64_t norms = m.norms_per_layer() * norm_params(m), attn = attention_params(m);
  ParamCounts c;
  c.total = c.active = embedding_params(m) + output_params(m) + final_norm_params(m);
  if (m.hybrid()) {
    // One block per character, each a pre-norm and its mixer (NemotronHBlock: norm, mixer, residual).
    for (const char ch : m.hybrid_pattern) {
      const std::int64_t n = norm_params(m);
      switch (ch) {
        case 'M': c.total += n + mamba_mixer_params(m), c.active += n + mamba_mixer_params(m); break;
        case '*': c.total += n + attn, c.active += n + attn; break;
        case '-': c.total += n + dense_mlp_params(m), c.active += n + dense_mlp_params(m); break;
        default: c.total += n + moe_mlp_params(m), c.active += n + moe_mlp_active_params(m); break;  // 'E'
      }
    }
    return c;
  }
  for (int i = 0; i < m.num_layers; ++i) {
    const bool moe = m.is_moe_layer(i);
    c.total += attn + norms + (moe ? moe_mlp_params(m) : dense_mlp_params(m));
    c.active += attn + norms + (moe ? moe_mlp_active_params(m) : dense_mlp_params(m));
  }
  // DeepSeek-V3 MTP module (modeling in deepseek-ai/DeepSeek-V3 inference/model.py and the
  // checkpoint's model.layers.61.*): enorm, hnorm, eh_proj (2h -> h), one MoE decoder layer,
  // shared_head.norm; embedding and output head shared with the main model.
  const std::int64_t h = m.hidden_size;
  const std::int64_t layer = attn + norms + (m.is_moe() ? moe_mlp_params(m) : dense_mlp_params(m));
  c.mtp = std::int64_t(m.mtp_layers) * (2 * norm_params(m) + 2 * h * h + layer + norm_params(m));
  return c;
}

}  // namespace paraplan

namespace paraplan {

double approx_params(const Model& m) {
  const double h = m.hidden_size, q = double(m.num_attention_heads) * m.head_dim,
               kv = double(m.num_kv_heads) * m.head_dim, f = m.ffn_hidden_size;
  const double fin = m.gated() ? 2 * f : f;
  double layer = h * (q + 2 * kv) + q * h + h * fin + f * h + 12 * h + q + 2 * kv + fin;
  // Experts (all routed and shared, with the router) and MLA's projections, bounded from above.
  const double fe = m.moe_ffn_hidden_size;
  layer += (double(m.num_experts) + m.num_shared_experts) * (3 * h * fe + 3 * fe + h) + double(m.num_experts) * (h + 1);
  const double heads = m.num_attention_heads, qk = double(m.qk_nope_head_dim) + m.qk_rope_head_dim;
  layer += (h + 1) * m.q_lora_rank + double(m.q_lora_rank) * heads * qk + h * heads * qk +
           (h + 1) * (double(m.kv_lora_rank) + m.qk_rope_head_dim) +
           double(m.kv_lora_rank) * heads * (double(m.qk_nope_head_dim) + m.v_head_dim) + heads * m.v_head_dim * h;
  // A Mamba-2 mixer, bounded from above (mamba_mixer_params).
  const double inner = double(m.mamba_heads) * m.mamba_head_dim, conv = inner + 2.0 * m.mamba_groups * m.mamba_state;
  layer += (h + 1) * (inner + conv + m.mamba_heads) + conv * (m.mamba_conv_kernel + 1) + 3.0 * m.mamba_heads + inner +
           (inner + 1) * h;
  const double emb = double(m.vocab_size) * h * (m.tie_embeddings ? 1 : 2) + double(m.max_position_embeddings) * h;
  return double(m.num_layers + m.mtp_layers) * layer + emb;
}

}  // namespace paraplan
