// Mixtures of experts (issue 16): expert-parallel layouts, expert weights and
// optimizer state per rank, and the activations of an MoE layer, each worked
// out by hand here from the models' published config.json files.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "cli_runner.hpp"
#include "costmodel/activations.hpp"
#include "costmodel/comm.hpp"
#include "costmodel/flops.hpp"
#include "costmodel/frameworks/profile.hpp"
#include "costmodel/time.hpp"
#include "costmodel/memory.hpp"
#include "costmodel/spec.hpp"
#include "planner/layout_source.hpp"
#include "planner/search.hpp"
#include "planner/spec_loader.hpp"
#include "test_helpers.hpp"

using namespace paraplan;

namespace {
Model mixtral() { return load_model_file(test::repo("tests/data/hf/mixtral-8x7b-v0.1/config.json")); }
Model deepseek_v3() { return load_model_file(test::repo("tests/data/hf/deepseek-v3/config.json")); }
// Mixtral-8x7B on 8 DGX H100 nodes, seq 4096, 512 sequences, flash attention, under framework f.
Spec mixtral_on_64_h100(Framework f) {
  Spec s = test::spec_for(mixtral(), 64, 4096, 512);
  s.cluster = test::cluster("dgx-h100");
  s.cluster.gpus_per_node = 8;
  s.num_nodes = 8;
  s.training.framework = f;
  s.training.flash_attention = true;
  return s;
}
// The seconds of a layout's "memory-bound ops" time term on stage 0.
double memory_bound(const Spec& s, const Layout& l) {
  for (const TimeTerm& t : stage_time_terms(s, l, 0))
    if (t.name == "memory-bound ops") return t.seconds;
  return -1.0;
}
// Megatron-core's MoE (the default profile).
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
  // A framework with no MoE modelled (nanotron has none in its library).
  Spec ds = s;
  ds.training.framework = Framework::kNanotron;
  Layout f = parse_layout("tp=1,ep=8");
  auto pf = resolve_layout(ds, &f);
  REQUIRE(pf);
  CHECK(pf->reason == Invalid::kMoeFramework);
  CHECK(pf->message.find("examples/moe") != std::string::npos);
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

TEST_CASE("All-to-all volume per micro-batch and its time on the links the ep group spans", "[moe][time][comm]") {
  const Model m = mixtral();
  Spec s = moe_spec(m, 8, 4096, 512);
  s.cluster = test::cluster("dgx-h100");
  s.num_nodes = 8;
  Layout l = parse_layout("dp=64,tp=1,ep=8,etp=1,pp=1");
  REQUIRE_FALSE(resolve_layout(s, &l));
  // tokens x top-k x hidden x bytes x (ep-1)/ep: 4096 x 2 x 4096 x 2 B x 7/8 = 58,720,256 B each way.
  CHECK(moe_alltoall_bytes(m, s.training, l) == Approx(4096.0 * 2 * 4096 * 2 * 7 / 8));
  // tp 2 with SP: each rank dispatches its s/tp tokens' copies; mbs 2 doubles them; ep 4 keeps 1/4.
  Layout l2 = parse_layout("dp=32,tp=2,sp=1,ep=4,pp=1,mbs=2");
  REQUIRE_FALSE(resolve_layout(s, &l2));
  CHECK(moe_alltoall_bytes(m, s.training, l2) == Approx(2048.0 * 2 * 2 * 4096 * 2 * 3 / 4));
  // ep 8 with etp 1 stays inside a DGX H100: (8-1)/8 of S over NVLink at 450 GB/s x 0.82, + 3.4 us.
  const double S = 4096.0 * 2 * 4096 * 2;
  const GroupPlacement in_node = place_group(s.cluster, 8, 1);
  CHECK(in_node.nodes == 1);
  CHECK(group_alltoall_time(s.cluster, in_node, S) == Approx(3.4e-6 + 7.0 / 8 * S / (450e9 * 0.82)));
  // ep 16 over two nodes: 7/16 of S over NVLink, 8/16 over the 50 GB/s NIC (x 0.94) at once; the NIC bounds it.
  const GroupPlacement two = place_group(s.cluster, 16, 1);
  CHECK(two.nodes == 2);
  CHECK(group_alltoall_time(s.cluster, two, S) == Approx(14e-6 + 8.0 / 16 * S / (50e9 * 0.94)));
}

TEST_CASE("An MoE layer's FLOPs count its top-k experts, router and attention (Mixtral-8x7B)", "[moe][flops]") {
  const Model m = mixtral();
  const double s = 4096;
  // Per token: 2 x (attention projections 41,943,040 + router 32,768 + 2 experts x 176,160,768) FLOPs,
  // plus the attention core 2 x 2 x s x 32 heads x 128 over the full square.
  const double linear = 2.0 * s * (41943040.0 + 32768 + 2 * 176160768.0);
  const double core = 2.0 * (2.0 * 32 * s * s * 128);
  CHECK(layer_forward_flops(m, 1, s, LayerKind::kMoe) == Approx(linear + core));
  // The whole model: 32 MoE layers + the logits 2 x s x 4096 x 32000.
  CHECK(forward_flops(m, 1, s) == Approx(32 * (linear + core) + 2.0 * s * 4096 * 32000));
  // Per rank with ep 8 (one expert each), tp 1: the grouped GEMM has 1 expert of s x 2 x 8 / 8 rows.
  const LayerGemms g = layer_gemms(m, 1, s, 1, LayerKind::kMoe, 8, 1);
  bool seen = false;
  for (const Gemm& x : g)
    if (std::string(x.name) == "experts_fc1") {
      seen = true;
      CHECK(x.batch == 1);
      CHECK(x.m == Approx(s * 2));
      CHECK(x.n == 2 * 14336);
      CHECK(x.k == 4096);
    }
  CHECK(seen);
}

namespace {
using nlohmann::json;
using paraplan::test::Result;
using paraplan::test::TempDir;
using paraplan::test::run_paraplan;
void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
}
}  // namespace

