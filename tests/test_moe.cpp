// Mixtures of experts (issue 16): expert-parallel layouts, expert weights and
// optimizer state per rank, and the activations of an MoE layer, each worked
// out by hand here from the models' published config.json files.
#include <catch2/catch.hpp>

#include "costmodel/activations.hpp"
#include "costmodel/memory.hpp"
#include "costmodel/spec.hpp"
#include "planner/spec_loader.hpp"
#include "test_helpers.hpp"

using namespace paraplan;

namespace {
Model mixtral() { return load_model_file(test::repo("tests/data/hf/mixtral-8x7b-v0.1/config.json")); }
Model deepseek_v3() { return load_model_file(test::repo("tests/data/hf/deepseek-v3/config.json")); }
// Mixtures of experts are modelled under Megatron-LM's profile only.
Spec moe_spec(const Model& m, int gpus, int seq, int gbs) {
  Spec s = test::spec_for(m, gpus, seq, gbs);
  s.training.framework = Framework::kMegatron;
  return s;
}
}  // namespace

TEST_CASE("ep and etp: parsed, printed, and checked against the model and the expert grid", "[moe][layout]") {
  Layout l = parse_layout("dp=8,tp=1,ep=8,etp=1,pp=1");
  CHECK(l.ep == 8);
  CHECK(l.etp == 1);
  CHECK(to_string(l).find(",ep=8,etp=1,pp=1") != std::string::npos);
  CHECK(parse_layout(to_string(l)) == l);
  // A dense layout prints as before.
  CHECK(to_string(parse_layout("dp=8,tp=1,pp=1")).find("ep=") == std::string::npos);
  CHECK_THROWS_AS(parse_layout("ep=0"), LayoutError);

  Spec s = moe_spec(mixtral(), 8, 4096, 64);
  // etp follows tp when not given (Megatron arguments.py:587-588).
  Layout a = parse_layout("tp=2,sp=1,ep=4");
  REQUIRE_FALSE(resolve_layout(s, &a));
  CHECK(a.etp == 2);
  CHECK(a.edp() == 1);  // tp 2 x dp 4 = 8 ranks = etp 2 x ep 4
  // num_experts 8 % ep 3.
  Layout b = parse_layout("tp=1,ep=3");
  auto pb = resolve_layout(s, &b);
  REQUIRE(pb);
  CHECK(pb->reason == Invalid::kEpExperts);
  CHECK(pb->field == "ep");
  // etp 2 x ep 8 = 16 does not divide tp x cp x dp = 8.
  Layout c = parse_layout("tp=1,ep=8,etp=2");
  auto pc = resolve_layout(s, &c);
  REQUIRE(pc);
  CHECK(pc->reason == Invalid::kExpertGrid);
  // MoE with tp > 1 and no sequence parallelism (moe_layer.py:636-639).
  Layout d = parse_layout("tp=2,sp=0,ep=4");
  auto pd = resolve_layout(s, &d);
  REQUIRE(pd);
  CHECK(pd->reason == Invalid::kMoeSp);
  CHECK(pd->field == "sp");
  // Another framework's profile: not modelled.
  Spec ds = s;
  ds.training.framework = Framework::kDeepSpeed;
  Layout f = parse_layout("tp=1,ep=8");
  auto pf = resolve_layout(ds, &f);
  REQUIRE(pf);
  CHECK(pf->reason == Invalid::kMoeFramework);
  // A dense model has no experts to split.
  Spec dense = test::spec_for(test::gpt_style(4, 1024, 16, 50304), 8, 1024, 64);
  Layout e = parse_layout("tp=1,ep=2");
  auto pe = resolve_layout(dense, &e);
  REQUIRE(pe);
  CHECK(pe->reason == Invalid::kEpDense);
}

