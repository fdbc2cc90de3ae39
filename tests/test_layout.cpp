// The canonical layout form, Megatron-LM arguments and DeepSpeed configs.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <algorithm>

#include "costmodel/layout.hpp"
#include "costmodel/memory.hpp"
#include "planner/layout_source.hpp"
#include "test_helpers.hpp"

using namespace paraplan;

TEST_CASE("canonical layout text round-trips", "[layout]") {
  const char* text = "dp=8,tp=8,pp=4,vpp=2,sp=1,zero=1,recompute=selective,mbs=1,schedule=1f1b";
  const Layout l = parse_layout(text);
  CHECK(l.dp == 8);
  CHECK(l.tp == 8);
  CHECK(l.pp == 4);
  CHECK(l.vpp == 2);
  CHECK(l.sp);
  CHECK(l.zero == 1);
  CHECK(l.recompute == Recompute::kSelective);
  CHECK(l.interleaved());
  CHECK(to_string(l) == text);
  CHECK(parse_layout(to_string(l)) == l);
}

TEST_CASE("uneven stages are printed only when set, and round-trip", "[layout][uneven]") {
  const Layout l = parse_layout("dp=128,tp=8,pp=16,first_stage_layers=7,last_stage_layers=7");
  CHECK(l.first_stage_layers == 7);
  CHECK(l.last_stage_layers == 7);
  CHECK(l.uneven());
  CHECK(to_string(l) == "dp=128,tp=8,pp=16,vpp=1,sp=0,zero=0,recompute=none,mbs=1,schedule=1f1b,"
                        "first_stage_layers=7,last_stage_layers=7");
  CHECK(parse_layout(to_string(l)) == l);
  CHECK(to_string(parse_layout("pp=2,last_stage_layers=3")).find("first_stage_layers") == std::string::npos);
  CHECK(to_string(parse_layout("pp=2")).find("stage_layers") == std::string::npos);
}

TEST_CASE("stage_split: Megatron-LM's uneven split (transformer_block.py:103-143)", "[layout][uneven]") {
  auto split = [](int L, const char* text, StageSplit* out) { return stage_split(L, parse_layout(text), out); };
  StageSplit sp;
  REQUIRE(split(126, "pp=16,first_stage_layers=7,last_stage_layers=7", &sp));
  CHECK(sp.first == 7);
  CHECK(sp.middle == 8);  // (126 − 14) / 14
  CHECK(sp.last == 7);
  REQUIRE(split(32, "pp=4,first_stage_layers=5", &sp));
  CHECK(sp.first == 5);
  CHECK(sp.middle == 9);  // (32 − 5) / 3
  CHECK(sp.last == 9);
  REQUIRE(split(9, "pp=2,first_stage_layers=4", &sp));
  CHECK(sp.last == 5);
  CHECK_FALSE(split(32, "pp=4,first_stage_layers=6", &sp));               // 26 over 3
  CHECK_FALSE(split(32, "pp=2,first_stage_layers=16,last_stage_layers=15", &sp));  // 1 layer left, no stage
  CHECK_FALSE(split(32, "pp=4,vpp=2,first_stage_layers=5,last_stage_layers=9", &sp));  // 5 % 2
  REQUIRE(split(32, "pp=4,vpp=2,first_stage_layers=6,last_stage_layers=10", &sp));
  CHECK(sp.middle == 8);
  CHECK_FALSE(split(32, "pp=1,first_stage_layers=32", &sp));
}

TEST_CASE("unnamed fields take defaults - interleaved is 1f1b with vpp", "[layout]") {
  const Layout l = parse_layout(" tp = 2 , pp=2 ");
  CHECK(l.dp == 0);  // derived from the GPU count later
  CHECK(l.vpp == 1);
  CHECK(l.zero == 0);
  CHECK(l.mbs == 1);
  CHECK(l.recompute == Recompute::kNone);
  CHECK(l.schedule == Schedule::k1F1B);
  CHECK(parse_layout("pp=2,vpp=2,schedule=interleaved").interleaved());
}