TEST_CASE("plan on Mixtral-8x7B over 64 H100 searches ep > 1 and says why its pick beats the best layout of the other kind", "[moe][cli]") {
  TempDir dir;
  const Result r = run_paraplan({"plan", "@SRC@/configs/examples/mixtral-8x7b-h100-64.yaml", "--format", "json", "--top", "400"},
                                dir.path());
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  const Layout rec = parse_layout(j["recommended"]["layout"].get<std::string>());
  // The pick is compared with the fastest fitting layout of the other kind:
  // ep = 1 (every expert on every rank of a stage) against ep > 1.
  const std::string why = j["recommended"]["why_expert_parallel"];
  INFO(why);
  const std::string against = rec.ep > 1 ? "the best ep = 1 layout " : "the best ep > 1 layout ";
  const size_t at = why.find(against);
  REQUIRE(at != std::string::npos);
  const size_t from = at + against.size();
  // The layout runs to the first ',' or ' ' after its schedule field.
  const std::string other = why.substr(from, why.find_first_of(",: ", why.find("schedule=", from)) - from);
  CHECK((parse_layout(other).ep > 1) != (rec.ep > 1));
  // Issue 16: the pick and the best layout of the other kind both sit at the H100's best published
  // utilization (48 % HFU), held there by the decision rule (issue 46), so their ranked steps tie within
  // the rule's band and a tie-break decides, which the line names.
  const double pick_s = j["recommended"]["ranked_step_s"].get<double>();
  double other_s = 0;
  for (const json& c : j["candidates"])
    if (c["layout"].get<std::string>().rfind(other, 0) == 0) other_s = c["ranked_step_s"].get<double>();
  if (other_s > 0) CHECK(other_s < (1 + paraplan::kTieBand) * pick_s);
  if (why.find("ties with") != std::string::npos) CHECK(why.find("; picked for ") != std::string::npos);
  else CHECK(why.find(" s vs ") != std::string::npos);
  bool ep8 = false, ep1 = false;
  for (const json& c : j["candidates"]) {
    const int ep = parse_layout(c["layout"].get<std::string>()).ep;
    ep8 = ep8 || ep == 8;
    ep1 = ep1 || ep == 1;
  }
  CHECK(ep8);
  CHECK(ep1);
  // Expert collectives: the all-to-alls over ep, or with ep = 1 the expert tensor-parallel exchange over etp.
  CHECK((j["recommended"]["time"]["ep_comm_s"].get<double>() > 0) == (rec.ep > 1 || rec.expert_tp() > 1));
  // A search constraint narrows it.
  write_text(dir.path() / "s.yaml", "model: mixtral-8x7b\ncluster: h100\nnum_nodes: 8\n"
                                    "training: {seq_length: 4096, global_batch_size: 1024}\nsearch: {ep: [2], etp: [1]}\n");
  const Result c = run_paraplan({"plan", "s.yaml", "--format", "json", "--top", "50"}, dir.path());
  REQUIRE(c.code == 0);
  const json constrained = json::parse(c.out);  // kept alive: a range-for over a temporary's member dangles
  REQUIRE(!constrained["candidates"].empty());
  for (const json& x : constrained["candidates"]) CHECK(parse_layout(x["layout"].get<std::string>()).ep == 2);
}

TEST_CASE("DeepSeek-V3's published layout from Megatron arguments: per-stage memory with the expert terms named", "[moe][cli]") {
  TempDir dir;
  // 2048 H800, PP 16, EP 64, no TP, ZeRO-1 (DeepSeek-V3 report §3.2); 61 layers: 4 per stage, 1 on the last.
  const Result r = run_paraplan(
      {"explain", "--model", "deepseek-v3", "--gpus", "2048", "--gpu", "h800", "--seq-length", "4096", "--global-batch-size",
       "15360", "--formulas", "--megatron-args",
       "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 16 --expert-model-parallel-size 64 "
       "--use-distributed-optimizer --decoder-last-pipeline-num-layers 1 --micro-batch-size 1 --recompute-activations "
       "--num-experts 256 --moe-router-topk 8 --moe-ffn-hidden-size 2048 --bf16 --moe-token-dispatcher-type alltoall "
       "--moe-layer-freq ([0]*3+[1]*58)"},
      dir.path());
  INFO(r.err);
  CHECK((r.code == 0 || r.code == 1));  // 1: it does not fit under Megatron's 1F1B in bf16 (explained)
  CHECK(r.out.find("dp=128,tp=1,ep=64,etp=1,pp=16") != std::string::npos);
  // Every stage's row: 16 of them, stage 15 with 1 layer.
  CHECK(r.out.find("\n   15      1 ") != std::string::npos);
  // The routed experts' state over the expert data-parallel group edp = 128 / 64 = 2, named.
  CHECK(r.out.find("expert params / edp 2") != std::string::npos);
  CHECK(r.out.find("of them MoE layers") != std::string::npos);
  CHECK(r.out.find("expert all-to-alls (exposed)") != std::string::npos);
  CHECK(r.out.find("ep 64 (8 nodes)") != std::string::npos);
  // A model/flag mismatch is an error naming the flag.
  const Result bad = run_paraplan({"explain", "--model", "deepseek-v3", "--gpus", "2048", "--gpu", "h800", "--megatron-args",
                                   "--pipeline-model-parallel-size 16 --expert-model-parallel-size 64 --num-experts 64"},
                                  dir.path());
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--num-experts") != std::string::npos);
  CHECK(bad.err.find("num_experts is 256") != std::string::npos);
}

TEST_CASE("MoE refusals (validate's dense executors, FP8, --emit where the stack has no such setting) and --emit torchtitan", "[moe][cli]") {
  TempDir dir;
  write_text(dir.path() / "s.yaml", "model: mixtral-8x7b\ncluster: h100\nnum_nodes: 8\n"
                                    "training: {seq_length: 4096, global_batch_size: 1024, fp8: true}\n");
  Result r = run_paraplan({"check", "s.yaml", "--layout", "dp=64,ep=8"}, dir.path());
  CHECK(r.code == 2);
  CHECK(r.err.find("training.fp8") != std::string::npos);
  write_text(dir.path() / "v.yaml", "model: mixtral-8x7b\ncluster: cpu-host\nnum_nodes: 1\n"
                                    "training: {seq_length: 64, global_batch_size: 8}\n");
  r = run_paraplan({"validate", "v.yaml", "--layout", "dp=8,ep=8", "--steps", "1"}, dir.path());
  CHECK(r.code == 2);
  CHECK(r.err.find("dense transformers only") != std::string::npos);
  // --emit megatron writes the expert flags; --megatron-args reads them back to the same layout.
  r = run_paraplan({"explain", "@SRC@/configs/examples/mixtral-8x7b-h100-64.yaml", "--layout",
                    "dp=32,tp=2,sp=1,ep=8,etp=1,pp=1,zero=1,mbs=1", "--emit", "megatron"},
                   dir.path());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("--expert-model-parallel-size 8 --expert-tensor-parallel-size 1 --moe-token-dispatcher-type alltoall") !=
        std::string::npos);
  r = run_paraplan({"explain", "@SRC@/configs/examples/mixtral-8x7b-h100-64.yaml", "--layout", "dp=64,ep=8", "--emit",
                    "deepspeed"},
                   dir.path());
  CHECK(r.code == 2);
  CHECK(r.err.find("ep_size") != std::string::npos);  // DeepSpeed-MoE takes ep in the model code, not the config
  // torchtitan: expert_parallel_degree (pytorch/torchtitan@b5bcd76c torchtitan/config/configs.py:282), with
  // FSDP over the rest (efsdp = dp_shard x cp x tp / ep).
  r = run_paraplan({"explain", "@SRC@/configs/examples/mixtral-8x7b-h100-64.yaml", "--framework", "fsdp", "--layout",
                    "dp=64,tp=1,ep=8,pp=1,zero=3,mbs=1", "--emit", "torchtitan"},
                   dir.path());
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("config.parallelism.data_parallel_shard_degree = 64\n") != std::string::npos);
  CHECK(r.out.find("config.parallelism.expert_parallel_degree = 8\n") != std::string::npos);
  r = run_paraplan({"explain", "@SRC@/configs/examples/mixtral-8x7b-h100-64.yaml", "--layout", "dp=64,ep=8", "--emit",
                    "nanotron"},
                   dir.path());
  CHECK(r.code == 2);
  CHECK(r.err.find("no mixture-of-experts layer") != std::string::npos);
}

