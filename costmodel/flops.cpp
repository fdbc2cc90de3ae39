#include "costmodel/flops.hpp"

namespace paraplan {

LayerGemms layer_gemms(const Model& m, double b, double s, int tp) {
  const double h = m.hidden_size, q = double(m.q_width()), kv = double(m.kv_width());
  const double hd = m.head_dim, heads = m.num_attention_heads, t = tp;
  const double fin = double(m.ffn_in_width()), f = m.ffn_hidden_size;
  const double tokens = b * s;
  LayerGemms g;
  // Q, K and V projections in one GEMM; GQA narrows K and V to kv heads.
  g.add({"qkv", 1, tokens, (q + 2 * kv) / t, h, false});
  // Scores: per (sequence, query head) an s×hd by hd×s product; GQA shares K
  // between query heads but the work is per query head.
  g.add({"scores", b * heads / t, s, s, hd, true});
  // Attention over values: per (sequence, query head) s×s by s×hd.
  g.add({"attn_v", b * heads / t, s, hd, s, true});
  g.add({"out_proj", 1, tokens, h, q / t, false});
  // fc1 is gate and up together for SwiGLU (ffn_in_width = 2·ffn).
  g.add({"fc1", 1, tokens, fin / t, h, false});
  g.add({"fc2", 1, tokens, h, f / t, false});
  return g;
}

Gemm logits_gemm(const Model& m, double b, double s, int tp) {
  const double vocab_per_rank = double((m.vocab_size + tp - 1) / tp);
  return {"logits", 1, b * s, vocab_per_rank, double(m.hidden_size), false};
}

double layer_forward_flops(const Model& m, double b, double s) {
  double f = 0;
  for (const Gemm& g : layer_gemms(m, b, s, 1)) f += g.flops();
  return f;
}

double attention_core_forward_flops(const Model& m, double b, double s) {
  double f = 0;
  for (const Gemm& g : layer_gemms(m, b, s, 1))
    if (g.core_attention) f += g.flops();
  return f;
}

double logits_forward_flops(const Model& m, double b, double s) {
  return logits_gemm(m, b, s, 1).flops();
}

double forward_flops(const Model& m, double b, double s) {
  return m.num_layers * layer_forward_flops(m, b, s) + logits_forward_flops(m, b, s);
}

double backward_flops(const Model& m, double b, double s) { return 2 * forward_flops(m, b, s); }

double recompute_flops(const Model& m, double b, double s, Recompute r, bool flash, double full_fraction) {
  double layer = 0, core = 0;
  for (const Gemm& g : layer_gemms(m, b, s, 1)) {
    layer += g.flops();
    if (g.core_attention) core += g.flops();
  }
  double per_layer = 0;
  if (r == Recompute::kFull) per_layer += full_fraction * layer;
  if (r == Recompute::kSelective) per_layer += core;
  if (flash) per_layer += 0.5 * core;
  return m.num_layers * per_layer;
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
