// Framework profiles: each stack's model-state buffers, activation variants and
// loss peak, checked against byte counts worked out by hand from the lines each
// profile cites (docs/frameworks.md) and from DeepSpeed's own estimator.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <tuple>

#include "costmodel/activations.hpp"
#include "costmodel/flops.hpp"
#include "costmodel/frameworks/profile.hpp"
#include "costmodel/memory.hpp"
#include "costmodel/time.hpp"
#include "planner/report.hpp"
#include "planner/search.hpp"
#include "test_helpers.hpp"

using namespace paraplan;

namespace {

constexpr std::int64_t kPsi = 6'738'415'616;  // Llama-2-7B weights (FACTS.md)
constexpr std::int64_t kS = 4096;

// Llama-2-7B on 8 GPUs, dp = 8, bf16, flash attention, under one framework;
// `layout` resolved into *l.
Spec llama7b_spec(Framework f, const char* layout, bool bf16_grads_given, Layout* l) {
  Spec s = test::spec_for(test::model("llama-2-7b"), 8, int(kS), 64);
  s.training.flash_attention = true;
  s.training.framework = f;
  s.training.grad_dtype_given = bf16_grads_given;
  *l = parse_layout(layout);
  const auto problem = resolve_layout(s, l);
  REQUIRE(!problem);
  return s;
}

MemoryBreakdown llama7b(Framework f, const char* layout, bool bf16_grads_given = false) {
  Layout l;
  const Spec s = llama7b_spec(f, layout, bf16_grads_given, &l);
  return stage_memory(s, l, 0);
}

// llama7b's term `name` (bytes -1 where it has none).
Term llama7b_find(Framework f, const char* layout, bool bf16_grads_given, const std::string& name) {
  Layout l;
  const Spec s = llama7b_spec(f, layout, bf16_grads_given, &l);
  for (const Term& t : stage_terms(s, l, 0))
    if (t.name == name) return t;
  return Term{Category::kTransient, name, "", -1, ""};
}

// The bytes of llama7b's term `name` (-1 where it has none).
std::int64_t llama7b_term(Framework f, const char* layout, bool bf16_grads_given, const std::string& name) {
  return llama7b_find(f, layout, bf16_grads_given, name).bytes;
}

// Every category but runtime and slack: the tensors a stage holds.
std::int64_t tensor_categories(const MemoryBreakdown& m) {
  std::int64_t t = 0;
  for (Category c : {Category::kWeights, Category::kGradients, Category::kOptimizer, Category::kActivations,
                     Category::kTransient, Category::kComm})
    t += m[c];
  return t;
}

}  // namespace