TEST_CASE("Qwen3-MoE and Qwen2-MoE config.json: counted, total and active, by hand", "[moe][params][hf]") {
  // Qwen3-30B-A3B: per layer attention 2048 x 4096 (q) + 2 x 2048 x 512 (k, v) + 4096 x 2048 (o) = 18,874,368,
  // q_norm + k_norm 2 x 128, 2 RMSNorms 4,096, router 128 x 2048 = 262,144, 128 experts of 3 x 2048 x 768 = 4,718,592:
  // 623,120,640 x 48 + embedding and head 2 x 151936 x 2048 + final norm 2048 = 30,532,122,624 (Qwen: "30.5B").
  const Model q3 = load_model_file(test::repo("tests/data/hf/qwen3-30b-a3b/config.json"));
  CHECK(q3.qk_norm);
  CHECK(q3.num_shared_experts == 0);
  const ParamCounts c3 = count_params(q3);
  CHECK(c3.total == 30532122624LL);
  // Active: 8 of 128 experts: minus 48 x 120 x 4,718,592 = 3,353,032,704 ("3.3B activated").
  CHECK(c3.active == 3353032704LL);
  // Qwen1.5-MoE-A2.7B (qwen2_moe): attention 4 x 2048^2 + QKV biases 3 x 2048 = 16,783,360, norms 4,096, router
  // 60 x 2048, 60 experts of 3 x 2048 x 1408 = 8,650,752, one shared expert of 5632 = 4 x 8,650,752, its gate
  // Linear(2048, 1): 570,560,512 x 24 + 2 x 151936 x 2048 + 2048 = 14,315,784,192 (Qwen: "14.3B").
  const Model q2 = load_model_file(test::repo("tests/data/hf/qwen1.5-moe-a2.7b/config.json"));
  CHECK(q2.num_shared_experts == 4);
  CHECK(q2.shared_expert_gate);
  CHECK(q2.qkv_bias);
  const ParamCounts c2 = count_params(q2);
  CHECK(c2.total == 14315784192LL);
  // Active: 4 of 60 routed experts: minus 24 x 56 x 8,650,752 = 2,689,173,504 ("A2.7B").
  CHECK(c2.active == 2689173504LL);
  // Both plan: with tp 1 every parameter of a layer sits on one rank, so the stage holds them all.
  Spec s = moe_spec(q3, 8, 4096, 64);
  Layout l = parse_layout("dp=8,tp=1,ep=8,pp=1");
  REQUIRE_FALSE(resolve_layout(s, &l));
  CHECK(stage_params(q3, l, 0).expert == 16 * 4718592LL);
  Layout whole = parse_layout("dp=8,tp=1,ep=1,pp=1");
  REQUIRE_FALSE(resolve_layout(s, &whole));
  CHECK(stage_params(q3, whole, 0).total() == c3.total);
}

TEST_CASE("A virtual stage's first layer, in closed form, is the sum of the layers before it", "[moe][layout]") {
  // The definition: the layers of every virtual stage before vs (Megatron's chunk order c x pp + stage).
  int checked = 0;
  for (int L : {8, 12, 13, 61, 62})
    for (int pp = 1; pp <= 8; ++pp)
      for (int vpp = 1; vpp <= 4; ++vpp)
        for (int first = 0; first <= 3; ++first)
          for (int last = 0; last <= 3; ++last) {
            Layout l;
            l.pp = pp, l.vpp = vpp, l.first_stage_layers = first, l.last_stage_layers = last;
            StageSplit sp;
            if (!stage_split(L, l, &sp)) continue;
            int sum = 0;
            for (int vs = 0; vs < pp * vpp; ++vs) {
              CHECK(virtual_stage_first_layer(sp, l, vs) == sum);
              sum += virtual_stage_layers(sp, l, vs);
            }
            CHECK(sum == L);
            ++checked;
          }
  CHECK(checked > 100);
}

TEST_CASE("MoE layers per pipeline rank: the sum over its chunks, dense prefix first", "[moe][layout]") {
  // The definition: chunk by chunk, the layers from first_dense_layers on (moe_layers_in).
  Model m = deepseek_v3();
  int checked = 0;
  for (int fd : {0, 1, 3, 7})
    for (int pp = 1; pp <= 8; ++pp)
      for (int vpp = 1; vpp <= 4; ++vpp)
        for (int last = 0; last <= 2; ++last) {
          m.first_dense_layers = fd;
          Layout l;
          l.pp = pp, l.vpp = vpp, l.last_stage_layers = last;
          StageSplit sp;
          if (!stage_split(m.num_layers, l, &sp)) continue;
          for (int stage = 0; stage < pp; ++stage) {
            int sum = 0;
            for (int c = 0; c < vpp; ++c) {
              const int vs = c * pp + stage;
              sum += moe_layers_in(m, virtual_stage_first_layer(sp, l, vs), virtual_stage_layers(sp, l, vs));
            }
            CHECK(stage_moe_layers(m, l, stage) == sum);
            // ChunkWalk gives each chunk's layers and MoE layers in turn.
            ChunkWalk walk(m, l, sp, stage);
            for (int c = 0; c < vpp; ++c) {
              const int vs = c * pp + stage;
              int n = -1;
              const int e = walk.next(&n);
              CHECK(n == virtual_stage_layers(sp, l, vs));
              CHECK(e == moe_layers_in(m, virtual_stage_first_layer(sp, l, vs), virtual_stage_layers(sp, l, vs)));
            }
            ++checked;
          }
        }
  CHECK(checked > 50);
}