TEST_CASE("bad layout text names the field", "[layout]") {
  struct Case {
    const char* text;
    const char* field;
  };
  for (const Case c : {Case{"tp=0", "tp"}, Case{"tp=two", "tp"}, Case{"zero=4", "zero"},
                       Case{"recompute=partial", "recompute"}, Case{"sp=2", "sp"},
                       Case{"foo=1", "foo"}, Case{"tp", "tp"}, Case{"schedule=interleaved", "schedule"},
                       Case{"", "layout"}}) {
    INFO(c.text);
    try {
      parse_layout(c.text);
      FAIL("expected a LayoutError");
    } catch (const LayoutError& e) {
      CHECK(e.field() == c.field);
    }
  }
}

TEST_CASE("resolve_layout derives dp and rejects impossible layouts", "[layout]") {
  Spec s = test::spec_for(test::model("llama-3.1-70b"), 8, 8192, 64);
  s.num_nodes = 8;  // 64 GPUs
  Layout l = parse_layout("tp=8,pp=4,vpp=5");
  REQUIRE(!resolve_layout(s, &l));
  CHECK(l.dp == 2);
  struct Case {
    const char* text;
    Invalid reason;
  };
  for (const Case c : {Case{"dp=3,tp=8,pp=4", Invalid::kGpuCount},
                       Case{"tp=3,pp=1,dp=1", Invalid::kGpuCount},
                       Case{"tp=16,pp=4", Invalid::kKvHeadsTp},  // 8 kv heads
                       Case{"tp=8,pp=3", Invalid::kGpuCount},
                       Case{"tp=4,pp=16,vpp=2", Invalid::kLayersPp},  // 80 % 32
                       Case{"tp=8,pp=8,mbs=3", Invalid::kBatch},      // 64 % 3
                       Case{"tp=8,pp=4,vpp=2,mbs=4", Invalid::kInterleavedMicrobatches},  // m = 8? no: 64/(2·4) = 8 ok
                       Case{"tp=8,pp=1,vpp=2", Invalid::kVpp}}) {
    Layout x = parse_layout(c.text);
    s.search.allow_tp_across_nodes = true;
    const auto p = resolve_layout(s, &x);
    INFO(c.text);
    if (c.reason == Invalid::kInterleavedMicrobatches) {
      CHECK(!p);  // 8 micro-batches divide pp 4: valid
      continue;
    }
    REQUIRE(p);
    CHECK(p->reason == c.reason);
  }
  // 64 / (dp 2 · mbs 4) = 8 micro-batches; pp 16 would need them divisible by 16.
  Spec s2 = s;
  s2.training.global_batch_size = 24;
  Layout y = parse_layout("tp=8,pp=4,vpp=5,mbs=1");  // m = 12, 12 % 4 == 0
  CHECK(!resolve_layout(s2, &y));
  s2.training.global_batch_size = 20;  // m = 10, 10 % 4 != 0
  Layout z = parse_layout("tp=8,pp=4,vpp=5,mbs=1");
  const auto pz = resolve_layout(s2, &z);
  REQUIRE(pz);
  CHECK(pz->reason == Invalid::kInterleavedMicrobatches);
}

TEST_CASE("Megatron-LM arguments give the same layout", "[layout][megatron]") {
  Spec s = test::spec_for(test::model("llama-3.1-70b"), 8, 8192, 64);
  s.num_nodes = 8;
  LayoutRequest r;
  r.megatron_args =
      "--num-layers 80 --hidden-size 8192 --tensor-model-parallel-size 8 \\\n"
      " --pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 4 "
      "--sequence-parallel --recompute-granularity selective --micro-batch-size 1 "
      "--use-distributed-optimizer --global-batch-size 128 --lr 3e-4 --bf16";
  const Layout l = layout_from_sources(&s, "spec.yaml", r);
  CHECK(to_string(l) == "dp=2,tp=8,pp=4,vpp=5,sp=1,zero=1,recompute=selective,mbs=1,schedule=1f1b");
  CHECK(s.training.global_batch_size == 128);
  // A model-shape flag that disagrees with the spec is an error naming the flag.
  Spec s2 = s;
  r.megatron_args = "--num-layers 32 --tensor-model-parallel-size 8";
  CHECK_THROWS_WITH(layout_from_sources(&s2, "spec.yaml", r), Catch::Contains("80"));
}