TEST_CASE("model state per framework, bytes per parameter by hand", "[memory][frameworks]") {
  const std::int64_t shard = kPsi / 8;  // 842,301,952 exactly
  SECTION("Megatron, distributed optimizer: 2 + 4 (fp32 main_grad, unsharded) + 12/d") {
    const MemoryBreakdown m = llama7b(Framework::kMegatron, "tp=1,pp=1,zero=1");
    CHECK(m[Category::kWeights] == 2 * kPsi);
    CHECK(m[Category::kGradients] == 4 * kPsi);
    CHECK(m[Category::kOptimizer] == 12 * shard);
  }
  SECTION("Megatron --grad-reduce-in-bf16: 2 + 2 + 12/d, and a 4/d fp32 copy of the grad shard at the step only") {
    const MemoryBreakdown m = llama7b(Framework::kMegatron, "tp=1,pp=1,zero=1", true);
    CHECK(m[Category::kGradients] == 2 * kPsi);
    CHECK(m[Category::kOptimizer] == 12 * shard);
    // The copy (4 x 842,301,952 B = 3.14 GiB) is allocated at the step, when
    // the activations of 32 layers at seq 4096 (over 10 GiB) are gone: it
    // raises nothing (distrib_optimizer.py:2792, dropped at zero_grad).
    const char* step = "optimizer step beyond the backward's peak";
    CHECK(m[Category::kActivations] > 4 * shard);
    CHECK(llama7b_term(Framework::kMegatron, "tp=1,pp=1,zero=1", true, step) == 0);
    // With the fp32 buffer (the default) .float() is the buffer itself: no step term at all.
    CHECK(llama7b_term(Framework::kMegatron, "tp=1,pp=1,zero=1", false, step) == -1);
  }
  SECTION("Megatron-FSDP (ZeRO 3) --grad-reduce-in-bf16: 2/d + 2/d + 12/d, the fp32 grad shard at the step only") {
    // Megatron-FSDP casts the rank's bf16 grad shard to its fp32 main weights' dtype when it attaches the grads
    // after the last backward (megatron_fsdp/param_and_grad_buffer.py:3377-3381) and zero_grad drops it
    // (:3189-3214): 4 x 842,301,952 B = 3.14 GiB, under the activations then gone, so 0 beyond the backward's peak.
    const MemoryBreakdown m = llama7b(Framework::kMegatron, "tp=1,pp=1,zero=3", true);
    CHECK(m[Category::kWeights] == 2 * shard);
    CHECK(m[Category::kGradients] == 2 * shard);
    CHECK(m[Category::kOptimizer] == 12 * shard);
    CHECK(m[Category::kActivations] > 4 * shard);
    const char* step = "optimizer step beyond the backward's peak";
    CHECK(llama7b_term(Framework::kMegatron, "tp=1,pp=1,zero=3", true, step) == 0);
    CHECK(llama7b_term(Framework::kMegatron, "tp=1,pp=1,zero=3", false, step) == -1);
    CHECK(llama7b_find(Framework::kMegatron, "tp=1,pp=1,zero=3", true, step)
              .source.find("megatron_fsdp/param_and_grad_buffer.py:3351-3406") != std::string::npos);
  }
  SECTION("Megatron without the distributed optimizer: 18 B/param (theoretical_memory_usage.py)") {
    const MemoryBreakdown m = llama7b(Framework::kMegatron, "tp=1,pp=1,zero=0");
    CHECK(m[Category::kWeights] + m[Category::kGradients] + m[Category::kOptimizer] == 18 * kPsi);
  }
  SECTION("DeepSpeed ZeRO-2 = its own estimator, 2P + 18P/N, plus the 5e8-element IPG bucket") {
    // estimate_zero2_model_states_mem_needs: 2 bf16 params + (2 bf16 grads +
    // 4 fp32 grads + 4 fp32 params + 8 Adam) / N.
    const MemoryBreakdown m = llama7b(Framework::kDeepSpeed, "tp=1,pp=1,zero=2");
    CHECK(m[Category::kWeights] + m[Category::kGradients] + m[Category::kOptimizer] == 2 * kPsi + 18 * shard);
    CHECK(m[Category::kComm] == 500'000'000LL * 2);
  }
  SECTION("DeepSpeed ZeRO-1: whole bf16 grads until the boundary, fp32 grad partition") {
    const MemoryBreakdown m = llama7b(Framework::kDeepSpeed, "tp=1,pp=1,zero=1");
    CHECK(m[Category::kGradients] == 2 * kPsi + 4 * shard);
    CHECK(m[Category::kOptimizer] == 12 * shard);
  }
  SECTION("DeepSpeed ZeRO-3: 18P/N + 2P/N (estimate_zero3_model_states_mem_needs, no offload)") {
    const MemoryBreakdown m = llama7b(Framework::kDeepSpeed, "tp=1,pp=1,zero=3");
    CHECK(m[Category::kWeights] + m[Category::kGradients] + m[Category::kOptimizer] == 20 * shard);
  }
  SECTION("nanotron, fp32 accumulation, no ZeRO, dp > 1: 2 + 4 + 2 (DDP buckets) + 12 = 20") {
    const MemoryBreakdown m = llama7b(Framework::kNanotron, "tp=1,pp=1,zero=0");
    CHECK(m[Category::kWeights] == 2 * kPsi);
    CHECK(m[Category::kGradients] == 6 * kPsi);
    CHECK(m[Category::kOptimizer] == 12 * kPsi);
  }
  SECTION("nanotron ZeRO-1: the fp32 buffer stays whole, only master + Adam shard") {
    const MemoryBreakdown m = llama7b(Framework::kNanotron, "tp=1,pp=1,zero=1");
    CHECK(m[Category::kGradients] == 6 * kPsi);
    CHECK(m[Category::kOptimizer] == 12 * shard);
  }
  SECTION("FSDP2: fp32 shard is the master copy: 4 + 4 + 8 over N") {
    const MemoryBreakdown m = llama7b(Framework::kFsdp, "tp=1,pp=1,zero=3");
    CHECK(m[Category::kWeights] == 4 * shard);
    CHECK(m[Category::kGradients] == 4 * shard);
    CHECK(m[Category::kOptimizer] == 8 * shard);
  }
}

TEST_CASE("a ZeRO stage or recompute policy the framework lacks is refused, naming it", "[memory][frameworks]") {
  Spec s = test::spec_for(test::model("llama-2-7b"), 8, 4096, 64);
  struct Case {
    Framework f;
    const char* layout;
    const char* field;
  };
  for (const Case& c : {Case{Framework::kNanotron, "tp=1,zero=2", "zero"}, Case{Framework::kNanotron, "tp=2,recompute=selective", "recompute"},
                        Case{Framework::kFsdp, "tp=1,zero=1", "zero"}, Case{Framework::kDeepSpeed, "tp=1,recompute=selective", "recompute"}}) {
    s.training.framework = c.f;
    Layout l = parse_layout(c.layout);
    const auto p = resolve_layout(s, &l);
    INFO(framework_name(c.f) << " " << c.layout);
    REQUIRE(p);
    CHECK(p->reason == Invalid::kFramework);
    CHECK(p->field == c.field);
    CHECK(p->message.find(framework_name(c.f)) != std::string::npos);
  }
  s.training.framework = Framework::kMegatron;
  Layout l = parse_layout("tp=1,zero=3,recompute=selective");
  CHECK(!resolve_layout(s, &l));
}