TEST_CASE("One pass over a layer's saved tensors gives what the per-mode functions give", "[moe][activations]") {
  for (const Model& m : {mixtral(), deepseek_v3(), test::gpt_style(4, 1024, 16, 50304)})
    for (bool flash : {false, true})
      for (LayerKind kind : {LayerKind::kDense, LayerKind::kMoe}) {
        if (kind == LayerKind::kMoe && !m.is_moe()) continue;
        const ActShape a{4096, 2, 2, true, 2, false, 2};
        const LayerActivationSummary s = layer_activation_summary(m, flash, a, {}, kind);
        for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
          CHECK(s.bytes(r) == layer_activation_bytes(m, flash, r, a, {}, kind));
          CHECK(s.slack(r) == layer_rounding_slack(m, flash, r, a, {}, kind));
          const TransientPeak one = layer_transient_peak(m, flash, r, a, {}, kind);
          const TransientPeak two = layer_transient_peak(m, flash, r, a, s.none, s.none - s.selective, kind);
          CHECK(one.bytes == two.bytes);
        }
      }
}

TEST_CASE("Routing balance: the busiest expert rank sizes the dispatched tokens, capacity factors cap or pad it", "[moe][memory]") {
  const Model m = mixtral();
  // At 1.25x the mean the four tensors sized by the routed tokens (fc1 input 16,384, SwiGLU input 114,688,
  // probabilities 8, fc2 input 57,344 B per token) grow by a quarter: 241,888 + 188,424 / 4 = 288,994 B per token.
  ActShape a{4096, 1, 1, false, 2, false, 1, 1.25};
  CHECK(layer_activation_bytes(m, true, Recompute::kNone, a, {}, LayerKind::kMoe) == 288994LL * 4096);
  Training t;
  CHECK(t.moe_expert_load() == 1.25);  // dropless at the default imbalance
  t.moe_capacity_factor = 1.0;
  CHECK(t.moe_expert_load() == 1.0);  // drops above the mean share
  t.moe_capacity_factor = 2.0;
  CHECK(t.moe_expert_load() == 1.25);  // the cap is not reached
  t.moe_pad_to_capacity = true;
  CHECK(t.moe_expert_load() == 2.0);  // every expert padded to its capacity
  TempDir dir;
  const Result r = run_paraplan({"explain", "@SRC@/configs/examples/mixtral-8x7b-h100-64.yaml", "--formulas", "--megatron-args",
                                 "--tensor-model-parallel-size 1 --expert-model-parallel-size 8 "
                                 "--moe-expert-capacity-factor 1.0 --moe-pad-expert-input-to-capacity "
                                 "--moe-token-dispatcher-type alltoall"},
                                dir.path());
  INFO(r.err);
  REQUIRE(r.code <= 1);
  CHECK(r.out.find("the busiest expert rank at 1x the mean") != std::string::npos);
  const Result bad = run_paraplan({"explain", "@SRC@/configs/examples/mixtral-8x7b-h100-64.yaml", "--megatron-args",
                                   "--expert-model-parallel-size 8 --moe-expert-capacity-factor 1.x"},
                                  dir.path());
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--moe-expert-capacity-factor") != std::string::npos);
}