TEST_CASE("Which Megatron-LM flags express uneven first/last stages, by Megatron's own rules", "[layout][megatron][uneven]") {
  // NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/transformer_config.py:2294-2368
  // (--decoder-first/last-pipeline-num-layers: every rank's layers divisible by vpp) and
  // :2370-2410 (--account-for-embedding/loss-in-pipeline-split: (L + 1 or 2) / pp per rank,
  // divisible by vpp, the first / last rank one real layer short).
  auto form = [](int layers, const std::string& layout) { return uneven_form(layers, parse_layout(layout)); };
  CHECK(form(126, "tp=8,pp=16") == UnevenForm::kEven);
  CHECK(form(126, "tp=8,pp=16,first_stage_layers=7,last_stage_layers=7") == UnevenForm::kDecoderLayers);
  CHECK(form(126, "tp=8,pp=16,vpp=2,first_stage_layers=6,last_stage_layers=8") == UnevenForm::kDecoderLayers);
  // 126 + 2 = 128 = 16 x 8, 8 % 8 = 0: both ends one short.
  CHECK(form(126, "tp=8,pp=16,vpp=8,first_stage_layers=7,last_stage_layers=7") == UnevenForm::kAccountFor);
  // 6 is not 8 - 1, and 6 % 8 != 0.
  CHECK(form(126, "tp=8,pp=16,vpp=8,first_stage_layers=6,last_stage_layers=8") == UnevenForm::kNone);
  // DeepSeek-V3's 61 layers on 2 ranks of 31 chunks: 61 + 1 = 62 = 2 x 31, the embedding counted:
  // 30 + 31, the last rank given explicitly or not.
  CHECK(form(61, "tp=1,pp=2,vpp=31,first_stage_layers=30,last_stage_layers=31") == UnevenForm::kAccountFor);
  CHECK(form(61, "tp=1,pp=2,vpp=31,first_stage_layers=30") == UnevenForm::kAccountFor);
  // 80 layers, 6 ranks of 7 chunks: 12 + 4 x 14 + 12: 12 % 7 != 0 and 12 != 14 - 1.
  CHECK(form(80, "tp=1,pp=6,vpp=7,first_stage_layers=12,last_stage_layers=12") == UnevenForm::kNone);
  StageSplit split;
  CHECK_FALSE(stage_split(80, parse_layout("tp=1,pp=6,vpp=7,first_stage_layers=12,last_stage_layers=12"), &split));
  CHECK(stage_split(80, parse_layout("tp=1,pp=6,vpp=2,first_stage_layers=12,last_stage_layers=12"), &split));
}

