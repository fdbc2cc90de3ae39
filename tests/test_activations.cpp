// Per-layer activation memory against Korthikanti et al. 2022 (Table 2 and §4–5).
#include <catch2/catch.hpp>

#include "costmodel/activations.hpp"
#include "planner/spec_loader.hpp"
#include "test_helpers.hpp"

using namespace paraplan;

namespace {
// GPT-3 175B shape: s = 2048, h = 12288, a = 96; b = 1; t = 8.
const std::int64_t s = 2048, b = 1, h = 12288, a = 96, t = 8;
const std::int64_t sbh = s * b * h;  // 25,165,824
}  // namespace

TEST_CASE("GPT-style layer activations equal Korthikanti's formulas", "[activations]") {
  const Model m = test::gpt_style(96, int(h), int(a), 51200);
  auto bytes = [&](int tp, bool sp, Recompute r) {
    return layer_activation_bytes(m, /*flash=*/false, r, ActShape{s, b, tp, sp, 2});
  };
  // No parallelism: s·b·h·(34 + 5·a·s/h); 5·96·2048/12288 = 80.
  CHECK(bytes(1, false, Recompute::kNone) == sbh * (34 + 80));
  // Tensor parallel, no SP: s·b·h·(10 + 24/t + 5·a·s/(h·t)) = sbh·(10 + 3 + 10).
  CHECK(bytes(t, false, Recompute::kNone) == sbh * 23);
  // Tensor + sequence parallel: s·b·h/t·(34 + 5·a·s/h) = sbh·114/8.
  CHECK(bytes(t, true, Recompute::kNone) == sbh * 114 / 8);
  // Selective recompute with SP: 34·s·b·h/t.
  CHECK(bytes(t, true, Recompute::kSelective) == 34 * sbh / 8);
  // Selective without SP: s·b·h·(10 + 24/t).
  CHECK(bytes(t, false, Recompute::kSelective) == sbh * 13);
  // Full recompute keeps the layer input: 2·s·b·h, ÷t with SP.
  CHECK(bytes(t, false, Recompute::kFull) == 2 * sbh);
  CHECK(bytes(t, true, Recompute::kFull) == 2 * sbh / 8);
}

TEST_CASE("no dropout drops the masks and the dropout output", "[activations]") {
  Model m = test::gpt_style(96, int(h), int(a), 51200);
  m.hidden_dropout = m.attention_dropout = 0;
  // 34 - 2 hidden-dropout masks = 32 per token·h; scores: only the softmax output, 2·a·s²·b.
  CHECK(layer_activation_bytes(m, false, Recompute::kNone, ActShape{s, b, 1, false, 2}) ==
        sbh * 32 + 2 * a * s * s * b);
}

TEST_CASE("GQA, SwiGLU, flash attention: per-op sum by hand", "[activations]") {
  // Llama-2-70B shape: h = 8192, 64 heads, 8 kv heads (kv width 1024), ffn 28672,
  // SwiGLU, RMSNorm, no dropout, flash attention, bf16, t = 1. Bytes per token:
  //   norms' inputs 2·(2h) + QKV input 2h + Q 2h + K 2·1024 + V 2·1024
  //   + fp32 log-sum-exp 4·64 + out-proj input 2h + fc1 input 2h
  //   + SwiGLU input 2·(2·28672) + fc2 input 2·28672
  //   = 12h + 4096 + 256 + 6·28672 = 98,304 + 4,096 + 256 + 172,032 = 274,688.
  const Model m = test::model("llama-2-70b");
  const std::int64_t seq = 4096;
  CHECK(layer_activation_bytes(m, true, Recompute::kNone, ActShape{seq, 1, 1, false, 2}) ==
        seq * 274'688);
  // Selective recompute re-runs the s×s attention core; flash never stores
  // one, so nothing is dropped.
  CHECK(layer_activation_bytes(m, true, Recompute::kSelective, ActShape{seq, 1, 1, false, 2}) ==
        seq * 274'688);
  // t = 8 with SP: everything divides by 8.
  CHECK(layer_activation_bytes(m, true, Recompute::kNone, ActShape{seq, 1, 8, true, 2}) ==
        seq * 274'688 / 8);
}

TEST_CASE("fp32 activations are twice the bf16 ones, masks stay 1 byte", "[activations]") {
  const Model m = test::gpt_style(2, 256, 8, 1024);
  const ActShape bf{128, 2, 1, false, 2}, fp{128, 2, 1, false, 4};
  // bf16: 34·sbh + 5·a·s²·b; fp32: the 2-byte terms double, the 1-byte masks
  // (2·sbh + a·s²·b) do not: 66·sbh + 9·a·s²·b.
  const std::int64_t sbh_ = 128 * 2 * 256, as2b = 8 * 128 * 128 * 2;
  CHECK(layer_activation_bytes(m, false, Recompute::kNone, bf) == 34 * sbh_ + 5 * as2b);
  CHECK(layer_activation_bytes(m, false, Recompute::kNone, fp) == 66 * sbh_ + 9 * as2b);
}

TEST_CASE("Squared ReLU (Nemotron): the plain MLP keeps relu's output and fc2's input, as GeLU's keeps its input",
          "[activations]") {
  // Nemotron-4 340B's layer (h 18432, 96 heads, 8 kv heads of 192, ffn 73728, LayerNorm, no dropout, flash
  // attention, bf16, t = 1), bytes per token:
  //   norms' inputs 2·(2h) + QKV input 2h + Q 2h + K 2·1536 + V 2·1536 + fp32 log-sum-exp 4·96
  //   + out-proj input 2h + fc1 input 2h + relu's output 2·73728 + fc2 input 2·73728
  //   = 12h + 6144 + 384 + 4·73728 = 221,184 + 6,144 + 384 + 294,912 = 522,624
  // (the default variant keeps no norm statistics).
  Model m = load_model_file(test::repo("tests/data/hf/nemotron-4-340b/config.json"));
  REQUIRE(m.activation == Activation::kRelu2);
  REQUIRE(!m.gated());
  const std::int64_t seq = 4096;
  const ActShape a{seq, 1, 1, false, 2};
  const std::int64_t bytes = layer_activation_bytes(m, true, Recompute::kNone, a);
  CHECK(bytes == seq * 522'624);
  // Byte for byte what GeLU's plain MLP keeps.
  Model gelu = m;
  gelu.activation = Activation::kGelu;
  CHECK(layer_activation_bytes(gelu, true, Recompute::kNone, a) == bytes);
}