TEST_CASE("torchtitan MoE (framework fsdp): what its layers save, worked by hand, and where it is refused", "[moe][frameworks]") {
  Spec s = mixtral_on_64_h100(Framework::kFsdp);
  Layout ok = parse_layout("dp=64,tp=1,ep=8,pp=1,zero=3,mbs=1");
  REQUIRE_FALSE(resolve_layout(s, &ok));

  // Refused: torchtitan's tensor-parallel experts, multi-latent attention
  // under torchtitan (nanotron's refusal: the first test case).
  Layout tp = parse_layout("dp=32,tp=2,sp=1,ep=8,pp=1,zero=3");
  auto ptp = resolve_layout(s, &tp);
  REQUIRE(ptp);
  CHECK(ptp->reason == Invalid::kMoeFramework);
  CHECK(ptp->field == "framework");
  CHECK(ptp->message.find("tp = 1") != std::string::npos);
  Spec ds = s;
  ds.model = deepseek_v3();
  Layout dl = parse_layout("dp=64,tp=1,ep=64,pp=1,zero=3");
  auto pdl = resolve_layout(ds, &dl);
  REQUIRE(pdl);
  CHECK(pdl->reason == Invalid::kMoeFramework);
  CHECK(pdl->message.find("multi-latent") != std::string::npos);

  // One Mixtral MoE layer, seq 4096, mbs 1, ep 8, the busiest expert rank at
  // 1.25x the mean: what its MLP saves beyond the dense MLP of the same layer
  // (attention and norms are the same tensors). Mixtral: h 4096, 8 experts of
  // ffn 14336, top-2; T = 4096 tokens.
  //   router: fp32 input 4h = 16384 B; fp32 scores 8 x 4 = 32; int64 top-k ids 16
  //   reorder: argsort 16, token indices 16; ep permute 2 x 8 x 1.25 = 20
  //   experts (x 1.25): 2 copies x (h + 4 x 14336) x 2 B = 245760 -> 307200
  //   combine: fp32 expert output 2 x 4096 x 4 = 32768, sorted scores 8
  //   = 356460 B per token -> x 4096 = 1,460,060,160
  //   per layer: the fp32 gate weight 8 x 4096 x 4 = 131072, int32 offsets of 8/8 experts 4
  // The dense MLP: fc1 input 8192 + w1|w3 outputs 57344 + SiLU output 28672 +
  // fc2 input 28672 = 122880 B per token -> 503,316,480.
  const Profile& titan = profile(Framework::kFsdp);
  const ActShape a{4096, 1, 1, false, 2, false, 1, 1.25, 8};
  const std::int64_t moe = layer_activation_bytes(s.model, true, Recompute::kNone, a, titan.act, LayerKind::kMoe);
  const std::int64_t dense = layer_activation_bytes(s.model, true, Recompute::kNone, a, titan.act, LayerKind::kDense);
  CHECK(moe - dense == (1'460'060'160 + 131'072 + 4) - 503'316'480);
  // Without expert parallelism there is no expert-major permute: 20 B per token less.
  const ActShape a1{4096, 1, 1, false, 2, false, 1, 1.25, 1};
  const std::int64_t moe1 = layer_activation_bytes(s.model, true, Recompute::kNone, a1, titan.act, LayerKind::kMoe);
  CHECK(moe - moe1 == 20 * 4096 + 4 - 32);  // and the offsets of all 8 experts (32 B) instead of 1 (4 B)

  // The short-lived buffers of torchtitan's combine, narrow experts (moe_ffn
  // 512) so that it is the layer's peak: P = 4096 tokens x 2 copies x h 4096
  // x 2 B = 67,108,864; the expert output at 1.25x the mean 83,886,080; with
  // ep > 1 the combine's input (the all-to-all output) P, the fp32 score
  // product 2P and its bf16 cast P: 83,886,080 + 4 x 67,108,864 = 352,321,536.
  // Megatron's fused combine has no fp32 product: its peak is the backward's
  // residual grad (33,554,432) + the combine gradients (2P) + the expert
  // output grad (83,886,080) = 251,658,240.
  Model narrow = s.model;
  narrow.moe_ffn_hidden_size = 512;
  const TransientPeak tt = layer_transient_peak(narrow, true, Recompute::kNone, a, titan.act, LayerKind::kMoe);
  CHECK(tt.bytes == 352'321'536);
  CHECK(std::string(tt.phase).find("fp32 score product") != std::string::npos);
  CHECK(layer_transient_peak(narrow, true, Recompute::kNone, a, profile(Framework::kMegatron).act, LayerKind::kMoe).bytes ==
        251'658'240);

  // Time: torchtitan's own passes in the memory-bound term, against
  // Megatron's on the same layout: the combine's fp32 score multiply (2
  // activation-dtype + 4 fp32 passes over the 2 x 4096 routed copies of h)
  // and the router's fp32 cast (read 2 B, write 4 B per element of 4096 x h),
  // forward once and backward twice (x 3), in each of the 32 layers.
  Spec mg = s;
  mg.training.framework = Framework::kMegatron;
  Layout lm = ok;
  REQUIRE_FALSE(resolve_layout(mg, &lm));
  const double extra_bytes = (2 * 2 + 4 * 4) * 2.0 * 4096 * 4096 + (2 + 4) * 4096.0 * 4096;  // 771,751,936
  CHECK(extra_bytes == 771'751'936.0);
  const double per_second = 3350e9 * s.cluster.hbm_efficiency;  // DGX H100: 3.35 TB/s HBM3 x the cluster's efficiency
  CHECK(memory_bound(s, ok) - memory_bound(mg, lm) == Approx(32 * 3 * extra_bytes / per_second).epsilon(1e-9));
  // The all-to-alls are read from torchtitan's dispatcher, exposed.
  bool cited = false;
  for (const TimeTerm& t : stage_time_terms(s, ok, 0))
    if (t.name == "expert all-to-alls (exposed)") cited = t.source.find("torchtitan") != std::string::npos;
  CHECK(cited);
}

TEST_CASE("a dense model's plan says nothing about expert parallelism", "[moe][cli]") {
  TempDir dir;
  const Result r = run_paraplan({"plan", "@SRC@/configs/examples/tiny-cpu.yaml"}, dir.path());
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("recommended:") != std::string::npos);
  CHECK(r.out.find("Expert parallelism") == std::string::npos);
  const Result j = run_paraplan({"plan", "@SRC@/configs/examples/tiny-cpu.yaml", "--format", "json"}, dir.path());
  REQUIRE(j.code == 0);
  CHECK_FALSE(json::parse(j.out)["recommended"].contains("why_expert_parallel"));
}

TEST_CASE("DeepSpeed-MoE (framework deepspeed): capacity-padded experts, what its layers save, where it is refused", "[moe][frameworks]") {
  Spec s = mixtral_on_64_h100(Framework::kDeepSpeed);
  Layout ok = parse_layout("dp=64,tp=1,ep=8,pp=1,zero=1,mbs=1");
  REQUIRE_FALSE(resolve_layout(s, &ok));
  // Native DeepSpeed-MoE refuses ZeRO-3 (engine.py:1889-1891); tp > 1 and k = 1 are not modelled.
  for (auto [text, says] : {std::pair{"dp=64,tp=1,ep=8,pp=1,zero=3", "ZeRO stage 3"},
                            std::pair{"dp=32,tp=2,sp=1,ep=8,pp=1,zero=1", "tp = 1"}}) {
    Layout l = parse_layout(text);
    auto p = resolve_layout(s, &l);
    REQUIRE(p);
    CHECK(p->reason == Invalid::kMoeFramework);
    CHECK(p->message.find(says) != std::string::npos);
  }
  Spec top1 = s;
  top1.model.experts_per_token = 1;
  Layout l1 = parse_layout("dp=64,tp=1,ep=8,pp=1,zero=1");
  auto p1 = resolve_layout(top1, &l1);
  REQUIRE(p1);
  CHECK(p1->message.find("top1gating") != std::string::npos);

  // Every expert's buffer holds C = ceil(tokens / experts x capacity factor x k)
  // rows whatever the routing, at any ep; dropless (no capacity factor) C is the
  // busiest expert's count: the imbalance. Megatron at ep = 1: exactly the mean.
  const Profile& ds = profile(Framework::kDeepSpeed);
  Training t = s.training;
  CHECK(moe_expert_load(ds, t, 1) == 1.25);  // the default imbalance
  t.moe_capacity_factor = 1.5;
  CHECK(moe_expert_load(ds, t, 1) == 1.5);
  CHECK(moe_expert_load(ds, t, 8) == 1.5);
  CHECK(moe_expert_load(profile(Framework::kMegatron), s.training, 1) == 1.0);
  CHECK(moe_expert_load(profile(Framework::kMegatron), s.training, 8) == 1.25);

  // One Mixtral layer, seq 4096, mbs 1, ep 8, rows at 1.25x: its MoE MLP
  // beyond the dense MLP of the same layer, by hand (bytes per token):
  //   gate: fp32 input 4 x 4096 = 16384; softmax 8 x 4 = 32; top2gating: two
  //   fp32 one-hot masks 2 x 8 x 4 = 64, gate sum, denominator, two gates 16
  //   encode: slot sources 2 x 8 x 1.25 = 20
  //   experts x 1.25: input 2 x 4096 x 2 + 4 x (2 x 14336 x 2) = 245760 -> 307200
  //   decode: slots 16, routed rows 2 x 4096 x 2 = 16384, gates 8
  //   = 340124 B per token -> x 4096 = 1,393,147,904
  //   per layer: fp32 gate weight 8 x 4096 x 4 = 131072, aux-loss fractions 32, scratch slot 8
  // The dense MLP (HF-style, unfused SwiGLU): 122880 B per token -> 503,316,480.
  const ActShape a{4096, 1, 1, false, 2, false, 1, 1.25, 8, 1};
  const std::int64_t moe = layer_activation_bytes(s.model, true, Recompute::kNone, a, ds.act, LayerKind::kMoe);
  const std::int64_t dense = layer_activation_bytes(s.model, true, Recompute::kNone, a, ds.act, LayerKind::kDense);
  CHECK(moe - dense == 1'393'147'904 + 131'072 + 32 + 8 - 503'316'480);
  // ep 2: four local experts, each on a strided slice of the all-to-all
  // output; w1 and w3 each save a contiguous copy: + 2 x 4096 x 2 x 1.25 per token.
  const ActShape a2{4096, 1, 1, false, 2, false, 1, 1.25, 2, 4};
  CHECK(layer_activation_bytes(s.model, true, Recompute::kNone, a2, ds.act, LayerKind::kMoe) - moe == 20480 * 4096);

  // Time: DeepSpeed's decode (index_select 2 passes, the gate multiply's read
  // and fp32 write, the fp32 sum's read: 3 activation-dtype + 2 fp32 passes over
  // the 2 x 4096 routed copies of h) and the gate's fp32 input (2 + 4 B per
  // element of 4096 x h), x 3 (forward, backward twice), 32 layers, against
  // Megatron on the same layout.
  Spec mg = s;
  mg.training.framework = Framework::kMegatron;
  Layout lm = ok;
  REQUIRE_FALSE(resolve_layout(mg, &lm));
  const double extra_bytes = (3 * 2 + 2 * 4) * 2.0 * 4096 * 4096 + (2 + 4) * 4096.0 * 4096;
  CHECK(extra_bytes == 570'425'344.0);
  CHECK(memory_bound(s, ok) - memory_bound(mg, lm) ==
        Approx(32 * 3 * extra_bytes / (3350e9 * s.cluster.hbm_efficiency)).epsilon(1e-9));
}