TEST_CASE("Meta's Llama-3.1-405B layout from Megatron-LM arguments: uneven first and last stages (issue 14)",
          "[layout][megatron][uneven]") {
  Spec s = test::spec_for(test::model("llama-3.1-405b"), 8, 8192, 2048);
  s.num_nodes = 2048;  // 16,384 GPUs
  LayoutRequest r;
  r.megatron_args =
      "--num-layers 126 --tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 "
      "--decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7 --sequence-parallel "
      "--use-distributed-optimizer --micro-batch-size 1 --global-batch-size 2048";
  const Layout l = layout_from_sources(&s, "spec.yaml", r);
  CHECK(to_string(l) ==
        "dp=128,tp=8,pp=16,vpp=1,sp=1,zero=1,recompute=none,mbs=1,schedule=1f1b,first_stage_layers=7,last_stage_layers=7");
  // The 128K-context variant (Llama 3 paper Table 4): TP 8, CP 16, PP 16, DP 8,
  // sequences of 131,072 tokens, 16 per DP rank.
  {
    Spec s2 = s;
    s2.training.flash_attention = true;
    LayoutRequest rc;
    rc.megatron_args =
        "--tensor-model-parallel-size 8 --context-parallel-size 16 --pipeline-model-parallel-size 16 "
        "--decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7 --sequence-parallel "
        "--use-distributed-optimizer --micro-batch-size 1 --seq-length 131072 --global-batch-size 128";
    const Layout lc = layout_from_sources(&s2, "spec.yaml", rc);
    CHECK(to_string(lc) == "dp=8,tp=8,cp=16,pp=16,vpp=1,sp=1,zero=1,recompute=none,mbs=1,schedule=1f1b,"
                           "first_stage_layers=7,last_stage_layers=7");
    CHECK(s2.training.seq_length == 131072);
    CHECK(num_microbatches(s2, lc) == 16);
    // The same from the layout string.
    LayoutRequest rl;
    rl.layout = "tp=8,cp=16,pp=16,sp=1,zero=1,mbs=1,first_stage_layers=7,last_stage_layers=7";
    CHECK(layout_from_sources(&s2, "spec.yaml", rl) == lc);
    CHECK(parse_layout(to_string(lc)) == lc);
    // Only the p2p ring is modelled.
    rc.megatron_args = *rc.megatron_args + " --cp-comm-type a2a";
    CHECK_THROWS_AS(layout_from_sources(&s2, "spec.yaml", rc), SpecError);
  }
  // The same from --account-for-embedding/loss-in-pipeline-split: 126 + 2 = 128
  // counted layers, 8 per stage, the first and last building 7.
  r.megatron_args =
      "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 --account-for-embedding-in-pipeline-split "
      "--account-for-loss-in-pipeline-split --sequence-parallel --use-distributed-optimizer";
  CHECK(layout_from_sources(&s, "spec.yaml", r) == l);
  // With an interleaved schedule of 4 chunks of 2 layers: the first chunk of
  // stage 0 and the last chunk of stage 15 are one layer short.
  *r.megatron_args += " --num-layers-per-virtual-pipeline-stage 2";
  const Layout li = layout_from_sources(&s, "spec.yaml", r);
  CHECK(li.vpp == 4);
  CHECK(li.first_stage_layers == 7);
  StageSplit split;
  REQUIRE(stage_split(126, li, &split));
  CHECK(chunk_layers(7, li, 0, 0) == 1);
  CHECK(chunk_layers(7, li, 0, 1) == 2);
  CHECK(chunk_layers(7, li, 15, 3) == 1);
  CHECK(chunk_layers(7, li, 15, 0) == 2);
  CHECK(virtual_stage_first_layer(split, li, 16) == 1 + 14 * 2 + 2);  // chunk 1 of stage 0
  // Megatron's own rules: 126 + 1 does not divide by 16; first-stage layers
  // must divide by the virtual pipeline size; the two ways do not combine.
  r.megatron_args = "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 "
                    "--account-for-embedding-in-pipeline-split";
  auto field_of_error = [&]() -> std::string {
    try {
      layout_from_sources(&s, "spec.yaml", r);
    } catch (const SpecError& e) {
      return e.field();
    }
    return "(no error)";
  };
  CHECK(field_of_error() == "--account-for-embedding-in-pipeline-split");
  r.megatron_args = "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 "
                    "--decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7 "
                    "--num-virtual-stages-per-pipeline-rank 2";
  CHECK(field_of_error() == "--decoder-first-pipeline-num-layers");
  r.megatron_args = "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 "
                    "--decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 7";
  CHECK(field_of_error() == "layout.first_stage_layers");
  // Full granularity without a method is refused, as Megatron refuses it.
  r.megatron_args = "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 --recompute-granularity full";
  CHECK(field_of_error() == "--recompute-method");
  r.megatron_args = "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 --recompute-granularity full "
                    "--recompute-method block --recompute-num-layers 4 --decoder-first-pipeline-num-layers 7 "
                    "--decoder-last-pipeline-num-layers 7";
  const Layout lb = layout_from_sources(&s, "spec.yaml", r);
  CHECK(lb.recompute == Recompute::kFull);
  CHECK(lb.recompute_method == RecomputeMethod::kBlock);
  CHECK(lb.recompute_layers == 4);
  r.megatron_args = "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 --recompute-activations "
                    "--recompute-num-layers 4";
  CHECK(field_of_error() == "--recompute-num-layers");
}