TEST_CASE("Expert weights, gradients and optimizer state per rank for given ep and etp (Mixtral-8x7B)", "[moe][memory]") {
  const Model m = mixtral();
  // Per layer, one tp rank (tp = 1): attention 4096*4096*2 + 2*4096*1024 = 41,943,040, 2 RMSNorms 8,192,
  // router 8 x 4096 = 32,768: 41,984,000 outside the experts. One expert 3 x 4096 x 14336 = 176,160,768.
  // Embedding and output 32000 x 4096 each, final norm 4096.
  const std::int64_t non_expert = 41984000, one_expert = 176160768, ends = 2LL * 32000 * 4096 + 4096;
  {
    Spec s = moe_spec(m, 8, 4096, 64);
    Layout l = parse_layout("dp=8,tp=1,ep=8,etp=1,pp=1");
    REQUIRE_FALSE(resolve_layout(s, &l));
    const StageParams p = stage_params(m, l, 0);
    CHECK(p.moe_layers == 32);
    CHECK(p.expert == one_expert);  // 8 experts / ep 8 = 1 per rank
    CHECK(p.experts() == 32 * one_expert);
    CHECK(p.total() == 32 * (non_expert + one_expert) + ends);
    CHECK(p.total() == 7242780672LL);
  }
  {
    // ep 4: two experts per rank; etp 2 with tp 2: each expert's matrices halved,
    // the attention split over tp 2, router and norms whole.
    Spec s = moe_spec(m, 8, 4096, 64);
    Layout l = parse_layout("dp=4,tp=2,sp=1,ep=4,etp=2,pp=1");
    const auto problem = resolve_layout(s, &l);
    INFO((problem ? problem->message : std::string()));
    REQUIRE_FALSE(problem);
    const StageParams p = stage_params(m, l, 0);
    CHECK(p.expert == 2 * one_expert / 2);
    CHECK(p.moe_layer == 41943040 / 2 + 8192 + 32768);
    CHECK(p.embedding == 16000LL * 4096);
  }
  {
    // Megatron, distributed optimizer over 64 GPUs: dp 64, ep 8, etp 1, so the
    // expert data-parallel group is edp = 64 / 8 = 8. The 12 B of fp32 main
    // params + Adam m, v per parameter: (1,605,636,096 non-expert / 64 +
    // 5,637,144,576 expert / 8) x 12 = (25,088,064 + 704,643,072) x 12.
    Spec s = moe_spec(m, 8, 4096, 512);
    s.num_nodes = 8;
    s.training.framework = Framework::kMegatron;
    Layout l = parse_layout("dp=64,tp=1,ep=8,etp=1,pp=1,zero=1");
    const auto problem = resolve_layout(s, &l);
    INFO((problem ? problem->message : std::string()));
    REQUIRE_FALSE(problem);
    CHECK(l.edp() == 8);
    const MemoryBreakdown b = stage_memory(s, l, 0);
    CHECK(b[Category::kOptimizer] == (25088064LL + 704643072LL) * 12);
    // Weights (bf16) and the fp32 main_grad buffer stay whole on every rank.
    CHECK(b[Category::kWeights] == 7242780672LL * 2);
    CHECK(b[Category::kGradients] == 7242780672LL * 4);
  }
}

TEST_CASE("Activations of an MoE layer at top-k = 2 (Mixtral-8x7B), by hand", "[moe][activations]") {
  const Model m = mixtral();
  // Flash attention, no dropout, the plain op list (ActivationVariant{}), bf16.
  // Per token, tp = 1, etp = 1:
  //   attention: norm input h + QKV input h + Q 4096 + K 1024 + V 1024 + out-proj input 4096
  //     = 18,432 x 2 B = 36,864, + log-sum-exp 32 heads x 4 B = 36,992;
  //   MLP norm input 4096 x 2 = 8,192;
  //   router: input 8,192 + scores 8 x 4 + aux-loss scores 8 x 4 + routing map 8 x 1 = 8,264;
  //   permutation row indices 2 x 8 B = 16;
  //   experts (top-2): fc1 input 2 x 4096 x 2 = 16,384, SwiGLU input 2 x 28,672 x 2 = 114,688,
  //     permuted probabilities 2 x 4 = 8, fc2 input 2 x 14,336 x 2 = 57,344;
  //   = 36,992 + 8,192 + 8,264 + 16 + 16,384 + 114,688 + 8 + 57,344 = 241,888 B per token.
  const ActShape a{4096, 1, 1, false, 2, false, 1};
  CHECK(layer_activation_bytes(m, true, Recompute::kNone, a, {}, LayerKind::kMoe) == 241888LL * 4096);
  // The experts' part is top-k = 2 times a dense SwiGLU MLP of width 14,336 (fc1 input, SwiGLU input,
  // fc2 input: (4096 + 28672 + 14336) x 2 B), so an MoE layer holds one such MLP more than a dense
  // layer, plus the router's input (4096 x 2 B) and its bookkeeping (32 + 32 + 8 + 16 + 8 = 96 B).
  CHECK(layer_activation_bytes(m, true, Recompute::kNone, a, {}, LayerKind::kMoe) -
            layer_activation_bytes(m, true, Recompute::kNone, a, {}, LayerKind::kDense) ==
        ((4096LL + 28672 + 14336) * 2 + 4096 * 2 + 96) * 4096);
  // tp 2 with SP and etp 2: every tensor halves except the experts' fc1 input and the
  // permuted probabilities, which an expert rank gathers from its etp 2 ranks:
  //   (241,888 - 16,384 - 8) / 2 + 16,384 + 8 = 129,140 B per token.
  const ActShape a2{4096, 1, 2, true, 2, false, 2};
  CHECK(layer_activation_bytes(m, true, Recompute::kNone, a2, {}, LayerKind::kMoe) == 129140LL * 4096);
  // Full recompute keeps the layer input only, MoE or not.
  CHECK(layer_activation_bytes(m, true, Recompute::kFull, a, {}, LayerKind::kMoe) == 4096LL * 4096 * 2);
}