TEST_CASE("Multi-token prediction trained under Megatron: parameters, activations and time on the last rank, by hand",
          "[moe][mtp]") {
  // The MoE model of Megatron-LM's gpt3_mcore_te_tp2_pp2_ep4_etp1_memory_speed test: h 1024, 32 heads, MLA
  // (q_lora 1536, kv_lora 512, qk 128 + 64, v 128), 32 experts of ffn 1024 + one shared, the first layer dense,
  // vocab 51,712, untied, one MTP module; tp 2, pp 2, ep 4, etp 1.
  const Model m = load_model_file(test::repo("tests/data/measurements/megatron-moe-mla-memory-speed.yaml"));
  Spec s = moe_spec(m, 8, 4096, 32);
  s.cluster = test::cluster("dgx-h100");
  s.training.flash_attention = true;
  Layout l = parse_layout("tp=2,pp=2,ep=4,etp=1,sp=1,zero=1,mbs=4");
  REQUIRE_FALSE(resolve_layout(s, &l));
  // Not trained (Megatron without --mtp-num-layers): nothing on any rank.
  CHECK(stage_params(m, l, 1).mtp == 0);
  CHECK(stage_params(m, l, 1, false).mtp_experts == 0);
  const StageParams last = stage_params(m, l, 1, true), first = stage_params(m, l, 0, true);
  CHECK(first.mtp == 0);
  // Per rank of the last stage, by hand: enorm, hnorm, final norm 3 x 1024; eh_proj 2 x 1024 x 1024 / tp 2;
  // the MTP layer as the decoder's last (MoE): MLA q 1024 x 1536 + 1536 + 1536 x 32 x 192 / 2, kv 1024 x 576 +
  // 512 + 512 x 32 x 256 / 2, out 32 x 128 x 1024 / 2; 2 norms 2 x 1024; router 32 x 1024 + expert bias 32;
  // shared expert 3 x 1024 x 1024 / 2; the word embedding the last rank builds for it, 51,712 / 2 x 1024.
  const std::int64_t attn = 1024LL * 1536 + 1536 + 1536LL * 32 * 192 / 2 + 1024LL * 576 + 512 + 512LL * 32 * 256 / 2 +
                            32LL * 128 * 1024 / 2;
  CHECK(attn == 11077632);
  const std::int64_t layer = attn + 2 * 1024 + 32 * 1024 + 32 + 3LL * 1024 * 1024 / 2;
  CHECK(last.mtp == 3 * 1024 + 2LL * 1024 * 1024 / 2 + layer + 51712LL / 2 * 1024);
  CHECK(last.mtp == 40213536);
  // Its routed experts: 32 / ep 4 = 8 of 3 x 1024 x 1024, sharded with the other experts (edp).
  CHECK(last.mtp_experts == 8LL * 3 * 1024 * 1024);
  CHECK(last.experts() == last.moe_layers * last.expert + 25165824);
  // Memory: the two MTP activation terms appear on the last stage only, with the second loss's fp32
  // softmax 4 B x s 4096 x b 4 x vocab/tp 25,856 and the layer's saved tensors among them.
  s.training.mtp = true;
  auto term = [&](int stage, const std::string& prefix) {
    std::int64_t bytes = -1;
    for (const Term& t : stage_terms(s, l, stage))
      if (t.name.rfind(prefix, 0) == 0) bytes = t.bytes;
    return bytes;
  };
  CHECK(term(0, "multi-token prediction") == -1);
  const std::int64_t x = 4096LL * 4 * 1024 * 2 / 2;  // s x b x h x 2 B / tp (sequence parallel)
  // The layer saves what the decoder's MoE layers save under Megatron (its profile's variant), plus
  // enorm and hnorm inputs (2 x s/tp x b x h x 2 B) with their fp32 rstd (2 x 4 B x s/tp x b) and the
  // [s/tp, b, 2h] concatenation eh_proj keeps (2 x s/tp x b x h x 2 B).
  const Profile& meg = profile(Framework::kMegatron);
  const ActShape a{4096, 4, 2, true, 2, false, 1, moe_expert_load(meg, s.training, 4), 4, 8};
  const std::int64_t moe_layer = layer_activation_bytes(m, true, Recompute::kNone, a, meg.act, LayerKind::kMoe);
  CHECK(term(1, "multi-token prediction: norms") == moe_layer + (2 * x + 2 * 4 * 4096LL * 4 / 2) + 2 * x);
  CHECK(term(1, "transformer layers") > 0);
  CHECK(term(1, "multi-token prediction: output") == x + 4 * 4096LL * 4 + 4LL * 4096 * 4 * 25856 +
                                                          (term(1, "final norm + output layer inputs") - x));
  // Without training them, the same layout predicts less on the last rank and nothing changes on the first.
  Spec off = s;
  off.training.mtp = false;
  CHECK(estimate_memory(off, l).stages[0].total() == estimate_memory(s, l).stages[0].total());
  CHECK(estimate_memory(off, l).stages[1].total() < estimate_memory(s, l).stages[1].total());
  // Time: the last rank runs the module (a "multi-token prediction" term), the first does not.
  double mtp_s = 0;
  for (const TimeTerm& t : stage_time_terms(s, l, 1))
    if (t.name == "multi-token prediction") mtp_s = t.seconds;
  CHECK(mtp_s > 0);
  for (const TimeTerm& t : stage_time_terms(s, l, 0)) CHECK(t.name != "multi-token prediction");
  // Only Megatron trains them: under fsdp (torchtitan) the layout is refused naming the framework.
  Spec fsdp = s;
  fsdp.training.framework = Framework::kFsdp;
  Layout lf = parse_layout("tp=1,pp=1,ep=1,zero=3,mbs=1");
  const auto problem = resolve_layout(fsdp, &lf);
  REQUIRE(problem);
  CHECK(problem->field == "framework");
  CHECK(problem->message.find("multi-token-prediction") != std::string::npos);
}