TEST_CASE("An HF Trainer DeepSpeed config with \"auto\" values is accepted and resolved from the spec (issue 14)",
          "[layout][deepspeed]") {
  // The stock ZeRO-2 config of the transformers docs (main_classes/deepspeed):
  // every size "auto", filled in by the Trainer.
  Spec s = test::spec_for(test::model("llama-2-7b"), 8, 4096, 64);
  s.training.framework = Framework::kDeepSpeed;
  const std::string path = "/tmp/paraplan_test_ds_auto.json";
  std::ofstream(path) << R"({
    "fp16": {"enabled": "auto", "loss_scale": 0}, "bf16": {"enabled": "auto"},
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto"}},
    "zero_optimization": {"stage": 2, "overlap_comm": true, "contiguous_gradients": true, "allgather_bucket_size": 2e8,
                          "reduce_scatter": true, "reduce_bucket_size": "auto"},
    "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto"})";
  LayoutRequest r;
  r.deepspeed_config = path;
  r.layout = "mbs=2";
  const Layout l = layout_from_sources(&s, "spec.yaml", r);
  CHECK(l.zero == 2);
  CHECK(l.mbs == 2);                            // the Trainer's per_device_train_batch_size: --layout here
  CHECK(s.training.global_batch_size == 64);   // the spec's
  CHECK(s.training.precision == DType::kBf16);  // "auto": the spec's
  // reduce_bucket_size "auto" = hidden_size² (trainer_config_finalize): 4096² = 16,777,216.
  CHECK(s.training.grad_bucket_params == 16'777'216);
  CHECK(s.training.grad_bucket_params_given);
  std::remove(path.c_str());
}

TEST_CASE("DeepSpeed's BF16_Optimizer: ZeRO-1 with fp32 accumulation keeps a whole fp32 gradient buffer (issue 14)",
          "[layout][deepspeed][memory]") {
  Spec s = test::spec_for(test::model("llama-2-7b"), 8, 4096, 64);
  s.training.framework = Framework::kDeepSpeed;
  const std::string path = "/tmp/paraplan_test_ds_bf16opt.json";
  std::ofstream(path) << R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 1},
                             "data_types": {"grad_accum_dtype": "fp32"}, "train_micro_batch_size_per_gpu": 1})";
  LayoutRequest r;
  r.deepspeed_config = path;
  const Layout l = layout_from_sources(&s, "spec.yaml", r);
  REQUIRE(l.dp == 8);
  // deepspeed/runtime/engine.py:1994-1996 picks BF16_Optimizer: bf16 weights
  // 2Ψ, fp32 gradients 4Ψ whole (bf16_optimizer.py:176), fp32 master + Adam 12Ψ/8.
  const std::int64_t psi = 6'738'415'616;
  const MemoryBreakdown m = stage_memory(s, l, 0);
  CHECK(m[Category::kWeights] == 2 * psi);
  CHECK(m[Category::kGradients] == 4 * psi);
  CHECK(m[Category::kOptimizer] == 12 * psi / 8);
  std::remove(path.c_str());
}

TEST_CASE("DeepSpeed config: tensor_parallel.autotp_size is the tp size (issue 46: it was read as 1)",
          "[layout][deepspeed]") {
  Spec s = test::spec_for(test::model("llama-2-7b"), 8, 4096, 64);
  s.training.framework = Framework::kDeepSpeed;
  const std::string path = "/tmp/paraplan_test_ds_autotp.json";
  std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 1, "tensor_parallel": {"autotp_size": 4},
    "zero_optimization": {"stage": 1}, "bf16": {"enabled": true}})";
  LayoutRequest r;
  r.deepspeed_config = path;
  const Layout l = layout_from_sources(&s, "spec.yaml", r);
  CHECK(l.tp == 4);
  CHECK(l.dp == 2);  // 8 GPUs / tp 4
  CHECK(!l.sp);
  std::remove(path.c_str());
}

TEST_CASE("DeepSpeed config gives zero stage, micro-batch and batch", "[layout][deepspeed]") {
  Spec s = test::spec_for(test::model("llama-2-7b"), 8, 4096, 64);
  const std::string path = "/tmp/paraplan_test_ds.json";
  std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
    "zero_optimization": {"stage": 3, "overlap_comm": true}, "bf16": {"enabled": true}})";
  LayoutRequest r;
  r.deepspeed_config = path;
  const Layout l = layout_from_sources(&s, "spec.yaml", r);
  CHECK(l.zero == 3);
  CHECK(l.mbs == 2);
  CHECK(l.dp == 8);
  // train_batch_size = micro 2 × accumulation 4 × dp 8 = 64.
  CHECK(s.training.global_batch_size == 64);
  // Combined with --layout for what DeepSpeed does not hold; conflicts are errors.
  r.layout = "tp=2,recompute=full";
  const Layout l2 = layout_from_sources(&s, "spec.yaml", r);
  CHECK(l2.tp == 2);
  CHECK(l2.dp == 4);
  CHECK(l2.recompute == Recompute::kFull);
  r.layout = "tp=2,zero=1";
  CHECK_THROWS_WITH(layout_from_sources(&s, "spec.yaml", r), Catch::Contains("conflicts"));
  std::remove(path.c_str());
}