TEST_CASE("DeepSeek-V3: multi-latent attention and experts per rank, dense layers first", "[moe][memory][mla]") {
  const Model m = deepseek_v3();
  // 61 layers: 3 dense, then 58 MoE. pp 16 with 1 layer on the last stage
  // (Megatron --decoder-last-pipeline-num-layers 1): 60 layers over 15 stages, 4 each.
  Spec s = moe_spec(m, 8, 4096, 4096);
  s.num_nodes = 256;
  Layout l = parse_layout("dp=128,tp=1,ep=64,etp=1,pp=16,last_stage_layers=1,zero=1");
  REQUIRE_FALSE(resolve_layout(s, &l));
  CHECK(l.edp() == 2);
  const StageParams p0 = stage_params(m, l, 0), p1 = stage_params(m, l, 1), last = stage_params(m, l, 15);
  CHECK(p0.layers == 4);
  CHECK(p0.moe_layers == 1);  // layers 0-2 dense, 3 MoE
  CHECK(p1.moe_layers == 4);
  CHECK(last.layers == 1);
  CHECK(last.moe_layers == 1);
  // tp 1: attention 187,107,328 (as HF counts it), 2 norms 14,336; a dense MLP 3 x 7168 x 18432;
  // an MoE layer's non-expert part: router 256 x 7168 + bias 256 + one shared expert 3 x 7168 x 2048;
  // 256 / 64 = 4 routed experts of 44,040,192 per rank.
  CHECK(p0.layer == 187107328 + 14336 + 396361728);
  CHECK(p0.moe_layer == 187107328 + 14336 + 256 * 7168 + 256 + 44040192);
  CHECK(p0.expert == 4 * 44040192);
  // A dense layer's activations with multi-latent attention (flash, tp 1, bf16), per token:
  //   attention norm input 7168 + down-projection input 7168 + q latent norm input and q_up input 1536 x 2
  //   + kv latent norm input and kv_up input 512 x 2 + Q and K 128 x 192 each + V and out-proj input 128 x 128 each
  //   = 100,352 x 2 B + log-sum-exp 128 x 4 B = 201,216;
  //   MLP: norm input 7168 + fc1 input 7168 + SwiGLU input 36,864 + fc2 input 18,432 = 69,632 x 2 B = 139,264.
  const ActShape a{4096, 1, 1, false, 2, false, 1};
  CHECK(layer_activation_bytes(m, true, Recompute::kNone, a, {}, LayerKind::kDense) == (201216LL + 139264) * 4096);
  // tp 2 (etp 1): the MLA up projections (q_b 1536 x 128 x 192, kv_b 512 x 128 x 256) and the output
  // projection 128 x 128 x 7168 halve; q_a 7168 x 1536, kv_a 7168 x 576 and the latent norms stay whole.
  Spec s2 = s;
  Layout l2 = parse_layout("dp=64,tp=2,sp=1,ep=64,etp=1,pp=16,last_stage_layers=1,zero=1");
  REQUIRE_FALSE(resolve_layout(s2, &l2));
  CHECK(stage_params(m, l2, 1).moe_layer ==
        7168LL * 1536 + 1536 + 1536LL * 128 * 192 / 2 + 7168LL * 576 + 512 + 512LL * 128 * 256 / 2 +
            128LL * 128 * 7168 / 2 + 14336 + 256 * 7168 + 256 + 44040192 / 2);
}