TEST_CASE("Megatron arguments: --mtp-num-layers trains the model's MTP modules, and a count unlike the model's is an error",
          "[moe][mtp][cli]") {
  TempDir dir;
  const std::string base = "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 16 --expert-model-parallel-size 64 "
                           "--use-distributed-optimizer --decoder-last-pipeline-num-layers 1 --micro-batch-size 1 "
                           "--recompute-activations --bf16 --moe-layer-freq ([0]*3+[1]*58)";
  auto explain = [&](const std::string& extra) {
    return run_paraplan({"explain", "--model", "deepseek-v3", "--gpus", "2048", "--gpu", "h800", "--seq-length", "4096",
                         "--global-batch-size", "15360", "--formulas", "--stage", "15", "--megatron-args", base + extra},
                        dir.path());
  };
  const Result without = explain(""), with = explain(" --mtp-num-layers 1");
  INFO(without.err << with.err);
  CHECK(without.out.find("multi-token prediction") == std::string::npos);
  CHECK(with.out.find("multi-token prediction") != std::string::npos);
  const Result bad = explain(" --mtp-num-layers 2");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--mtp-num-layers") != std::string::npos);
  CHECK(bad.err.find("mtp_layers is 1") != std::string::npos);
}

TEST_CASE("Megatron arguments: --moe-router-force-load-balancing sizes the busiest expert rank at the mean", "[moe][cli]") {
  // Megatron-LM@d98e8a64 moe/router.py:861-863: random router logits (a benchmark setting, used by NeMo's
  // GPT-OSS-120B H100 recipe): the expert GEMMs, all-to-alls and dispatched tokens at 1x the mean, not the
  // default 1.25x. Mixtral-8x7B, ep 8 on 64 H100: the memory of the dispatched tokens and the step shrink.
  Spec s = mixtral_on_64_h100(Framework::kMegatron);
  LayoutRequest plain, forced;
  const std::string base = "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 --expert-model-parallel-size 8 "
                           "--use-distributed-optimizer --micro-batch-size 1 --num-experts 8 --moe-router-topk 2 --bf16";
  plain.megatron_args = base;
  forced.megatron_args = base + " --moe-router-force-load-balancing";
  Spec a = s, b = s;
  const Layout la = layout_from_sources(&a, "test", plain), lb = layout_from_sources(&b, "test", forced);
  CHECK(la == lb);
  CHECK(a.training.moe_load_imbalance == 1.25);
  CHECK(b.training.moe_load_imbalance == 1.0);
  CHECK(estimate_memory(b, lb).stages[0].total() < estimate_memory(a, la).stages[0].total());
  CHECK(estimate_time(b, lb).step_s < estimate_time(a, la).step_s);
}

namespace {
// check/explain --format json, which exits 0 (fits) or 1 (does not): the report either way.
json run_json_moe(const TempDir& dir, const std::vector<std::string>& args) {
  const Result r = run_paraplan(args, dir.path());
  INFO(r.err);
  REQUIRE(r.code <= 1);
  return json::parse(r.out);
}
}  // namespace

