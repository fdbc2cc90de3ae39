#include "costmodel/flops.hpp"

#include "costmodel/spec.hpp"

#include <string_view>

namespace paraplan {

LayerGemms layer_gemms(const Model& m, double b, double s, int tp, LayerKind kind, int ep, int etp) {
  const double h = m.hidden_size, q = double(m.q_width()), kv = double(m.kv_width());
  const double hd = m.head_dim, heads = m.num_attention_heads, t = tp;
  const double tokens = b * s;
  LayerGemms g;
  if (m.mla()) {
    // Megatron-LM@d98e8a64 multi_latent_attention.py:638-663 (down), :780-880 (up).
    const double qk = double(m.qk_nope_head_dim) + m.qk_rope_head_dim, v = m.v_head_dim;
    if (m.q_lora_rank > 0) {
      g.add({"q_down", 1, tokens / t, double(m.q_lora_rank), h, false});
      g.add({"q_up", 1, tokens, heads * qk / t, double(m.q_lora_rank), false});
    } else {
      g.add({"q_up", 1, tokens, heads * qk / t, h, false});
    }
    g.add({"kv_down", 1, tokens / t, double(m.kv_lora_rank) + m.qk_rope_head_dim, h, false});
    g.add({"kv_up", 1, tokens, heads * (double(m.qk_nope_head_dim) + v) / t, double(m.kv_lora_rank), false});
    g.add({"scores", b * heads / t, s, s, qk, true});
    g.add({"attn_v", b * heads / t, s, v, s, true});
    g.add({"out_proj", 1, tokens, h, heads * v / t, false});
  } else {
    // Q, K and V projections in one GEMM; GQA narrows K and V to kv heads.
    g.add({"qkv", 1, tokens, (q + 2 * kv) / t, h, false});
    // Scores: per (sequence, query head) an s×hd by hd×s product; GQA shares K
    // between query heads but the work is per query head.
    g.add({"scores", b * heads / t, s, s, hd, true});
    // Attention over values: per (sequence, query head) s×s by s×hd.
    g.add({"attn_v", b * heads / t, s, hd, s, true});
    g.add({"out_proj", 1, tokens, h, q / t, false});
  }
  if (kind == LayerKind::kMoe) {
    const double e = m.num_experts, k = m.experts_per_token, f = m.moe_ffn_hidden_size, fin = m.gated() ? 2 * f : f;
    g.add({"router", 1, tokens / t, e, h, false});
    if (m.num_shared_experts > 0) {
      const double fs = double(m.num_shared_experts) * f;
      g.add({"shared_fc1", 1, tokens, (m.gated() ? 2 * fs : fs) / t, h, false});
      g.add({"shared_fc2", 1, tokens, h, fs / t, false});
    }
    const double rows = tokens * k * ep * etp / (t * e);  // per local expert
    g.add({"experts_fc1", e / ep, rows, fin / etp, h, false});
    g.add({"experts_fc2", e / ep, rows, h, f / etp, false});
  } else {
    const double fin = double(m.ffn_in_width()), f = m.ffn_hidden_size;
    // fc1 is gate and up together for SwiGLU (ffn_in_width = 2·ffn).
    g.add({"fc1", 1, tokens, fin / t, h, false});
    g.add({"fc2", 1, tokens, h, f / t, false});
  }
  return g;
}

Gemm logits_gemm(const Model& m, double b, double s, int tp) {
  const double vocab_per_rank = double((m.vocab_size + tp - 1) / tp);
  return {"logits", 1, b * s, vocab_per_rank, double(m.hidden_size), false};
}

double layer_forward_flops(const Model& m, double b, double s, LayerKind kind) {
  double f = 0;
  for (const Gemm& g : layer_gemms(m, b, s, 1, kind)) f += g.flops();
  return f;
}

double attention_core_forward_flops(const Model& m, double b, double s) {
  double f = 0;
  for (const Gemm& g : layer_gemms(m, b, s, 1))
    if (g.core_attention) f += g.flops();
  return f;
}

namespace {
// MoE layers of the whole model (0 when dense).
int model_moe_layers(const Model& m) { return moe_layers_in(m, 0, m.num_layers); }
}  // namespace

double logits_forward_flops(const Model& m, double b, double s) {
  return logits_gemm(m, b, s, 1).flops();
}

double forward_flops(const Model& m, double b, double s) {
  const int moe = model_moe_layers(m);
  double f = (m.num_layers - moe) * layer_forward_flops(m, b, s) + logits_forward_flops(m, b, s);
  if (moe > 0) f += moe * layer_forward_flops(m, b, s, LayerKind::kMoe);
  return f;
}

double backward_flops(const Model& m, double b, double s) { return 2 * forward_flops(m, b, s); }

RecomputeFlopsParts recompute_flops_parts(const Model& m, double b, double s) {
  RecomputeFlopsParts p;
  for (const Gemm& g : layer_gemms(m, b, s, 1))
    if (g.core_attention) p.core += g.flops();
  // With experts, the average layer (dense and MoE layers alike re-run under full recompute).
  const int moe = model_moe_layers(m);
  p.layer = moe == 0 ? layer_forward_flops(m, b, s)
                     : ((m.num_layers - moe) * layer_forward_flops(m, b, s) +
                        moe * layer_forward_flops(m, b, s, LayerKind::kMoe)) / m.num_layers;
  return p;
}

double recompute_flops(const Model& m, const RecomputeFlopsParts& p, Recompute r, bool flash, double full_fraction) {
  double per_layer = 0;
  if (r == Recompute::kFull) per_layer += full_fraction * p.layer;
  if (r == Recompute::kSelective) per_layer += p.core;
  if (flash) per_layer += 0.5 * p.core;
  return m.num_layers * per_layer;
}

double recompute_flops(const Model& m, double b, double s, Recompute r, bool flash, double full_fraction) {
  return recompute_flops(m, recompute_flops_parts(m, b, s), r, flash, full_fraction);
}

double op_sac_recompute_share(const Model& m, std::string_view n) {
  if (n == "qkv") return double(m.kv_width()) / double(m.q_width() + 2 * m.kv_width());
  if (n == "out_proj") return 1;
  if (n == "fc1") return m.gated() ? 0.5 : 0;
  if (n == "fc2") return m.gated() ? 0 : 1;
  return 0;
}

double op_sac_recompute_flops(const Model& m, double b, double s, bool flash) {
  // The re-run GEMM shares; flash attention's backward recomputes the scores,
  // as with any policy.
  double linears = 0, core = 0;
  for (const Gemm& g : layer_gemms(m, b, s, 1))
    if (g.core_attention) core += g.flops();
    else linears += g.flops() * op_sac_recompute_share(m, g.name);
  return m.num_layers * (linears + (flash ? 0.5 * core : 0));
}

double model_flops_per_step(const Model& m, const Training& t) {
  const double b = t.global_batch_size, s = t.seq_length;
  return forward_flops(m, b, s) + backward_flops(m, b, s);
}

double hardware_flops_per_step(const Model& m, const Training& t, Recompute r) {
  return model_flops_per_step(m, t) +
         recompute_flops(m, t.global_batch_size, t.seq_length, r, t.flash_attention);
}

}  // namespace paraplan