TEST_CASE("nanotron's compute-cost pipeline split (balance=cost), worked by hand (issue 15)", "[layout][nanotron]") {
  // The Playbook's 1B model: 16 layers, h 2048, 32 heads of 64, ffn 8192,
  // vocab 131,072. Block costs (nanotron llama.py:913-925): a layer
  // 4*32*64*2048 + 3*8192*2048 = 67,108,864; the lm_head 131072*2048 =
  // 268,435,456 (4 layers' worth); total 1,342,177,280.
  const Model m1 = test::model("nanotron-bench-1b");
  const CostSplit c4 = cost_split(m1, 4);
  CHECK(c4.layer_cost == 67108864.0);
  CHECK(c4.total_cost == 1342177280.0);
  // pp = 4: thresholds 335,544,320 (= 5 layers exactly, not exceeded: the 6th
  // layer still lands on rank 0), 671,088,640 (10 layers), 1,006,632,960 (15):
  // ranks hold 6, 5, 5 and 0 layers; the lm_head, cast and loss are on rank 3.
  CHECK(c4.layers(0) == 6);
  CHECK(c4.layers(1) == 5);
  CHECK(c4.layers(2) == 5);
  CHECK(c4.layers(3) == 0);
  CHECK((c4.head_stage == 3 && c4.cast_stage == 3 && c4.loss_stage == 3));
  CHECK(c4.valid());
  // pp = 8: thresholds every 167,772,160 (2.5 layers): 3, 3, 2, 3, 2, 3 layers
  // on ranks 0-5; rank 6 reaches its threshold only with the lm_head, so rank
  // 7 gets the fp32 cast and the loss.
  const CostSplit c8 = cost_split(m1, 8);
  const int want8[] = {3, 3, 2, 3, 2, 3, 0, 0};
  for (int r = 0; r < 8; ++r) CHECK(c8.layers(r) == want8[r]);
  CHECK((c8.head_stage == 6 && c8.cast_stage == 7 && c8.loss_stage == 7));
  CHECK(c8.valid());
  // pp = 16: 1,342,177,280 / 16 = 1.25 layers per rank; the lm_head lands on
  // rank 12 and ranks 15 onward would be empty: invalid.
  CHECK_FALSE(cost_split(m1, 16).valid());
  // The 3B model: 28 layers of 4*32*96*3072 + 3*8192*3072 = 113,246,208, the
  // lm_head 402,653,184: pp = 8 gives 4 layers to each of ranks 0-6 and the
  // lm_head alone to rank 7 (28 layers do not split 8 ways in Megatron).
  const Model m3 = test::model("nanotron-bench-3b");
  const CostSplit c38 = cost_split(m3, 8);
  for (int r = 0; r < 7; ++r) CHECK(c38.layers(r) == 4);
  CHECK(c38.layers(7) == 0);
  CHECK(c38.head_stage == 7);
  // A nanotron spec resolves pp > 1 layouts to balance=cost; stage_layers follows it.
  Spec s = test::spec_for(m3, 8, 4096, 64);
  s.training.framework = Framework::kNanotron;
  s.training.flash_attention = true;
  Layout l = parse_layout("tp=1,pp=8,mbs=1");
  REQUIRE_FALSE(resolve_layout(s, &l));
  CHECK(l.balance == StageBalance::kCost);
  CHECK(to_string(l) == "dp=1,tp=1,pp=8,vpp=1,sp=0,zero=0,recompute=none,mbs=1,schedule=1f1b,balance=cost");
  CHECK(stage_layers(m3, l, 0) == 4);
  CHECK(stage_layers(m3, l, 7) == 0);
  CHECK(output_stage(m3, l) == 7);
  // Other frameworks split by layers: balance=cost is refused there.
  Spec meg = s;
  meg.training.framework = Framework::kMegatron;
  Layout lc = parse_layout("tp=1,pp=4,mbs=1,balance=cost");
  const auto p = resolve_layout(meg, &lc);
  REQUIRE(p);
  CHECK(p->field == "balance");
}

