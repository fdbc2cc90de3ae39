#include <catch2/catch.hpp>

#include "costmodel/flops.hpp"
#include "test_helpers.hpp"

using namespace paraplan;

namespace {

// A GPT-style model as SC21 counts it: MHA, GeLU MLP with ffn = 4h (biases and
// dropout in the shared fixture do not change GEMM FLOPs).
Model gpt(int layers, int hidden, int heads, int vocab) {
  return test::gpt_style(layers, hidden, heads, vocab);
}

Training training(int batch, int seq) {
  Training t;
  t.global_batch_size = batch;
  t.seq_length = seq;
  t.flash_attention = false;
  return t;
}

// Narayanan et al. 2021 (SC21), eq. (3) and the text after it: FLOPs per
// iteration without and with full activation recomputation. Written here from
// the paper, independently of costmodel/flops.cpp.
double sc21_no_recompute(double B, double s, double l, double h, double V) {
  return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
}
double sc21_full_recompute(double B, double s, double l, double h, double V) {
  return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

}  // namespace

TEST_CASE("GPT-3 175B FLOPs per iteration equal the SC21 formulas", "[flops]") {
  const Model m = gpt(96, 12288, 96, 50257);
  const Training t = training(1536, 2048);
  const double expect = sc21_no_recompute(1536, 2048, 96, 12288, 50257);
  const double expect_full = sc21_full_recompute(1536, 2048, 96, 12288, 50257);
  CHECK(model_flops_per_step(m, t) == Approx(expect).epsilon(1e-12));
  CHECK(hardware_flops_per_step(m, t, Recompute::kNone) == Approx(expect).epsilon(1e-12));
  CHECK(hardware_flops_per_step(m, t, Recompute::kFull) == Approx(expect_full).epsilon(1e-12));
  // Magnitude sanity: ≈ 6 · 175e9 params · 1536 · 2048 tokens ≈ 3.3e18 per iteration.
  CHECK(expect > 3.2e18);
  CHECK(expect < 3.5e18);
}

TEST_CASE("A second GPT shape equals the SC21 formulas", "[flops]") {
  // GPT-2-XL-like: 48 layers, h 1600, 25 heads (head dim 64), V 50257, B 512, s 1024.
  const Model m = gpt(48, 1600, 25, 50257);
  const Training t = training(512, 1024);
  CHECK(model_flops_per_step(m, t) ==
        Approx(sc21_no_recompute(512, 1024, 48, 1600, 50257)).epsilon(1e-12));
  CHECK(hardware_flops_per_step(m, t, Recompute::kFull) ==
        Approx(sc21_full_recompute(512, 1024, 48, 1600, 50257)).epsilon(1e-12));
}

TEST_CASE("Forward is one third of an iteration - backward twice forward", "[flops]") {
  const Model m = gpt(96, 12288, 96, 50257);
  const double b = 4, s = 2048, h = 12288, l = 96, V = 50257;
  // Per layer: 24·b·s·h² (GEMMs) + 4·b·s²·h (scores and attention·V).
  CHECK(layer_forward_flops(m, b, s) == Approx(24 * b * s * h * h + 4 * b * s * s * h).epsilon(1e-12));
  CHECK(attention_core_forward_flops(m, b, s) == Approx(4 * b * s * s * h).epsilon(1e-12));
  CHECK(logits_forward_flops(m, b, s) == Approx(2 * b * s * h * V).epsilon(1e-12));
  CHECK(forward_flops(m, b, s) ==
        Approx(l * (24 * b * s * h * h + 4 * b * s * s * h) + 2 * b * s * h * V).epsilon(1e-12));
  CHECK(backward_flops(m, b, s) == Approx(2 * forward_flops(m, b, s)).epsilon(1e-15));
}

TEST_CASE("Selective recompute adds the attention core - flash adds half of it", "[flops]") {
  const Model m = gpt(96, 12288, 96, 50257);
  Training t = training(1536, 2048);
  const double B = 1536, s = 2048, h = 12288, l = 96;
  const double model = model_flops_per_step(m, t);
  CHECK(hardware_flops_per_step(m, t, Recompute::kSelective) - model ==
        Approx(l * 4 * B * s * s * h).epsilon(1e-9));
  t.flash_attention = true;
  CHECK(model_flops_per_step(m, t) == Approx(model).epsilon(1e-15));  // MFU ignores it
  CHECK(hardware_flops_per_step(m, t, Recompute::kNone) - model ==
        Approx(l * 2 * B * s * s * h).epsilon(1e-9));
  CHECK(hardware_flops_per_step(m, t, Recompute::kSelective) - model ==
        Approx(l * 6 * B * s * s * h).epsilon(1e-9));
}

TEST_CASE("GQA and SwiGLU GEMMs are 2 x tokens x weights, plus attention", "[flops]") {
  // Llama-2-70B: 64 query heads, 8 kv heads, SwiGLU ffn 28672 (FACTS.md).
  Model m;
  m.num_layers = 80;
  m.hidden_size = 8192;
  m.num_attention_heads = 64;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.ffn_hidden_size = 28672;
  m.vocab_size = 32000;
  m.activation = Activation::kSwiglu;
  m.normalization = Normalization::kRmsNorm;
  const double b = 1, s = 4096;
  // Weights of one layer's linear maps: d·H·hd + 2·d·KV·hd + H·hd·d + 3·d·ffn.
  const double h = 8192, weights = h * 8192 + 2 * h * 1024 + 8192 * h + 3 * h * 28672;
  const double expect = 2 * b * s * weights + 4 * b * s * s * 8192;
  CHECK(layer_forward_flops(m, b, s) == Approx(expect).epsilon(1e-12));
  // Per tp rank the GEMMs split evenly.
  double per_rank = 0;
  for (const Gemm& g : layer_gemms(m, b, s, 8)) per_rank += g.flops();
  CHECK(per_rank * 8 == Approx(expect).epsilon(1e-12));
}
