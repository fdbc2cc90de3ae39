// Memory model: model state (ZeRO), whole-stage breakdowns worked out by hand.
#include <catch2/catch.hpp>

#include "costmodel/activations.hpp"
#include "costmodel/memory.hpp"
#include "test_helpers.hpp"

using namespace paraplan;

TEST_CASE("mixed-precision Adam: 16 bytes/param, a 7B model needs 112 GB", "[memory][zero]") {
  // 2 (bf16 weights) + 2 (bf16 grads) + 12 (fp32 master, m, v).
  const ModelState ms = model_state_bytes(7'000'000'000, 0, 1, 2, 2, 12);
  CHECK(ms.total() == 112'000'000'000);
  CHECK(ms.weights == 14'000'000'000);
  CHECK(ms.optimizer == 84'000'000'000);
}

TEST_CASE("ZeRO paper example: Psi = 7.5B, N_d = 64", "[memory][zero]") {
  // Rajbhandari et al. 2020, Figure 1: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB.
  const std::int64_t psi = 7'500'000'000;
  const double expect_gb[] = {120.0, 31.4, 16.6, 1.9};
  // Exact values by hand: 16Ψ; 4Ψ + 12Ψ/64; 2Ψ + 14Ψ/64; 16Ψ/64.
  const std::int64_t exact[] = {120'000'000'000, 31'406'250'000, 16'640'625'000, 1'875'000'000};
  for (int stage = 0; stage <= 3; ++stage) {
    const ModelState ms = model_state_bytes(psi, stage, 64, 2, 2, 12);
    INFO("ZeRO stage " << stage);
    CHECK(ms.total() == exact[stage]);
    CHECK(std::round(double(ms.total()) / 1e8) / 10 == Approx(expect_gb[stage]));
  }
}

TEST_CASE("Megatron distributed optimizer: 6 + 12/d bytes/param with fp32 grads", "[memory][zero]") {
  // FACTS.md: --use-distributed-optimizer ≈ ZeRO-1, bf16 params + fp32 grads.
  const ModelState ms = model_state_bytes(8'000'000'000, 1, 8, 2, 4, 12);
  CHECK(ms.total() == 8'000'000'000LL * 6 + 8'000'000'000LL * 12 / 8);
}

TEST_CASE("Llama-2-7B on 8 GPUs, dp=8 zero=1, by hand", "[memory]") {
  Spec s = test::spec_for(test::model("llama-2-7b"), 8, 4096, 64);
  s.training.grad_dtype = DType::kFp32;
  s.training.flash_attention = true;
  Layout l = parse_layout("tp=1,pp=1,zero=1,mbs=1,recompute=none");
  REQUIRE(!resolve_layout(s, &l));
  REQUIRE(l.dp == 8);
  const MemoryBreakdown m = stage_memory(s, l, 0);
  const std::int64_t psi = 6'738'415'616;
  CHECK(m[Category::kWeights] == 2 * psi);
  CHECK(m[Category::kGradients] == 4 * psi);
  CHECK(m[Category::kOptimizer] == 12 * psi / 8);
  // Activations: 32 layers × one micro-batch (pp = 1) × per-token bytes × s:
  // per token (MHA, SwiGLU, flash, no dropout): 12h + 2·2h (K, V full width)
  //   + 4·32 (LSE) + 6·11008 = 49,152 + 16,384 + 128 + 66,048 = 131,712.
  // Plus the last stage's final-norm and output inputs 2·2h·s and the fp32
  // softmax 4·32000·s.
  const std::int64_t s_ = 4096, h = 4096;
  // Plus int32 token ids (first stage) and labels (last stage): 4·s each.
  CHECK(m[Category::kActivations] == 32 * s_ * 131'712 + 4 * h * s_ + 4 * 32000 * s_ + 2 * 4 * s_);
  // No SP, no pp, zero 1: no communication buffers.
  CHECK(m[Category::kComm] == 0);
  // Transient: the largest live set of short-lived buffers. The logits are
  // 2·s·V + 16·s (fp32 row statistics) = 262,209,536; a layer's backward peaks
  // in the SwiGLU backward, holding the residual gradient (2·s·h), the fc2
  // input gradient (2·s·ffn) and the fc1 output gradient (2·s·2·ffn):
  // 2·4096·(4096 + 3·11008) = 304,087,040.
  CHECK(m[Category::kTransient] == 2 * s_ * (4096 + 3 * 11008));
  CHECK(m[Category::kTransient] == 304'087'040);
}

TEST_CASE("explain terms add up to the breakdown", "[memory]") {
  Spec s = test::spec_for(test::model("llama-3.1-70b"), 64, 8192, 256);
  for (const char* text : {"tp=8,pp=4,vpp=5,sp=1,zero=1,recompute=selective,mbs=1",
                           "tp=4,pp=2,zero=3,recompute=full,mbs=2", "tp=8,pp=8,schedule=gpipe,zero=2"}) {
    Layout l = parse_layout(text);
    REQUIRE(!resolve_layout(s, &l));
    for (int st = 0; st < l.pp; ++st) {
      const MemoryBreakdown m = stage_memory(s, l, st);
      MemoryBreakdown sum;
      for (const Term& t : stage_terms(s, l, st))
        if (!t.held_for_streams) sum[t.category] += t.bytes;
      INFO(text << " stage " << st);
      CHECK(sum.bytes == m.bytes);
    }
  }
}

TEST_CASE("embedding lives on the first stage, output layer on the last", "[memory]") {
  // Llama-2-7B, pp = 4, tp = 2: 8 layers per stage; vocab rows per tp rank 16000.
  const Model mdl = test::model("llama-2-7b");
  Layout l = parse_layout("dp=1,tp=2,pp=4");
  const std::int64_t layer = (4 * 4096LL * 4096 + 3 * 4096LL * 11008) / 2 + 2 * 4096;
  CHECK(stage_params(mdl, l, 1).total() == 8 * layer);
  CHECK(stage_params(mdl, l, 0).total() == 8 * layer + 16000LL * 4096);
  CHECK(stage_params(mdl, l, 3).total() == 8 * layer + 16000LL * 4096 + 4096);
  // Tied embeddings with pp > 1: the last stage keeps a copy (Megatron-LM).
  Model tied = mdl;
  tied.tie_embeddings = true;
  CHECK(stage_params(tied, l, 3).output == 16000LL * 4096);
  l.pp = 1;
  CHECK(stage_params(tied, l, 0).output == 0);
}

TEST_CASE("1F1B: stage 0 holds p micro-batches of activations, the last stage one", "[memory]") {
  const Model m = test::gpt_style(8, 1024, 16, 32000);
  Spec s = test::spec_for(m, 4, 1024, 16);
  s.training.flash_attention = false;
  Layout l = parse_layout("dp=1,tp=1,pp=4,mbs=1");
  REQUIRE(!resolve_layout(s, &l));
  const std::int64_t per_layer =
      layer_activation_bytes(m, false, Recompute::kNone, ActShape{1024, 1, 1, false, 2});
  // Stage 1 (no embedding, no output): 2 layers × min(4 − 1, 16) = 3 micro-batches.
  CHECK(stage_memory(s, l, 1)[Category::kActivations] == 3 * 2 * per_layer);
  // Stage 0: 4 in flight, plus 4 embedding dropout masks of s·h bytes and 4
  // micro-batches of int32 token ids (4·s bytes).
  CHECK(stage_memory(s, l, 0)[Category::kActivations] == 4 * 2 * per_layer + 4 * 1024 * 1024 + 4 * 4 * 1024);
  // ZeRO-0, pp > 1: a middle stage keeps a send buffer of s·b·h·2 bytes per
  // direction; the first and last stages send one way only.
  CHECK(stage_memory(s, l, 1)[Category::kComm] == 2 * 1024 * 1024 * 2);
  CHECK(stage_memory(s, l, 0)[Category::kComm] == 1024 * 1024 * 2);
  CHECK(stage_memory(s, l, 3)[Category::kComm] == 1024 * 1024 * 2);
  // GPipe: every stage holds all 16.
  l.schedule = Schedule::kGPipe;
  CHECK(stage_memory(s, l, 1)[Category::kActivations] == 16 * 2 * per_layer);
}

TEST_CASE("runtime and fragmentation come from the cluster spec", "[memory]") {
  Spec s = test::spec_for(test::model("llama-2-7b"), 8, 4096, 64);
  s.cluster.runtime_overhead_gib = 1.5;
  s.cluster.fragmentation = 0.05;
  Layout l = parse_layout("tp=8,zero=0");
  REQUIRE(!resolve_layout(s, &l));
  const MemoryBreakdown m = stage_memory(s, l, 0);
  CHECK(m[Category::kRuntime] == std::int64_t(1.5 * 1024 * 1024 * 1024));
  const std::int64_t tensors = m.total() - m[Category::kRuntime] - m[Category::kFragmentation];
  CHECK(m[Category::kFragmentation] == std::llround(0.05 * double(tensors)));
}

TEST_CASE("fits within headroom", "[memory]") {
  Spec s = test::spec_for(test::model("llama-2-7b"), 8, 4096, 64);
  s.cluster.gpu.memory_gib = 80;
  s.memory_headroom = 0.05;
  Layout l = parse_layout("tp=1,zero=0");
  REQUIRE(!resolve_layout(s, &l));
  const MemoryEstimate e = estimate_memory(s, l);
  // 16 B × 6.74e9 = 107.8 GB of model state alone: cannot fit 76 GiB.
  CHECK_FALSE(e.fits);
  CHECK(e.headroom_bytes == std::llround(0.05 * 80 * 1073741824.0));
  CHECK(e.margin_bytes == e.usable_bytes - e.peak_bytes);
  l = parse_layout("tp=1,zero=3");
  REQUIRE(!resolve_layout(s, &l));
  CHECK(estimate_memory(s, l).fits);
}

TEST_CASE("sizes past 2^60 bytes saturate and never fit (issue 12: int64 overflow gave 'fits')", "[memory][hardening]") {
  // 16,384 heads at seq 4,194,304 without flash attention: the attention
  // scores alone are 16,384 x 4,194,304^2 x 2 B = 2^59 B per layer and
  // sequence, and four layers' worth overflowed 64 bits before.
  Model m = test::gpt_style(4, 2'097'152, 16'384, 1000);
  m.hidden_dropout = m.attention_dropout = 0;
  m.position_embedding = PositionEmbedding::kRope;
  m.max_position_embeddings = 0;
  m.ffn_hidden_size = 8192;
  Spec s = test::spec_for(m, 8, 4'194'304, 8);
  Layout l = parse_layout("tp=1,pp=1");
  REQUIRE(!resolve_layout(s, &l));
  const MemoryEstimate e = estimate_memory(s, l);
  CHECK(e.peak_bytes == kSaturatedBytes);
  CHECK(e.stages[0][Category::kActivations] == kSaturatedBytes);
  CHECK(!e.fits);
  CHECK(peak_memory(s, l).bytes == kSaturatedBytes);
}

TEST_CASE("Uneven pipeline stages: each stage's weights and activations follow its own layer count (issue 14)",
          "[memory][uneven]") {
  // Llama-2-7B, 32 layers, pp = 4, first_stage_layers = 7, last_stage_layers = 9:
  // the middle stages share 32 − 7 − 9 = 16 layers, 8 each (Megatron-LM
  // transformer_block.py get_num_layers_to_build).
  Spec s = test::spec_for(test::model("llama-2-7b"), 4, 4096, 64);
  s.training.flash_attention = true;
  Layout l = parse_layout("tp=1,pp=4,mbs=1,recompute=full,first_stage_layers=7,last_stage_layers=9");
  REQUIRE(!resolve_layout(s, &l));
  REQUIRE(l.dp == 1);
  // One layer: 4h² (MHA attention) + 3·h·ffn (SwiGLU) + 2h (two RMSNorms)
  //   = 67,108,864 + 135,266,304 + 8,192 = 202,383,360 parameters.
  const std::int64_t layer = 202'383'360, emb = 32000LL * 4096;
  CHECK(stage_params(s.model, l, 0).total() == 7 * layer + emb);
  CHECK(stage_params(s.model, l, 1).total() == 8 * layer);
  CHECK(stage_params(s.model, l, 2).total() == 8 * layer);
  CHECK(stage_params(s.model, l, 3).total() == 9 * layer + emb + 4096);
  // bf16 weights, 2 bytes each.
  CHECK(stage_memory(s, l, 0)[Category::kWeights] == 2 * (7 * layer + emb));  // 3,095,511,040
  CHECK(stage_memory(s, l, 0)[Category::kWeights] == 3'095'511'040);
  CHECK(stage_memory(s, l, 3)[Category::kWeights] == 3'905'052'672);
  // Full recompute keeps each layer's input, 2·s·h = 33,554,432 bytes, for
  // every micro-batch in flight (1F1B: 4 − stage; 64 micro-batches):
  // stage 0: 4 × 7, stage 1: 3 × 8, stage 2: 2 × 8, stage 3: 1 × 9 layer inputs.
  const std::int64_t input = 2LL * 4096 * 4096;
  const int in_flight_layers[] = {4 * 7, 3 * 8, 2 * 8, 1 * 9};
  for (int st = 0; st < 4; ++st) {
    INFO("stage " << st);
    std::int64_t layers_term = -1;
    for (const Term& t : stage_terms(s, l, st))
      if (t.name == "transformer layers") layers_term = t.bytes;
    CHECK(layers_term == in_flight_layers[st] * input);
  }
  CHECK(in_flight_layers[0] * input == 939'524'096);
  // The even split of the same model puts 8 layers on every stage.
  Layout even = parse_layout("tp=1,pp=4,mbs=1,recompute=full");
  REQUIRE(!resolve_layout(s, &even));
  CHECK(stage_memory(s, l, 0)[Category::kWeights] == stage_memory(s, even, 0)[Category::kWeights] - 2 * layer);
}

TEST_CASE("Llama-3.1-405B, TP8 PP16, first and last stage 7 layers (Llama 3 paper §3.3.2)", "[memory][uneven]") {
  // 126 layers: 7 + 14 × 8 + 7.
  Spec s = test::spec_for(test::model("llama-3.1-405b"), 16384, 8192, 2048);
  Layout l = parse_layout("tp=8,pp=16,sp=1,zero=1,mbs=1,first_stage_layers=7,last_stage_layers=7");
  REQUIRE(!resolve_layout(s, &l));
  CHECK(l.dp == 128);
  // h = 16384, 128 q heads and 8 kv heads of 128, ffn 53248, tp = 8:
  // (h·(h + 2·1024) + h·h + 3·h·53248)/8 + 2h = 3,254,812,672/8 + 32,768.
  const std::int64_t h = 16384;
  const std::int64_t layer = (h * (h + 2 * 1024) + h * h + 3 * h * 53248) / 8 + 2 * h;
  CHECK(stage_params(s.model, l, 0).layers == 7);
  CHECK(stage_params(s.model, l, 1).layers == 8);
  CHECK(stage_params(s.model, l, 15).layers == 7);
  CHECK(stage_params(s.model, l, 1).total() == 8 * layer);
  CHECK(stage_params(s.model, l, 0).total() == 7 * layer + 128256LL / 8 * h);
  Layout bad = parse_layout("tp=8,pp=16,first_stage_layers=6,last_stage_layers=7");
  const auto p = resolve_layout(s, &bad);
  REQUIRE(p);
  CHECK(p->field == "first_stage_layers");
  CHECK(p->message.find("113") != std::string::npos);  // 126 − 6 − 7 = 113, not a multiple of 14
}

TEST_CASE("Partial recompute: block keeps n - k layers whole, uniform one input per group (issue 14)",
          "[memory][recompute]") {
  // Llama-2-7B, one stage of 32 layers, s = 4096, b = 1, flash attention, the
  // idealised stack: a whole layer keeps 131,712 bytes per token (see "Llama-2-7B
  // on 8 GPUs, dp=8 zero=1, by hand"), a checkpoint its input, 2·h = 8,192.
  Spec s = test::spec_for(test::model("llama-2-7b"), 8, 4096, 64);
  s.training.flash_attention = true;
  const std::int64_t F = 4096LL * 131'712, I = 4096LL * 2 * 4096;
  auto layers_term = [&](const char* text) {
    Layout l = parse_layout(text);
    REQUIRE(!resolve_layout(s, &l));
    for (const Term& t : stage_terms(s, l, 0))
      if (t.name == "transformer layers") return t.bytes;
    return std::int64_t(-1);
  };
  // Megatron recompute.py:167-180, block: the first k = 8 layers checkpointed,
  // 32 − 8 = 24 kept whole.
  CHECK(layers_term("tp=1,recompute=full,recompute_method=block,recompute_layers=8") == 8 * I + 24 * F);
  CHECK(8 * I + 24 * F == 13'216'251'904);
  // block with k >= n is full recompute of every layer; k = 0 is not a layout.
  CHECK(layers_term("tp=1,recompute=full,recompute_method=block,recompute_layers=40") == 32 * I);
  CHECK(layers_term("tp=1,recompute=full") == 32 * I);
  // uniform, groups of 4: 32 / 4 = 8 checkpointed inputs, nothing whole.
  CHECK(layers_term("tp=1,recompute=full,recompute_method=uniform,recompute_layers=4") == 8 * I);
  // uniform, groups of 5: ceil(32 / 5) = 7 inputs.
  CHECK(layers_term("tp=1,recompute=full,recompute_method=uniform,recompute_layers=5") == 7 * I);
  // Re-running a group of 4 holds 3 more whole layers than re-running one.
  Layout u1 = parse_layout("tp=1,recompute=full"), u4 = parse_layout("tp=1,recompute=full,recompute_layers=4");
  REQUIRE(!resolve_layout(s, &u1));
  REQUIRE(!resolve_layout(s, &u4));
  CHECK(stage_memory(s, u4, 0)[Category::kTransient] - stage_memory(s, u1, 0)[Category::kTransient] == 3 * F);
  // recompute_method without recompute=full is not a layout.
  Layout bad = parse_layout("tp=1,recompute=selective,recompute_method=block,recompute_layers=2");
  const auto p = resolve_layout(s, &bad);
  REQUIRE(p);
  CHECK(p->field == "recompute_method");
  // Frameworks without Megatron's --recompute-method say so.
  s.training.framework = Framework::kNanotron;
  Layout nb = parse_layout("tp=1,recompute=full,recompute_method=block,recompute_layers=2");
  const auto pn = resolve_layout(s, &nb);
  REQUIRE(pn);
  CHECK(pn->reason == Invalid::kFramework);
  CHECK(pn->field == "recompute_method");
}

TEST_CASE("Context parallelism: cp = 2 halves each rank's saved activations - model state shards over dp x cp (issue 14)",
          "[memory][cp]") {
  // Llama-2-7B on 16 ranks, s = 4096, flash attention, the idealised stack:
  // a layer keeps 131,712 bytes per token ("Llama-2-7B on 8 GPUs, dp=8 zero=1, by hand").
  Spec s = test::spec_for(test::model("llama-2-7b"), 16, 4096, 64);
  s.training.flash_attention = true;
  auto layers_term = [&](const Layout& l) {
    for (const Term& t : stage_terms(s, l, 0))
      if (t.name == "transformer layers") return t.bytes;
    return std::int64_t(-1);
  };
  Layout c1 = parse_layout("tp=1,cp=1,zero=1"), c2 = parse_layout("tp=1,cp=2,zero=1");
  REQUIRE(!resolve_layout(s, &c1));
  REQUIRE(!resolve_layout(s, &c2));
  CHECK(c1.dp == 16);
  CHECK(c2.dp == 8);
  CHECK(layers_term(c1) == 32LL * 4096 * 131'712);
  CHECK(layers_term(c2) == 32LL * 2048 * 131'712);  // s/cp = 2048 tokens per rank
  CHECK(2 * layers_term(c2) == layers_term(c1));
  // Megatron's distributed optimizer shards over the dp x cp group (8 x 2 = 16).
  const std::int64_t psi = 6'738'415'616;
  CHECK(stage_memory(s, c2, 0)[Category::kOptimizer] == (12 * psi + 15) / 16);
  CHECK(stage_memory(s, c2, 0)[Category::kOptimizer] == stage_memory(s, c1, 0)[Category::kOptimizer]);
  // The forward ring keeps every K|V chunk: cp x 2 x (s/cp) x kv x 2 B = 2·4096·4096·2 = 67,108,864 at cp = 2...
  // and at cp = 16 the same whole-sequence K|V, larger than any other transient of the layer.
  s.training.seq_length = 131072;
  s.cluster.gpus_per_node = 16;
  Layout c16 = parse_layout("tp=1,cp=16,zero=1,recompute=full");
  REQUIRE(!resolve_layout(s, &c16));
  bool ring = false;
  for (const Term& t : stage_terms(s, c16, 0))
    if (t.category == Category::kTransient && t.formula.find("context-parallel ring") != std::string::npos) {
      ring = true;
      CHECK(t.bytes >= 2LL * 131072 * 4096 * 2);  // 2 GiB: K and V of all 131,072 tokens
    }
  CHECK(ring);
  // No flash attention, or a sequence that does not split into 2·cp chunks: not a layout.
  s.training.seq_length = 4096;
  Layout odd = parse_layout("tp=1,cp=16,zero=1");
  s.training.seq_length = 4080;  // 4080 % 32 = 16
  const auto p = resolve_layout(s, &odd);
  REQUIRE(p);
  CHECK(p->reason == Invalid::kSeqCp);
  CHECK(p->field == "cp");
  s.training.seq_length = 4096;
  s.training.flash_attention = false;
  Layout nf = parse_layout("tp=1,cp=2,zero=1");
  const auto pf = resolve_layout(s, &nf);
  REQUIRE(pf);
  CHECK(pf->reason == Invalid::kCpAttention);
}

TEST_CASE("FP8 (Transformer Engine): weight workspaces and 1-byte saved linear inputs, by hand (issue 14)",
          "[memory][fp8]") {
  Spec s = test::spec_for(test::model("llama-2-7b"), 8, 4096, 64);
  s.cluster = test::cluster("dgx-h100");
  s.training.flash_attention = true;
  Layout l = parse_layout("tp=1,zero=1,mbs=1");
  REQUIRE(!resolve_layout(s, &l));
  const MemoryBreakdown bf16 = stage_memory(s, l, 0);
  s.training.fp8 = true;
  const MemoryBreakdown fp8 = stage_memory(s, l, 0);
  // Linear weights per layer: 4h² + 3·h·ffn = 67,108,864 + 135,266,304 = 202,375,168;
  // 32 layers; row-wise + transpose FP8 caches, 1 B each (linear.py:479-488).
  const std::int64_t linear = 32LL * 202'375'168;
  // Delayed scaling: 5 quantizers per GEMM (TE base.py:1139: 3 forward, 2
  // backward), each a scale + an amax history of 1, fp32.
  const std::int64_t scaling = 32LL * 4 * 5 * (1 + 1) * 4;
  CHECK(fp8[Category::kWeights] - bf16[Category::kWeights] == 2 * linear + scaling);
  CHECK(2 * linear == 12'952'010'752);
  // Saved inputs of QKV (h), out-proj (h), fc1 (h) and fc2 (ffn) shrink from
  // 2 to 1 byte: (3·4096 + 11008) x s 4096 x 1 B = 95,420,416 per layer, 32 layers.
  CHECK(bf16[Category::kActivations] - fp8[Category::kActivations] == 32LL * 95'420'416);
  // FP8 primary weights (--fp8-param-gather): 1-byte weight + 1-byte transpose = the bf16 weight's 2 B.
  s.training.fp8_param_gather = true;
  CHECK(stage_memory(s, l, 0)[Category::kWeights] - bf16[Category::kWeights] == scaling);
}