TEST_CASE("microbatch_group: printed only when set, read from Megatron, checked as Megatron checks it",
          "[layout][schedule]") {
  const Layout l = parse_layout("dp=2,pp=4,vpp=3,mbs=4,microbatch_group=5");
  CHECK(l.microbatch_group == 5);
  CHECK(to_string(l) == "dp=2,tp=1,pp=4,vpp=3,sp=0,zero=0,recompute=none,mbs=4,schedule=1f1b,microbatch_group=5");
  CHECK(parse_layout(to_string(l)) == l);
  CHECK(to_string(parse_layout("pp=4,vpp=3")).find("microbatch_group") == std::string::npos);
  // 12 layers over pp 4 x vpp 3 on 8 GPUs, global batch 40 = dp 2 x mbs 4 x 5 micro-batches: not a
  // multiple of pp, which Megatron allows with a group of 5 (schedules.py:1160-1179, Megatron-LM's own
  // gpt3_mcore_te_tp1_pp4_vp1_tunable_overlap test).
  Spec s = test::spec_for(test::gpt_style(12, 512, 8, 50304), 8, 1024, 40);
  Layout a = parse_layout("pp=4,vpp=3,mbs=4");
  auto p = resolve_layout(s, &a);
  REQUIRE(p);
  CHECK(p->field == "vpp");  // the default group, pp 4: 5 micro-batches do not divide
  Layout b = parse_layout("pp=4,vpp=3,mbs=4,microbatch_group=5");
  CHECK_FALSE(resolve_layout(s, &b));
  Layout c = parse_layout("pp=4,vpp=3,mbs=4,microbatch_group=6");  // more than the 5 micro-batches
  p = resolve_layout(s, &c);
  REQUIRE(p);
  CHECK(p->field == "microbatch_group");
  CHECK(p->message.find("[pp 4, micro-batches 5]") != std::string::npos);
  Layout d = parse_layout("pp=4,vpp=1,mbs=4,microbatch_group=4");  // no interleaving
  p = resolve_layout(s, &d);
  REQUIRE(p);
  CHECK(p->field == "microbatch_group");
  // 80 sequences: 10 micro-batches in groups of 6 leave a last group of 4 = pp (allowed); of 7, 3 < pp.
  s.training.global_batch_size = 80;
  Layout e = parse_layout("pp=4,vpp=3,mbs=4,microbatch_group=6");
  CHECK_FALSE(resolve_layout(s, &e));
  Layout f = parse_layout("pp=4,vpp=3,mbs=4,microbatch_group=7");
  p = resolve_layout(s, &f);
  REQUIRE(p);
  CHECK(p->field == "microbatch_group");
  // From Megatron arguments, as the layout string gives it.
  Spec m = s;
  m.training.global_batch_size = 40;
  LayoutRequest req;
  req.megatron_args = "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 1 --micro-batch-size 4 "
                      "--microbatch-group-size-per-virtual-pipeline-stage 5";
  CHECK(layout_from_sources(&m, "test", req) == parse_layout("dp=2,pp=4,vpp=3,mbs=4,microbatch_group=5"));
}