TEST_CASE("torchtitan's per-op selective AC: what a block keeps and what it re-runs, by hand", "[activations][frameworks]") {
  // pytorch/torchtitan@9dec370 parallelize_llama.py:214-285: inside a block's
  // checkpoint the outputs of the 1st, 3rd, 5th and 7th aten.mm (wq, wv, w1,
  // w2 of Llama's wq, wk, wv, wo, w1, w3, w2) and of flash SDPA (the output
  // and the fp32 log-sum-exp) are kept, with the block input. Llama-3.1-8B
  // (h 4096, 32 heads, 8 kv heads of 128, ffn 14,336), bf16, per token:
  // input 2·4096 + wq 2·4096 + wv 2·1024 + SDPA output 2·4096 + lse 4·32 +
  // w1 2·14,336 + w2 2·4096 = 8,192 + 8,192 + 2,048 + 8,192 + 128 + 28,672 +
  // 8,192 = 63,616 B (Megatron's selective on the same block keeps 8 h-wide
  // tensors and more).
  const Model m = test::model("llama-3.1-8b");
  const ActShape a{8192, 2, 1, false, 2};
  CHECK(layer_activation_bytes(m, true, Recompute::kSelective, a, fsdp_profile().act) == 63'616LL * 8192 * 2);
  // Re-run in the backward: wk (h x kv), wo (q x h) and w3 (h x ffn), 2
  // FLOPs per multiply-add, per token and layer: 2·(4096·1024 + 4096·4096 +
  // 4096·14,336) = 159,383,552; 32 layers (no flash: no attention re-run).
  CHECK(op_sac_recompute_flops(m, 1, 1, false) == Approx(32 * 159'383'552.0));
  // Where it is not modelled, the layout is refused with the reason.
  Spec s = test::spec_for(m, 8, 8192, 16);
  s.training.framework = Framework::kFsdp;
  s.training.flash_attention = true;
  for (const char* layout : {"dp=4,tp=2,zero=3,recompute=selective", "dp=4,cp=2,zero=3,recompute=selective"}) {
    Layout l = parse_layout(layout);
    const auto p = resolve_layout(s, &l);
    INFO(layout);
    REQUIRE(p);
    CHECK(p->field == "recompute");
    CHECK(p->message.find("per-op selective AC") != std::string::npos);
  }
  Layout ok = parse_layout("dp=8,zero=3,recompute=selective");
  CHECK(!resolve_layout(s, &ok));
  s.training.flash_attention = false;
  CHECK(resolve_layout(s, &ok));
}

TEST_CASE("nanotron's Llama layer saves more than the fused stack, op by op", "[activations][frameworks]") {
  // Llama-2-7B is MHA (32 kv heads): Q is a view of the contiguous
  // [3,b,s,a,d] copy and K, V are concatenated into a second copy: + 2·h·2 B;
  // the unfused GLU saves the SiLU output: + ffn·2 B; two RMSNorms save fp32
  // rstd: + 2·4 B. Per token: 16,384 + 22,016 + 8 = 38,408 B more than
  // paraplan's 131,712 B (tests/test_memory.cpp).
  const Model m = test::model("llama-2-7b");
  const ActShape a{kS, 1, 1, false, 2};
  CHECK(layer_activation_bytes(m, true, Recompute::kNone, a) == kS * 131'712);
  CHECK(layer_activation_bytes(m, true, Recompute::kNone, a, nanotron_profile().act) == kS * (131'712 + 38'408));
  // DeepSpeed runs the user's eager model (HF LlamaRMSNorm): each norm keeps an
  // fp32 upcast (4h) and the normalized bf16 tensor (2h) instead of its input
  // (2h): + 2 x 4·4096 = 32,768 B, besides the unfused SiLU output and stats.
  CHECK(layer_activation_bytes(m, true, Recompute::kNone, a, deepspeed_profile().act) ==
        kS * (131'712 + 22'016 + 8 + 32'768));
  // Megatron (fused SwiGLU, TE attention): only the norm statistics differ.
  CHECK(layer_activation_bytes(m, true, Recompute::kNone, a, megatron_profile().act) == kS * (131'712 + 8));
  // GQA (Llama-3.1-8B: 8 kv heads): the K, V copy replaces the split, no extra.
  const Model g = test::model("llama-3.1-8b");
  CHECK(layer_activation_bytes(g, true, Recompute::kNone, a, nanotron_profile().act) -
            layer_activation_bytes(g, true, Recompute::kNone, a) ==
        kS * (14336 * 2 + 8));
}

TEST_CASE("the loss's forward peak per framework: bytes per logit besides the saved softmax", "[memory][frameworks]") {
  // Last stage of Llama-3.1-8B with tp = 8 (16,032 vocab rows per rank),
  // seq 4096, mbs 1: logits = s·V/t = 65,667,072 elements. Megatron keeps the
  // bf16 logits beside its fp32 copy (max subtracted in place): 2 B; nanotron
  // frees the bf16 logits after the cast but makes a second fp32 tensor
  // (logits - max): 4 B. Per token, Megatron holds 16 B of fp32 row
  // statistics (max, sum, target logit, loss); nanotron 37 B (those + log(sum)
  // in fp32, int64 masked target and arange, bool mask). The layer backward
  // peaks lower, so the loss sets the transient term.
  const std::int64_t logits = kS * 128256 / 8;
  for (auto [f, per_logit, row] : {std::tuple{Framework::kMegatron, 2, 16}, std::tuple{Framework::kNanotron, 4, 37}}) {
    Spec s = test::spec_for(test::model("llama-3.1-8b"), 8, int(kS), 64);
    s.training.flash_attention = true;
    s.training.framework = f;
    Layout l = parse_layout("tp=8,pp=1,sp=1,zero=1");
    REQUIRE(!resolve_layout(s, &l));
    INFO(framework_name(f));
    CHECK(stage_memory(s, l, 0)[Category::kTransient] == logits * per_logit + row * kS);
  }
}

TEST_CASE("the loss's backward peak where autograd runs PyTorch's cross-entropy, by hand", "[memory][frameworks]") {
  // Llama-3.1-8B, tp = 1 (128,256 vocabulary rows), seq 4096, mbs 1: logits =
  // 4096 x 128,256 = 525,336,576. torchtitan (fsdp) and an HF model under
  // DeepSpeed run F.cross_entropy(logits.float()): the forward peaks at the
  // bf16 logits (2 B) + the fp32 copy (4 B) beside the saved softmax S (4 B);
  // the backward at nll_loss_backward's dense fp32 gradient G (4 B) and
  // log_softmax_backward's fp32 output dX (4 B) beside S: 8 B per logit of
  // transient (tests/oracle measures 12 B per logit with S). The bf16
  // logits, freed before the backward, leave a block too small for dX: 2 B
  // per logit reserved but not allocated. Megatron's and nanotron's
  // backwards are not modelled beyond their forward peak.
  const std::int64_t logits = kS * 128256;
  for (Framework f : {Framework::kFsdp, Framework::kDeepSpeed, Framework::kMegatron}) {
    Spec s = test::spec_for(test::model("llama-3.1-8b"), 8, int(kS), 64);
    s.cluster = test::cluster("dgx-h100");
    REQUIRE(s.cluster.fragmentation_modelled());
    s.training.flash_attention = true;
    s.training.framework = f;
    Layout l = parse_layout(f == Framework::kFsdp ? "dp=8,pp=1,zero=3,mbs=1" : "dp=8,pp=1,zero=1,mbs=1");
    REQUIRE(!resolve_layout(s, &l));
    INFO(framework_name(f));
    bool stranded = false;
    for (const Term& t : stage_terms(s, l, 0)) {
      if (t.name == std::string("short-lived buffers (peak)") && f != Framework::kMegatron) CHECK(t.bytes == 8 * logits);
      if (t.name == std::string("logits block stranded before the loss backward's fp32 output")) {
        stranded = true;
        CHECK(t.bytes == 2 * logits);
      }
    }
    CHECK(stranded == (f != Framework::kMegatron));
  }
}

TEST_CASE("torchtitan at tp > 1: the loss-parallel cross-entropy and DTensor SP's gathered inputs, by hand",
          "[memory][frameworks]") {
  // Llama-3.1-8B (h 4096, vocabulary 128,256), tp = 8 with sequence parallelism, seq 4096, mbs 1: 16,032
  // vocabulary rows per rank, logits = 4096 x 16,032 = 65,667,072. torchtitan's _LossParallelCrossEntropy
  // (torchtitan/components/loss.py:146-157, 201-215): the forward holds the bf16 logits L (2 B) and their fp32
  // copy F (4 B) while it makes shifted = F - max (4 B) and exp(shifted) (4 B): 14 B per logit, S (4 B) being
  // the saved log-probabilities that replace exp; the backward holds S beside zeros_like(S), exp(S) and their
  // sum (then the product): 16 B per logit, 12 B of it transient beside S. F.cross_entropy at tp = 1: 10 and 12.
  const std::int64_t logits = kS * 16'032;
  const Profile& fsdp = fsdp_profile();
  CHECK(loss_forward_peak_bytes(fsdp.loss_for(8), kS, 16'032, 2) == 14 * logits);
  CHECK(loss_backward_peak_bytes(fsdp.loss_for(8), kS, 16'032) == 16 * logits);
  CHECK(loss_forward_peak_bytes(fsdp.loss_for(1), kS, 16'032, 2) == 10 * logits);
  CHECK(loss_backward_peak_bytes(fsdp.loss_for(1), kS, 16'032) == 12 * logits);
  // Megatron's vocab-parallel loss is the one it has at tp = 1.
  CHECK(&megatron_profile().loss_for(8) == &megatron_profile().loss);

  Spec s = test::spec_for(test::model("llama-3.1-8b"), 8, int(kS), 8);
  s.cluster = test::cluster("dgx-h100");
  REQUIRE(s.cluster.fragmentation_modelled());
  s.training.flash_attention = true;
  s.training.framework = Framework::kFsdp;
  Layout l = parse_layout("tp=8,sp=1,pp=1,zero=3,recompute=full,mbs=1");
  REQUIRE(!resolve_layout(s, &l));
  // The output layer's input is all-gathered to Replicate before lm_head and saved whole: 2 B x 4096 x 4096 =
  // 33,554,432 B, beside the final norm's input, the rank's sequence shard 2 B x 512 x 4096 = 4,194,304 B
  // (Megatron saves the shard for both: 8,388,608 B).
  bool head = false, stranded = false, transient = false;
  for (const Term& t : stage_terms(s, l, 0)) {
    INFO(t.name << ": " << t.formula);
    if (t.name == std::string("final norm + output layer inputs")) {
      head = true;
      CHECK(t.bytes == 33'554'432 + 4'194'304);
    }
    if (t.name == std::string("short-lived buffers (peak)")) {
      transient = true;
      CHECK(t.bytes == 12 * logits);  // the loss backward's, above one recomputed layer's
      CHECK(t.formula.find("zeros_like(log_probs)") != std::string::npos);
      CHECK(t.source.find("loss.py:201-215") != std::string::npos);
    }
    if (t.name == std::string("logits block stranded before the loss backward's fp32 output")) {
      stranded = true;
      CHECK(t.bytes == 2 * logits);
    }
  }
  CHECK((head && transient && stranded));

  // Without recompute the attention's and the MLP's gathered inputs are saved whole too: 2 x (4096 - 512) x
  // 4096 x 2 B = 58,720,256 B more per layer than the rank's sequence shards.
  const Model m = test::model("llama-3.1-8b");
  ActivationVariant shard = fsdp.act;
  shard.sp_saves_gathered_linear_inputs = false;
  const ActShape a{kS, 1, 8, true, 2};
  CHECK(layer_activation_bytes(m, true, Recompute::kNone, a, fsdp.act) -
            layer_activation_bytes(m, true, Recompute::kNone, a, shard) ==
        58'720'256);
  // No difference without sequence parallelism (every rank holds the whole sequence anyway).
  const ActShape no_sp{kS, 1, 8, false, 2};
  CHECK(layer_activation_bytes(m, true, Recompute::kNone, no_sp, fsdp.act) ==
        layer_activation_bytes(m, true, Recompute::kNone, no_sp, shard));
}

TEST_CASE("allocator rounding of saved activations, by hand", "[memory][allocator]") {
  // Llama-2-7B layer, s = 4000, b = 1, tp = 1, flash attention. Requests of
  // 10 MiB or more get segments rounded up to 2 MiB (CUDACachingAllocator.cpp):
  // eight h-wide tensors of 2·4000·4096 = 32,768,000 B (31.25 MiB -> 32 MiB,
  // slack 786,432 each), the SwiGLU input 2·4000·22016 = 176,128,000 B
  // (-> 168 MiB, slack 32,768), the fc2 input 2·4000·11008 = 88,064,000 B
  // (-> 84 MiB, slack 16,384); the 512,000 B log-sum-exp is below 10 MiB.
  const Model m = test::model("llama-2-7b");
  CHECK(layer_rounding_slack(m, true, Recompute::kNone, ActShape{4000, 1, 1, false, 2}) ==
        8 * 786'432 + 32'768 + 16'384);
  // Full recompute keeps the layer input only.
  CHECK(layer_rounding_slack(m, true, Recompute::kFull, ActShape{4000, 1, 1, false, 2}) == 786'432);
}

TEST_CASE("expandable segments (torchtitan's launcher): no segment rounding of saved activations", "[memory][allocator]") {
  // Llama-2-7B, s = 4000, one rank, no recompute: under DeepSpeed (the default allocator) each of the 32 layers'
  // full-recompute input x = 2·4000·4096 = 32,768,000 B rounds up to 32 MiB (786,432 B of slack); torchtitan
  // launches with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, whose blocks are split from one growing
  // segment at 512 B (32,768,000 is a multiple of 512): no slack.
  for (Framework f : {Framework::kDeepSpeed, Framework::kFsdp}) {
    Spec s = test::spec_for(test::model("llama-2-7b"), 8, 4000, 64);
    s.cluster = test::cluster("dgx-h100");
    REQUIRE(s.cluster.fragmentation_modelled());
    s.training.flash_attention = true;
    s.training.framework = f;
    Layout l = parse_layout("dp=8,pp=1,zero=3,recompute=full,mbs=1");
    REQUIRE(!resolve_layout(s, &l));
    INFO(framework_name(f));
    bool seen = false;
    for (const Term& t : stage_terms(s, l, 0))
      if (t.name == std::string("segment rounding of saved activations")) {
        seen = true;
        CHECK(t.bytes == (f == Framework::kFsdp ? 0 : 32 * 786'432));
        if (f == Framework::kFsdp) CHECK(t.source.find("expandable_segments:True") != std::string::npos);
      }
    CHECK(seen);
  }
}

TEST_CASE("allocated, reserved and device bytes with the runtime modelled, by hand", "[memory][frameworks]") {
  // Llama-2-7B under nanotron, tp = 2 with sequence parallelism, dp = 4,
  // mbs 1, seq 4096, on the H100 cluster with no runtime_overhead_gib or
  // fragmentation given, so both are modelled.
  Spec s = test::spec_for(test::model("llama-2-7b"), 8, int(kS), 64);
  s.cluster = test::cluster("dgx-h100");
  REQUIRE(s.cluster.runtime_modelled());
  REQUIRE(s.cluster.fragmentation_modelled());
  s.training.flash_attention = true;
  s.training.framework = Framework::kNanotron;
  Layout l = parse_layout("tp=2,sp=1,pp=1,zero=1,mbs=1");
  REQUIRE(!resolve_layout(s, &l));
  const MemoryBreakdown m = stage_memory(s, l, 0);
  // Runtime: CUDA context 0.685 GiB (measured on an H100: dgx-h100.yaml) =
  // 735,513,149 B + 2 communicators (tp, dp) x 294 MiB + the 33 MiB cuBLAS
  // workspace (inside the caching allocator).
  const std::int64_t mib = 1 << 20, context = 735'513'149;
  CHECK(m[Category::kRuntime] == context + 2 * 294 * mib + 33 * mib);
  CHECK(m.runtime_in_allocator == 33 * mib);
  // Comm: the persistent "allgather" buffer 2·s·h = 33,554,432 B. The two
  // row-parallel outputs per layer held for their reduce-scatter, 2 x 32
  // layers x 2·s·h = 2,147,483,648 B, count in reserved only: freed by the
  // framework, they leave allocated at once, their segments waiting for the
  // stream (DeviceCachingAllocator::free).
  CHECK(m[Category::kComm] == 33'554'432);
  CHECK(m.held_for_streams == 2'147'483'648LL);
  // Slack: the SiLU output and the fc2 input are 2·4096·11008/2 = 43 MiB
  // each, in 44 MiB segments: 1 MiB each, 2 MiB x 32 layers (every other saved
  // tensor is a whole number of 2 MiB); and the bf16 logits block stranded
  // before the second fp32 logits tensor: 2 B x 4096 x 16,000 vocab rows.
  const std::int64_t slack = 32 * 2 * mib + 131'072'000;
  CHECK(m[Category::kFragmentation] == slack);
  CHECK(m.device() == m.total());
  CHECK(m.reserved() == m.allocated() + slack + 2'147'483'648LL);
  CHECK(m.device() == m.reserved() - 2'147'483'648LL + context + 2 * 294 * mib);
  // The allocated figure is every category but runtime and slack, + the
  // cuBLAS workspace.
  CHECK(m.allocated() == tensor_categories(m) + 33 * mib);
  // The check line says why reserved can exceed what is on the device: the 2 GiB held for the stream.
  const std::string line = check_summary(s, l, estimate_memory(s, l));
  INFO(line);
  CHECK(line.find(", 2.00 of them blocks held for the NCCL stream, which a failed allocation frees first)") !=
        std::string::npos);
  // Under megatron the same 2 GiB count in allocated as well (Megatron-LM's goldens measure them there), so
  // reserved is allocated + slack alone.
  s.training.framework = Framework::kMegatron;
  const MemoryBreakdown g = stage_memory(s, l, 0);
  CHECK(g.held_for_streams == 2'147'483'648LL);
  CHECK(g.held_in_allocated);
  CHECK(g.allocated() == tensor_categories(g) + g.runtime_in_allocator + 2'147'483'648LL);
  CHECK(g.reserved() == g.allocated() + g[Category::kFragmentation]);
  CHECK(!m.held_in_allocated);
}

TEST_CASE("stream-held blocks fill only the memory left over", "[memory][allocator]") {
  // nanotron, Llama-2-7B, tp = 2, mbs = 4: the held reduce-scatter inputs
  // would be 2 x 32 x 2·4096·4·4096 B = 8 GiB, more than the memory the rest
  // leaves; the allocator frees them before it fails, so reserved stops at
  // the GPU's memory (less what lives outside the allocator) and device bytes
  // never include them.
  Spec s = test::spec_for(test::model("llama-2-7b"), 8, int(kS), 128);
  s.cluster = test::cluster("dgx-h100");
  s.training.flash_attention = true;
  s.training.framework = Framework::kNanotron;
  Layout l = parse_layout("tp=2,sp=1,pp=1,zero=1,mbs=4");
  REQUIRE(!resolve_layout(s, &l));
  const MemoryBreakdown m = stage_memory(s, l, 0);
  const std::int64_t gpu = gpu_memory_bytes(s.cluster);
  INFO("device " << m.total() << " held " << m.held_for_streams);
  CHECK(m.held_for_streams > 0);
  CHECK(m.held_for_streams < 8LL << 30);
  CHECK(m.total() - m[Category::kFragmentation] + m.held_for_streams == gpu);
}

TEST_CASE("A layout that fits only if the allocator frees the held reduce-scatter inputs is flagged", "[memory][allocator]") {
  // nanotron's 3B benchmark model (28 layers, h 3072) on 16 p5 nodes, seq
  // 4096, dp 8 tp 16 (sequence parallel) micro-batch 32: the Playbook ran it
  // twice (61.9 and 68.2 GiB) and crashed its dp 1 twin on 2 nodes. Held with
  // the host a forward ahead: 2 row-parallel outputs x 28 layers x 2 B x 4096
  // x 32 x 3072 = 45,097,156,608 B (42 GiB), beyond the memory the rest leaves.
  Spec s;
  s.model = test::model("nanotron-bench-3b");
  s.cluster = test::cluster("h100-aws-p5");
  s.num_nodes = 16;
  s.search.allow_tp_across_nodes = true;
  s.training.framework = Framework::kNanotron;
  s.training.seq_length = 4096;
  s.training.global_batch_size = 256;
  s.training.flash_attention = true;
  const auto held_at = [&](const char* layout, std::int64_t wanted, bool flagged) {
    Layout l = parse_layout(layout);
    REQUIRE(!resolve_layout(s, &l));
    const MemoryEstimate e = estimate_memory(s, l);
    INFO(layout << ": device " << e.device_bytes << ", with held " << e.with_held_bytes << ", usable " << e.usable_bytes);
    CHECK(e.heaviest().held_wanted == wanted);
    CHECK(e.with_held_bytes == e.device_bytes + wanted);
    CHECK(e.fits);
    CHECK(e.flush_risk == flagged);
    CHECK(memory_warning_message(e).empty() == !flagged);
    // The search's fast path agrees, and ranks the layout as warned.
    const Candidate c = evaluate(s, l);
    CHECK(c.with_held_bytes == e.with_held_bytes);
    CHECK(c.flush_risk == flagged);
    CHECK(c.warned() == (flagged || c.time.warnings != 0));
    return e;
  };
  const MemoryEstimate e = held_at("dp=8,tp=16,sp=1,zero=0,mbs=32", 45'097'156'608LL, true);
  // Only 38.4 of the 42 GiB fit beside the rest: reserved stops at the GPU's memory.
  CHECK(e.heaviest().held_for_streams < 45'097'156'608LL);
  const std::string w = memory_warning_message(e);
  CHECK(w.find("fits only if the caching allocator flushes mid-step") != std::string::npos);
  CHECK(w.find("release_cached_blocks") != std::string::npos);
  // explain prints it on a line of its own below the verdict.
  const std::string text = render_explain(Format::kTable, s, parse_layout("dp=8,tp=16,pp=1,sp=1,zero=0,mbs=32"), e, ExplainOptions{});
  CHECK(text.find("\nwarning: fits only if the caching allocator flushes") != std::string::npos);
  // Micro-batch 16: 22,548,578,304 B (21 GiB) held beside about 24 GiB: no flush.
  held_at("dp=8,tp=16,sp=1,zero=0,mbs=16", 22'548'578'304LL, false);
  // No sequence parallelism (tp 1): nothing is reduce-scattered, nothing held.
  held_at("dp=128,tp=1,zero=1,mbs=1", 0, false);
}

TEST_CASE("DeepSpeed pipeline with tp > 1: stage outputs kept as 1/tp partitions, and the fp16 step peak", "[memory][deepspeed]") {
  // GPT-style, 16 layers of h 1024 (16 heads), vocab 51200, seq 256, micro-batch 1; tp 2 x pp 4 on the CPU host
  // (no runtime, no allocator slack), fp16, ZeRO 0, full recompute, 16 micro-batches: stage s holds 4 - s of them.
  Spec s = test::spec_for(test::gpt_style(16, 1024, 16, 51200), 8, 256, 16);
  s.training.framework = Framework::kDeepSpeed;
  s.training.precision = s.training.grad_dtype = DType::kFp16;
  Layout l = parse_layout("tp=2,pp=4,zero=0,recompute=full,mbs=1");
  REQUIRE(!resolve_layout(s, &l));
  REQUIRE(l.dp == 1);
  const auto term = [&](int stage, const std::string& name) -> std::int64_t {
    for (const Term& t : stage_terms(s, l, stage))
      if (t.name == name) return t.bytes;
    return -1;
  };
  // DeepSpeed keeps each in-flight stage output as its 1/tp partition: [s 256, b 1, h 1024] x 2 B / tp 2 = 256 KiB.
  const char* part = "pipeline stage outputs kept partitioned";
  CHECK(term(0, part) == 4 * 256 * 1024);
  CHECK(term(2, part) == 2 * 256 * 1024);
  CHECK(term(3, part) == -1);  // the last stage sends nothing forward
  // The fp16 optimizer's step: fp32 copies of every gradient, 4 B x 25,204,736 parameters on a middle stage
  // (4 layers x (12 h^2 / tp 2 + qkv bias 3h/2 + out bias h + fc1 bias 4h/2 + fc2 bias h + 2 norms x 2h)
  // = 4 x 6,301,184), beyond what the backward's activations and short-lived buffers had freed.
  const MemoryBreakdown m2 = stage_memory(s, l, 2);
  const std::int64_t psi = 25'204'736;
  CHECK(stage_params(s.model, l, 2).total() == psi);
  const std::int64_t step = term(2, "optimizer step beyond the backward's peak");
  const std::int64_t freed = m2[Category::kActivations] + m2[Category::kTransient] - step;
  CHECK(step == std::max<std::int64_t>(0, 4 * psi - freed));
  // Here the step is the peak (96 MiB of copies against 2 micro-batches of 4 layer inputs of 0.5 MiB and one layer's
  // backward): the stage then holds 2 + 2 + 12 + 4 = 20 B per parameter and its pipeline send buffers.
  CHECK(step > 0);
  CHECK(m2.total() == 20 * psi + m2[Category::kComm]);
  // Megatron's pipeline keeps no such partition, and with its fp32 main_grad buffer (the default) its step makes
  // no copies.
  s.training.framework = Framework::kMegatron;
  s.training.grad_dtype = DType::kFp32;
  s.training.grad_dtype_given = false;
  CHECK(term(0, part) == -1);
  CHECK(term(2, "optimizer step beyond the backward's peak") == -1);
  // With a 16-bit main_grad and no distributed optimizer its step casts every gradient to fp32
  // (megatron/core/optimizer/optimizer.py:1092-1099): 2 + 2 + 12 + 4 = 20 B per parameter there too.
  s.training.grad_dtype = DType::kFp16;
  s.training.grad_dtype_given = true;
  const MemoryBreakdown g2 = stage_memory(s, l, 2);
  CHECK(term(2, "optimizer step beyond the backward's peak") > 0);
  CHECK(g2.total() == 20 * psi + g2[Category::kComm]);
}

TEST_CASE("every term explain prints, under every profile, names its source", "[memory][time][frameworks]") {
  // Issue 13: every profile term carries a citation. Layouts chosen to raise each term somewhere: the batch and the
  // embedding (first stage), the output layer and loss (last), pipeline sends, the whole tied-embedding gradient
  // (ZeRO >= 2 with pp > 1 and tied embeddings), ZeRO-3's gathered groups, FSDP's unsharded ZeRO-2, the reduce
  // buckets, sequence parallelism, the context-parallel ring, Megatron's grouped recompute.
  const char* layouts[] = {"dp=2,tp=2,pp=2,sp=1,zero=1,recompute=selective,mbs=1",
                           "dp=2,tp=2,pp=2,sp=1,zero=0,recompute=none,mbs=1",
                           "dp=4,pp=2,zero=2,recompute=full,mbs=1",
                           "dp=4,pp=2,zero=3,recompute=none,mbs=2",
                           "dp=8,zero=3,recompute=full,mbs=1",
                           "dp=8,zero=2,recompute=none,mbs=1",
                           "dp=4,tp=2,sp=1,zero=1,recompute=none,mbs=1",
                           "dp=2,cp=2,tp=2,sp=1,zero=1,recompute=none,mbs=1",
                           "dp=2,tp=2,pp=2,sp=1,zero=1,recompute=full,recompute_method=uniform,recompute_layers=2,mbs=1"};
  std::set<std::string> all;
  for (Framework f : {Framework::kMegatron, Framework::kDeepSpeed, Framework::kFsdp, Framework::kNanotron,
                      Framework::kParaplan}) {
    int checked = 0;
    std::set<std::string> names;
    for (const char* model : {"tiny-gpt", "llama-3.1-8b"}) {
      for (const char* text : layouts) {
        Spec s = test::spec_for(test::model(model), 8, 1024, 64);
        s.cluster = test::cluster("dgx-h100");
        s.training.framework = f;
        s.training.flash_attention = true;
        Layout l = parse_layout(text);
        if (resolve_layout(s, &l)) continue;  // a layout the framework or model refuses
        ++checked;
        for (int stage = 0; stage < l.pp; ++stage) {
          for (const Term& t : stage_terms(s, l, stage)) {
            INFO(framework_name(f) << ", " << model << ", " << text << ", stage " << stage << ": " << t.name);
            names.insert(t.name);
            CHECK(!t.source.empty());
          }
          // The time terms too: one micro-batch's, and the step's data-parallel collectives.
          std::vector<TimeTerm> times = stage_time_terms(s, l, stage);
          for (TimeTerm& t : stage_dp_terms(s, l, stage)) times.push_back(t);
          for (const TimeTerm& t : times) {
            INFO(framework_name(f) << ", " << model << ", " << text << ", stage " << stage << ", time: " << t.name);
            CHECK(!t.source.empty());
          }
        }
      }
    }
    INFO(framework_name(f) << ": " << checked << " layouts, " << names.size() << " distinct terms");
    CHECK(checked >= 4);  // nanotron refuses ZeRO 2-3, selective recompute and cp: 4 of these run
    CHECK(names.count("token ids") == 1);
    CHECK(names.count("labels") == 1);
    CHECK(names.count("pipeline send buffers") == 1);
    CHECK(names.count("short-lived buffers (peak)") == 1);
    CHECK(names.count("final norm + output layer inputs") == 1);
    all.insert(names.begin(), names.end());
  }
  for (const char* name : {"tied embedding gradient (whole)", "embedding dropout masks", "ZeRO-3 gathered parameters",
                           "unsharded parameters (kept through backward)", "gradient reduce-scatter bucket",
                           "IPG reduce bucket", "unsharded gradients + reduce-scatter input (one group)"}) {
    INFO(name);
    CHECK(all.count(name) == 1);
  }
}