TEST_CASE("Megatron's MoE dispatchers: allgather by default, alltoall, flex refused, EP overlap within Megatron's limits",
          "[moe][cli][megatron]") {
  TempDir dir;
  const std::string mixtral = "@SRC@/configs/examples/mixtral-8x7b-h100-64.yaml";
  const std::string line = "--tensor-model-parallel-size 1 --expert-model-parallel-size 8 --micro-batch-size 1 "
                           "--recompute-activations --use-distributed-optimizer";
  auto explain = [&](const std::string& extra) {
    return run_paraplan({"explain", mixtral, "--formulas", "--megatron-args", line + extra}, dir.path());
  };
  // Without the flag Megatron-LM@d98e8a64 dispatches by all-gather (transformer_config.py:891).
  const Result gather = explain("");
  INFO(gather.err);
  REQUIRE(gather.code <= 1);
  CHECK(gather.out.find("the allgather dispatcher") != std::string::npos);
  // Its persistent gather buffer: s 4096 x b 1 tokens x etp*ep 8 ranks x h 4096 x 2 B = 256 MiB = 0.250 GiB
  // (the sequence-parallel buffer, which it replaces, does not exist at tp 1).
  CHECK(gather.out.find("MoE all-gather dispatch buffer       2 B x s 4096 / tp 1 x b 1 x etp*ep 8 x h 4096 = 0.250 GiB") !=
        std::string::npos);
  const Result a2a = explain(" --moe-token-dispatcher-type alltoall");
  REQUIRE(a2a.code <= 1);
  CHECK(a2a.out.find("MoE all-gather dispatch buffer") == std::string::npos);
  // Per token and MoE layer, the all-gather moves every token of the group to every rank: 7/8 x 8 x (2 h B + 5 B per
  // expert) in, and the fp32 reduce-scatter 7/8 x 8 x 4 h B, about 42 h B per token; the all-to-all moves each
  // token's k = 2 copies, 7/8 of them off the rank, twice (dispatch, combine) at 2 B: about 7 h B, x 1.25 for the
  // busiest rank: the all-gather moves about 4.8x the bytes over the same links.
  const json jg = run_json_moe(dir, {"check", mixtral, "--format", "json", "--megatron-args", line});
  const json ja = run_json_moe(dir, {"check", mixtral, "--format", "json", "--megatron-args",
                                     line + " --moe-token-dispatcher-type alltoall"});
  const double ratio = jg.at("time").at("ep_comm_s").get<double>() / ja.at("time").at("ep_comm_s").get<double>();
  CHECK(ratio > 3.5);
  CHECK(ratio < 6.5);
  // flex (DeepEP, HybridEP) is not modelled: refused with the reason.
  const Result flex = explain(" --moe-token-dispatcher-type flex");
  CHECK(flex.code == 2);
  CHECK(flex.err.find("--moe-token-dispatcher-type: flex (DeepEP, HybridEP or NCCL-EP") != std::string::npos);
  // EP overlap: Megatron asserts the alltoall dispatcher (transformer_config.py:3016-3019) ...
  const Result no_a2a = explain(" --overlap-moe-expert-parallel-comm");
  CHECK(no_a2a.code == 2);
  CHECK(no_a2a.err.find("needs the alltoall dispatcher") != std::string::npos);
  // ... and no full recomputation (:3021-3023); with pp > 1 its extra warm-up micro-batch is not modelled.
  const Result full = run_paraplan({"check", mixtral, "--megatron-args",
                                    "--tensor-model-parallel-size 1 --expert-model-parallel-size 8 --micro-batch-size 1 "
                                    "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 "
                                    "--moe-token-dispatcher-type alltoall --overlap-moe-expert-parallel-comm"},
                                   dir.path());
  CHECK(full.code == 2);
  CHECK(full.err.find("full recomputation") != std::string::npos);
  const Result pp = run_paraplan({"check", mixtral, "--megatron-args",
                                  "--pipeline-model-parallel-size 2 --expert-model-parallel-size 8 --micro-batch-size 1 "
                                  "--moe-token-dispatcher-type alltoall --overlap-moe-expert-parallel-comm"},
                                 dir.path());
  CHECK(pp.code == 2);
  CHECK(pp.err.find("layout.pp: moe_ep_overlap with pp > 1 is not modelled") != std::string::npos);
  // Overlapped, the all-to-alls hide behind the other micro-batch's layer compute: less exposed, never more.
  const json jo = run_json_moe(dir, {"check", mixtral, "--format", "json", "--megatron-args",
                                     line + " --moe-token-dispatcher-type alltoall --overlap-moe-expert-parallel-comm"});
  CHECK(jo.at("time").at("ep_comm_s").get<double>() < 0.5 * ja.at("time").at("ep_comm_s").get<double>());
  CHECK(jo.at("peak_memory_bytes") == ja.at("peak_memory_bytes"));
  // --emit megatron gives both back, and reading the line back gives the same report.
  const Result e = run_paraplan({"explain", mixtral, "--emit", "megatron", "--megatron-args",
                                 line + " --moe-token-dispatcher-type alltoall --overlap-moe-expert-parallel-comm"},
                                dir.path());
  REQUIRE(e.code == 0);
  CHECK(e.out.find("--moe-token-dispatcher-type alltoall --overlap-moe-expert-parallel-comm") != std::string::npos);
  std::string emitted = e.out.substr(0, e.out.find('\n'));
  const json back = run_json_moe(dir, {"check", mixtral, "--format", "json", "--megatron-args", emitted});
  CHECK(back.at("time").at("ep_comm_s") == jo.at("time").at("ep_comm_s"));
  CHECK(back.at("peak_memory_bytes") == jo.at("peak_memory_bytes"));
  // A dense model has no dispatcher to set.
  write_text(dir.path() / "d.yaml", "model: llama-3.1-8b\ncluster: dgx-h100\nnum_nodes: 1\n"
                                    "training: {moe_ep_overlap: true}\n");
  const Result dense = run_paraplan({"check", "d.yaml", "--layout", "dp=8"}, dir.path());
  CHECK(dense.code == 2);
  CHECK(dense.err.find("training.moe_ep_overlap: the model has no experts") != std::string::npos);
}

TEST_CASE("Megatron's --moe-layer-freq must give the model's MoE layers: absent means every layer MoE", "[moe][cli][megatron]") {
  TempDir dir;
  // DeepSeek-V3: 3 dense layers, then 58 MoE (first_k_dense_replace 3). Megatron's default 1 makes all 61 MoE
  // (arguments.py:3520; gpt_layer_specs.py:647-650), a different model.
  const std::string line = "--pipeline-model-parallel-size 16 --expert-model-parallel-size 64 --decoder-last-pipeline-num-layers 1 "
                           "--use-distributed-optimizer --moe-token-dispatcher-type alltoall";
  auto check = [&](const std::string& extra) {
    return run_paraplan({"check", "--model", "deepseek-v3", "--gpus", "2048", "--gpu", "h800", "--megatron-args", line + extra},
                        dir.path());
  };
  const Result absent = check("");
  CHECK(absent.code == 2);
  CHECK(absent.err.find("absent, so Megatron makes every layer MoE") != std::string::npos);
  CHECK(absent.err.find("expected --moe-layer-freq ([0]*3+[1]*58)") != std::string::npos);
  CHECK(check(" --moe-layer-freq ([0]*3+[1]*58)").code <= 1);
  CHECK(check(" --moe-layer-freq [0,0,0]+[1]*58").code <= 1);  // the same 61 layers written another way
  const Result wrong = check(" --moe-layer-freq ([0]*2+[1]*59)");
  CHECK(wrong.code == 2);
  CHECK(wrong.err.find("the model's layer 2 is dense") != std::string::npos);
  const Result len = check(" --moe-layer-freq ([0]*3+[1]*50)");
  CHECK(len.code == 2);
  CHECK(len.err.find("gives 53 layers but the model has 61") != std::string::npos);
  const Result junk = check(" --moe-layer-freq [0,2]");
  CHECK(junk.code == 2);
  CHECK(junk.err.find("expected an integer or a list expression") != std::string::npos);
}