TEST_CASE("Every DeepSpeed config key at edaa7221 is read, listed as not changing memory or time, or refused with the reason",
          "[layout][deepspeed]") {
  // tests/data/deepspeed-edaa7221-keys.txt: DeepSpeedZeroConfig's fields and aliases and the top-level keys
  // DeepSpeedConfig reads, each with its default and the class worked out from DeepSpeed's code.
  std::ifstream in(test::repo("tests/data/deepspeed-edaa7221-keys.txt"));
  REQUIRE(in);
  const std::string path = "/tmp/paraplan_test_ds_walk.json";
  int zero_keys = 0, top_keys = 0;
  auto run = [&](const std::string& config, std::vector<std::string>* ignored) {
    Spec s = test::spec_for(test::model("llama-2-7b"), 8, 4096, 64);
    s.training.framework = Framework::kDeepSpeed;
    std::ofstream(path) << config;
    LayoutRequest r;
    r.deepspeed_config = path;
    r.layout = "mbs=1";
    r.ignored_flags = ignored;
    return layout_from_sources(&s, "spec.yaml", r);
  };
  auto listed = [](const std::vector<std::string>& v, const std::string& field) {
    return std::any_of(v.begin(), v.end(), [&](const std::string& x) { return x.rfind(field + " (", 0) == 0; });
  };
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, '|');) f.push_back(x);
    REQUIRE(f.size() == 5);
    const bool zero = f[0] == "zero";
    zero ? ++zero_keys : ++top_keys;
    const std::string& key = f[1];
    const std::string field = zero ? "zero_optimization." + key : key;
    auto config = [&](const std::string& value) {
      return zero ? R"({"zero_optimization": {"stage": )" + std::string(key == "stage" ? "3" : "3, \"" + key + "\": " + value) + "}}"
                  : "{\"" + key + "\": " + value + "}";
    };
    INFO(line);
    std::vector<std::string> ignored;
    REQUIRE_NOTHROW(run(config(f[2]), &ignored));  // every default is accepted
    if (f[3] == "listed" || f[3] == "default-only") CHECK(listed(ignored, field));
    if (f[3] == "read") CHECK(!listed(ignored, field));
    if (f[4] != "-") {
      // The value that changes the run: refused, naming the key (or the sub-key under it).
      try {
        run(config(f[4]), nullptr);
        FAIL("accepted " << f[4]);
      } catch (const SpecError& e) {
        CHECK(e.one_line().find(field) != std::string::npos);
      }
    }
  }
  CHECK(zero_keys == 53);  // DeepSpeedZeroConfig's 44 fields (config.py:95-376) and the 9 stage3_ aliases among them
  CHECK(top_keys > 50);
  // A zero_optimization key DeepSpeed does not have is refused as DeepSpeed refuses it (extra="forbid"); an unknown
  // top-level key is ignored by DeepSpeed and listed.
  try {
    run(R"({"zero_optimization": {"stage": 2, "reduce_scater": true}})", nullptr);
    FAIL("accepted an unknown zero_optimization key");
  } catch (const SpecError& e) {
    CHECK(e.one_line().find("zero_optimization.reduce_scater: unknown key") != std::string::npos);
  }
  std::vector<std::string> ignored;
  run(R"({"train_micro_batch_size_per_gpu": 1, "my_own_key": 3})", &ignored);
  CHECK(listed(ignored, "my_own_key"));
  std::remove(path.c_str());
}

TEST_CASE("DeepSpeed ZeRO-3's gather: the largest module, the prefetch bucket and the reuse distance, as its coordinator",
          "[layout][deepspeed][memory]") {
  // Llama-2-7B, 8 GPUs, ZeRO-3, stage 0 (which holds the embedding, 32000 x 4096 = 131,072,000 parameters, its
  // largest module). Defaults: prefetch 5e7, max live 1e9, reuse 1e9 (kept: 5e8) -> 681,072,000 params x 2 B.
  const std::string path = "/tmp/paraplan_test_ds_z3.json";
  auto gathered = [&](const std::string& zero) {
    Spec s = test::spec_for(test::model("llama-2-7b"), 8, 4096, 64);
    s.training.framework = Framework::kDeepSpeed;
    std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3)" +
                               zero + "}}";
    LayoutRequest r;
    r.deepspeed_config = path;
    const Layout l = layout_from_sources(&s, "spec.yaml", r);
    for (const Term& t : stage_terms(s, l, 0))
      if (t.name == "ZeRO-3 gathered parameters") return t.bytes;
    return std::int64_t(-1);
  };
  CHECK(gathered("") == 681'072'000LL * 2);
  // A smaller prefetch and reuse distance: 131,072,000 + 1e7 + 1e8 / 2.
  CHECK(gathered(R"(, "stage3_prefetch_bucket_size": 1e7, "stage3_max_reuse_distance": 1e8)") == 191'072'000LL * 2);
  // max_live caps the prefetch: min(5e7, 1.5e8 - 131,072,000 = 18,928,000).
  CHECK(gathered(R"(, "stage3_max_live_parameters": 1.5e8, "stage3_max_reuse_distance": 0)") == 150'000'000LL * 2);
  // The HF Trainer's "auto": 0.9 x hidden² = 15,099,494 (transformers deepspeed.py trainer_config_finalize).
  CHECK(gathered(R"(, "stage3_prefetch_bucket_size": "auto", "stage3_max_reuse_distance": 0)") == (131'072'000LL + 15'099'494) * 2);
  std::remove(path.c_str());
}
