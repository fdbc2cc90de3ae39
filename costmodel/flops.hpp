// FLOPs of a decoder-only transformer, counted from the shapes of its GEMMs
// (2·m·n·k each) plus the attention score and value products. The convention is
// Narayanan et al. 2021 (SC21, "Efficient Large-Scale Language Model Training on
// GPU Clusters Using Megatron-LM", §5.1 and Appendix): the attention products
// are counted over the full s×s square (no causal halving), backward = 2×
// forward, the embedding lookup costs nothing, the logits GEMM counts once
// forward and twice backward and is never recomputed. For a GPT-style model this
// gives 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) per iteration, and
// 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) with full recomputation.
//
// All counts are doubles: a GPT-3 iteration is ~3e21 FLOPs, beyond int64.
#pragma once

#include <string_view>

#include <array>

#include "costmodel/activations.hpp"
#include "costmodel/layout.hpp"
#include "costmodel/model.hpp"

namespace paraplan {

// `batch` independent products of an m×k matrix by a k×n matrix.
struct Gemm {
  const char* name = "";
  double batch = 1, m = 0, n = 0, k = 0;
  bool core_attention = false;  // scores QK^T or attention·V (re-run by selective recompute)

  // 2·m·n·k multiply-adds per product (one multiply and one add each).
  double flops() const { return 2 * batch * m * n * k; }
  // Each operand read once and the result written once: (m·k + k·n + m·n) elements.
  double bytes(int elem_bytes) const { return batch * (m * k + k * n + m * n) * elem_bytes; }
};

// The forward GEMMs of one transformer layer.
using LayerGemms = FixedList<Gemm, 16>;

// Forward GEMMs of one layer for b sequences of s tokens on one of tp ranks:
// column-parallel QKV and fc1, heads split over tp, row-parallel out-proj and
// fc2 (Shoeybi et al. 2019). With sequence parallelism the GEMMs see the
// gathered sequence, so the shapes are the same. tp = 1 gives the whole layer.
//
// Multi-latent attention: the replicated down projections on the rank's s/tp
// tokens (sequence parallel), the column-parallel up projections, the scores
// over qk_nope + qk_rope per head, attention over v_head_dim values.
// A mixture-of-experts layer (kind kMoe): the router on the rank's s/tp
// tokens, the shared experts as a tensor-parallel MLP, and the rank's
// num_experts/ep local experts as one grouped GEMM each for fc1 and fc2
// (batch = local experts), each expert's rows the tokens routed to it from
// the etp x ep ranks it serves at perfect balance: s·b·top-k·ep·etp/(tp·E),
// its width split over etp. tp = ep = etp = 1 gives the whole layer.
LayerGemms layer_gemms(const Model& m, double b, double s, int tp, LayerKind kind = LayerKind::kDense, int ep = 1,
                       int etp = 1);

// The output-layer (logits) GEMM, vocabulary split over tp (padded up, as Megatron does).
Gemm logits_gemm(const Model& m, double b, double s, int tp);

// Forward FLOPs of one whole layer (all tp ranks together); a mixture of
// experts' layer counts its top-k routed experts (active parameters).
double layer_forward_flops(const Model& m, double b, double s, LayerKind kind = LayerKind::kDense);
// Of those, the attention core: QK^T and attention·V, 2·b·s²·(heads·head_dim) each.
double attention_core_forward_flops(const Model& m, double b, double s);
// Forward FLOPs of the logits GEMM: 2·b·s·h·V.
double logits_forward_flops(const Model& m, double b, double s);
// Forward FLOPs of the whole model: every layer plus the logits.
double forward_flops(const Model& m, double b, double s);
// Backward FLOPs: twice the forward (input and weight gradients, SC21 §5.1).
double backward_flops(const Model& m, double b, double s);

// Extra FLOPs that recomputation and flash attention add to one iteration:
//  * full: one more forward of every layer (not the logits), SC21 §5.1;
//  * selective: one more forward of the attention core (Korthikanti et al. 2022, §5);
//  * flash attention's backward recomputes the scores: 5 GEMMs against the
//    forward's 2, i.e. +0.5× the core's forward (Dao 2023, FlashAttention-2,
//    benchmark note "multiply by 2.5 for the backward pass").
// full_fraction: the share of layers full recomputation re-runs (Megatron's
// block method re-runs the first recompute_layers of each chunk only).
double recompute_flops(const Model& m, double b, double s, Recompute r, bool flash, double full_fraction = 1.0);
// The same in two steps, for a search that prices many layouts of one model:
// the per-layer FLOPs (the attention core's, an average layer's forward), then
// the recomputation's extra from them (recompute_flops = the second of the first).
struct RecomputeFlopsParts {
  double core = 0, layer = 0;
};
RecomputeFlopsParts recompute_flops_parts(const Model& m, double b, double s);
double recompute_flops(const Model& m, const RecomputeFlopsParts& p, Recompute r, bool flash, double full_fraction);
// The share of a layer GEMM (by its layer_gemms name) that torchtitan's per-op
// selective checkpointing re-runs in the backward: the even mm's of a block,
// wk (its share of the fused QKV), wo, and w3 (half the fused gated fc1) or a
// plain MLP's w2 (costmodel/activations.cpp op_sac_saved_tensors); 0 for the rest.
double op_sac_recompute_share(const Model& m, std::string_view gemm);
// The FLOPs torchtitan's per-op selective checkpointing re-runs (dense model, tp = 1).
double op_sac_recompute_flops(const Model& m, double b, double s, bool flash);

// Model FLOPs per optimizer step (for MFU): forward + backward over the global
// batch, no recomputation.
double model_flops_per_step(const Model& m, const Training& t);
// Hardware FLOPs per optimizer step (for HFU): model FLOPs + recomputation.
double hardware_flops_per_step(const Model& m, const Training& t, Recompute r);

}  // namespace paraplan
