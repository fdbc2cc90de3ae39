// paraplan against real runs: the Ultra-Scale Playbook's nanotron benchmarks on
// H100 (tests/data/measurements/ultrascale-playbook-pp1.csv, the pp = 1 rows of
// ../shared/measurements/ultrascale-playbook-1B-3B.csv copied with their source).
// Nothing here is fitted per model or per row: the nanotron profile is read
// from nanotron's code (costmodel/frameworks/nanotron.cpp) and the allocator
// terms from PyTorch's.
//
// Which statistic the column shows: nanotron logs both max_memory_allocated and
// max_memory_reserved (helpers.py:615-616 @67c5ebb6) and the playbook does not
// say which it plotted. The data cannot tell them apart outright (reserved >=
// allocated by a few percent); the column sits above the predicted allocated
// figure in most rows and is matched best by the predicted reserved figure
// (median signed error about -1% against -4% for allocated), so it is compared
// with reserved_bytes here.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "costmodel/frameworks/profile.hpp"
#include "costmodel/memory.hpp"
#include "costmodel/time.hpp"
#include "planner/layout_source.hpp"
#include "playbook_runs.hpp"
#include "published_llama3_fp8.hpp"
#include "test_helpers.hpp"

using namespace paraplan;
using paraplan::test::playbook_model;
using paraplan::test::playbook_spec;
using paraplan::test::read_csv;
using paraplan::test::read_timed_rows;
using paraplan::test::TimedRow;

namespace {

struct Row {
  std::string id, model, status;
  int nodes, dp, tp, pp, zero, mbs, grad_accum;
  double measured_gib;  // 0 when not published (crashed runs)
};

std::vector<Row> read_rows() {
  std::vector<Row> rows;
  for (const auto& f : read_csv("tests/data/measurements/ultrascale-playbook-pp1.csv"))
    rows.push_back({f[0], f[1], f[11], std::stoi(f[2]), std::stoi(f[4]), std::stoi(f[5]), std::stoi(f[6]),
                    std::stoi(f[7]), std::stoi(f[8]), std::stoi(f[9]), f[14].empty() ? 0.0 : std::stod(f[14])});
  return rows;
}

struct Prediction {
  MemoryEstimate e;
  double reserved_gib, allocated_gib;
};

Prediction predict(const Row& r) {
  Layout l;
  Spec s = playbook_spec(r.model, r.nodes, r.dp, r.tp, r.pp, r.zero, r.mbs, r.grad_accum, &l);
  const auto problem = resolve_layout(s, &l);
  INFO(r.id << ": " << (problem ? problem->message : ""));
  REQUIRE(!problem);
  Prediction p{estimate_memory(s, l), 0, 0};
  // The column is rank 0's: stage 0.
  p.reserved_gib = double(p.e.stages[0].reserved()) / kGiB;
  p.allocated_gib = double(p.e.stages[0].allocated()) / kGiB;
  return p;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Runs whose rank holds exactly what another run's rank holds (same model, tp,
// ZeRO stage, micro-batch; dp too under ZeRO-1, dp > 1 or not otherwise).
using Twin = std::tuple<std::string, int, int, int, int>;
Twin twin_key(const Row& r) { return {r.model, r.tp, r.zero, r.mbs, r.zero ? r.dp : std::min(r.dp, 2)}; }

// The allocator-flush warning against what the runs did: of the runs predicted
// to fit, those flagged (MemoryEstimate::flush_risk) and the others, each with
// how many crashed.
struct FlushTally {
  int flagged = 0, flagged_crashed = 0, unflagged = 0, unflagged_crashed = 0;
  void add(const MemoryEstimate& e, bool ran) {
    if (!e.fits) return;
    (e.flush_risk ? flagged : unflagged) += 1;
    (e.flush_risk ? flagged_crashed : unflagged_crashed) += !ran;
  }
  void check(int f, int fc, int u, int uc) const {
    INFO("flagged " << flagged << " (" << flagged_crashed << " crashed); fit unflagged " << unflagged << " ("
                    << unflagged_crashed << " crashed)");
    CHECK(flagged == f);
    CHECK(flagged_crashed == fc);
    CHECK(unflagged == u);
    CHECK(unflagged_crashed == uc);
  }
};

}  // namespace

TEST_CASE("nanotron on H100 (Ultra-Scale Playbook, pp = 1): rank-0 memory from physical terms", "[measurements]") {
  const std::vector<Row> rows = read_rows();
  REQUIRE(rows.size() == 412);
  std::set<Twin> ran_twins;
  for (const Row& r : rows)
    if (r.status == "ran") ran_twins.insert(twin_key(r));

  std::vector<double> err_reserved, err_allocated;
  int ran = 0, ran_not_fit = 0, crashed = 0, crashed_not_fit = 0, crashed_alone = 0, crashed_alone_not_fit = 0;
  // What `check --strict` fails: not fitting, or fitting only if the allocator flushes mid-step (flush_risk).
  int ran_strict = 0, crashed_strict = 0, crashed_alone_strict = 0;
  FlushTally flush;
  // How much of the stream-held reduce-scatter inputs the runs realize: what a run measured beyond the prediction
  // without them, in full [s, b, h] bf16 blocks per layer, for the runs that ran at tp > 1 with micro-batches of 4
  // or more (blocks of 64 MiB or more), by model and by gradient accumulation (ga > 1 or not).
  std::map<std::pair<std::string, bool>, std::vector<double>> realized;
  for (const Row& r : rows) {
    const Prediction p = predict(r);
    flush.add(p.e, r.status == "ran");
    const bool strict_fails = !p.e.fits || p.e.flush_risk;
    if (r.status == "ran" && r.tp > 1 && r.mbs >= 4) {
      const Model& m = playbook_model(r.model);
      const double block = 2.0 * 4096 * r.mbs * m.hidden_size / kGiB;
      const auto& st = p.e.stages[0];
      const double without_held = double(st.reserved() - st.held_for_streams) / kGiB;
      realized[{r.model, r.grad_accum > 1}].push_back((r.measured_gib - without_held) / block / m.num_layers);
    }
    if (r.status == "ran") {
      ++ran;
      REQUIRE(r.measured_gib > 0);
      err_reserved.push_back((p.reserved_gib - r.measured_gib) / r.measured_gib);
      err_allocated.push_back((p.allocated_gib - r.measured_gib) / r.measured_gib);
      ran_strict += strict_fails;
      if (!p.e.fits) {
        ++ran_not_fit;
        WARN("ran but predicted not to fit: " << r.id << " measured " << r.measured_gib << " GiB, device "
                                              << double(p.e.device_bytes) / kGiB << " GiB");
      }
    } else {
      ++crashed;
      crashed_not_fit += !p.e.fits;
      crashed_strict += strict_fails;
      // A crash whose per-rank twin ran was not a memory failure.
      if (!ran_twins.count(twin_key(r))) {
        ++crashed_alone;
        crashed_alone_not_fit += !p.e.fits;
        crashed_alone_strict += strict_fails;
      }
    }
  }
  std::vector<double> abs_reserved;
  for (double e : err_reserved) abs_reserved.push_back(std::abs(e));
  const double med_abs = median(abs_reserved), med_signed = median(err_reserved),
               med_signed_alloc = median(err_allocated);
  INFO("ran " << ran << ": median |error| " << med_abs << ", signed " << med_signed << " (allocated: "
              << med_signed_alloc << "); ran predicted not to fit " << ran_not_fit << "; crashed " << crashed
              << " predicted not to fit " << crashed_not_fit << "; crashed with no twin that ran "
              << crashed_alone << ", predicted not to fit " << crashed_alone_not_fit);
  CHECK(ran == 333);
  CHECK(crashed == 79);
  // Issue 13's bar: median |error| <= 8 %, at most 1 % of the runs that ran
  // predicted not to fit.
  CHECK(med_abs <= 0.08);
  CHECK(ran_not_fit <= ran / 100);
  // The column is nearer reserved than allocated (see the header).
  CHECK(std::abs(med_signed) < std::abs(med_signed_alloc));
  // Crashed rows: 22 of the 79 have a per-rank twin that ran, so they did not
  // run out of memory; of the other 57, at least 80 % are predicted not to fit
  // (issue 13 asks for 90 % of all crashed rows: not reached, see the README).
  CHECK(crashed_alone == 57);
  CHECK(crashed_alone_not_fit * 10 >= crashed_alone * 8);
  // The CI gate at its strictest (`check --strict`, which also fails a layout that fits only if the allocator
  // flushes mid-step) catches 90 % of those 57 at the price of 4 of the 333 runs that ran (1.2 %: the 3B at tp 16
  // micro-batch 32 without accumulation, and tp 32 at micro-batch 64-128, all with 34-41 GiB held for the NCCL
  // stream). MEASURED 2026-11-28: 52 of 57 (48 not fitting, 4 flagged), 52 of all 79; 4 of 333.
  INFO("check --strict fails " << crashed_alone_strict << " of the " << crashed_alone << " crashed with no twin that ran, "
                               << crashed_strict << " of all " << crashed << ", " << ran_strict << " of the " << ran
                               << " that ran");
  CHECK(crashed_alone_strict * 10 >= crashed_alone * 9);
  CHECK(crashed_strict - crashed_not_fit == 4);
  CHECK(ran_strict == 4);
  // 19 of the twins are the same runs again: the rows whose id ends in "-run2" repeat a layout (model, nodes, dp,
  // tp, zero, micro-batch, accumulation) whose first run ran, every one of them crashed, and their first runs
  // measured 34.8-69.8 GiB, under the 75.7 GiB usable: a rerun batch that failed, not memory. No memory model
  // separates a run from itself, so 90 % of all 79 crashed rows cannot be predicted not to fit.
  std::map<std::string, const Row*> by_id;
  for (const Row& r : rows) by_id[r.id] = &r;
  int reruns = 0;
  double first_max = 0;
  for (const Row& r : rows) {
    const std::string tail = "-run2";
    if (r.id.size() <= tail.size() || r.id.compare(r.id.size() - tail.size(), tail.size(), tail) != 0) continue;
    ++reruns;
    CHECK(r.status != "ran");
    const auto first = by_id.find(r.id.substr(0, r.id.size() - tail.size()));
    REQUIRE(first != by_id.end());
    CHECK(first->second->status == "ran");
    CHECK(twin_key(*first->second) == twin_key(r));
    first_max = std::max(first_max, first->second->measured_gib);
  }
  CHECK(reruns == 19);
  CHECK(first_max < 70.0);
  // The allocator-flush warning (the figures its message quotes): of the runs predicted to fit, those whose held
  // reduce-scatter inputs would not fit beside the rest crashed 4 times in 8 (tp 16-32 at micro-batch 32-128 and
  // tp 2 at micro-batch 4), the others 27 times in 356 (22 of them reruns or twins of runs that ran).
  flush.check(8, 4, 356, 27);
  // The held blocks as the runs realized them (the model holds 2 per layer, the whole forward's row-parallel
  // outputs): with gradient accumulation (the host free to run on into the next micro-batch) the 3B runs realize
  // about the forward's 2 per layer, the 1B runs about 3 (some 50-60 blocks in all on either model, as if a
  // count of queued work bounded them rather than the layers); with one micro-batch a step fewer. MEASURED
  // medians on 2026-11-28: 1B 3.16 (49 runs) and 1.53 (19), 3B 2.03 (47) and 1.37 (19); 26 of the 134 realize under
  // half a block per layer (the same per-rank layout near 0 in one run and near 3 in another: 1B tp 8 micro-batch
  // 16, ZeRO 0).
  const auto med = [&](const char* model, bool ga) {
    const auto& v = realized.at({model, ga});
    INFO(model << (ga ? " ga > 1: " : " ga = 1: ") << v.size() << " runs, median " << median(v) << " blocks per layer");
    CHECK(v.size() >= 19);
    return median(v);
  };
  const double b1 = med("1B", true), b1s = med("1B", false), b3 = med("3B", true), b3s = med("3B", false);
  CHECK((b1 > 2.8 && b1 < 3.5));
  CHECK((b3 > 1.8 && b3 < 2.3));
  CHECK(b1s < 0.6 * b1);
  CHECK(b3s < 0.75 * b3);
  CHECK(std::abs(b1 * 16 - b3 * 28) < 0.2 * b3 * 28);  // about the same count of blocks in all
}

// ---- Megatron-LM: its own memory regression tests ---------------------------
//
namespace {

// The spec of Megatron-LM's gpt3_7b_*_memory_speed CI cases on one node of 8
// GPUs (seq 8192, global batch 8, TE fused attention), with the vocabulary
// padded as Megatron pads it, and `layout` resolved into *l.
Spec megatron_golden_spec(const char* cluster, const char* layout, Layout* l) {
  static const Model base = load_model_file(test::repo("tests/data/measurements/megatron-gpt3-7b-memory-speed.yaml"));
  Spec s;
  s.model = base;
  s.cluster = test::cluster(cluster);
  s.num_nodes = 1;
  s.training.framework = Framework::kMegatron;
  s.training.seq_length = 8192;
  s.training.global_batch_size = 8;
  s.training.flash_attention = true;  // TE fused attention
  *l = parse_layout(layout);
  // Megatron pads the vocabulary to a multiple of 128 x tp.
  const int pad = 128 * l->tp;
  s.model.vocab_size = (base.vocab_size + pad - 1) / pad * pad;
  REQUIRE(!resolve_layout(s, l));
  return s;
}

// A GPT model as Megatron-LM's defaults build it where a published table gives only its shape: ffn 4h, GeLU,
// LayerNorm, biases, learned positions, dropout 0.1 (megatron/training/arguments.py, transformer_config.py).
Model megatron_gpt(const char* name, int heads, int hidden, int layers, int vocab, int seq, bool tied) {
  Model m;
  m.name = std::string("gpt-") + name;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = m.num_kv_heads = heads;
  m.head_dim = hidden / heads;
  m.ffn_hidden_size = 4 * hidden;
  m.vocab_size = vocab;
  m.tie_embeddings = tied;
  m.activation = Activation::kGelu;
  m.normalization = Normalization::kLayerNorm;
  m.bias = true;
  m.position_embedding = PositionEmbedding::kLearned;
  m.max_position_embeddings = seq;
  m.hidden_dropout = m.attention_dropout = 0.1;
  return m;
}

// A published table's run of model m: `gpus` GPUs of the shipped cluster file, sequence and global batch.
Spec published_run(const Model& m, const char* cluster, int gpus, int seq, int batch);

// A run of NeMo's launcher in FP8 on DGX-H100 (the NeMo tables' tests below): Megatron-core with
// Transformer Engine and flash attention, the vocabulary padded to a multiple of 128 x tp
// (make_vocab_size_divisible_by 128), Apex's DistributedFusedAdam overlapping its gradient and parameter
// syncs and reducing in bf16 (grad_sync_dtype=bf16) or in its fp32 dtype.
Spec nemo_fp8_run(Model m, int tp, int gpus, int seq, int batch, bool bf16_reduce) {
  const int pad = 128 * tp;
  m.vocab_size = (m.vocab_size + pad - 1) / pad * pad;
  Spec s = published_run(m, "dgx-h100", gpus, seq, batch);
  s.training.framework = Framework::kMegatron;
  s.training.flash_attention = true;
  s.training.fp8 = true;
  s.training.grad_reduce_dtype = bf16_reduce ? DType::kBf16 : DType::kFp32;
  s.training.grad_reduce_dtype_given = true;
  s.training.overlap_dp_comm = s.training.overlap_param_gather = true;
  return s;
}

Spec published_run(const Model& m, const char* cluster, int gpus, int seq, int batch) {
  Spec s;
  s.model = m;
  s.cluster = test::cluster(cluster);
  s.num_nodes = gpus / 8;
  s.training.seq_length = seq;
  s.training.global_batch_size = batch;
  return s;
}

}  // namespace

// Megatron-LM's CI logs torch.cuda.memory_stats() to TensorBoard from the last
// rank (megatron/training/global_vars.py:241) and keeps the values as golden
// files. Two dense GPT cases run on one node of 8 GPUs
// (tests/test_utils/recipes/h100/gpt.yaml: nodes 1, gpus 8), TE, bf16,
// distributed optimizer, overlapped grad reduce and param gather, no gradient
// accumulation fusion, seq 8192, global batch 8. mem-max-allocated-bytes is
// taken after the first step (the first step's peak has no Adam state yet).
TEST_CASE("Megatron-LM's memory regression tests: max_memory_allocated of the last rank", "[measurements][megatron]") {
  struct Golden {
    const char* name;
    const char* cluster;
    const char* layout;
    double measured_max_allocated;
    double measured_allocated;  // between steps: model state + persistent buffers
    const char* source;
  };
  // NVIDIA/Megatron-LM@d98e8a64, tests/functional_tests/test_cases/gpt/<case>/golden_values_<env>.json.
  const Golden rows[] = {
      {"gpt3_7b_tp4_pp1_memory_speed, H100", "dgx-h100", "tp=4,pp=1,zero=1,mbs=2", 57'143'791'616.0,
       20'663'519'232.0, "gpt3_7b_tp4_pp1_memory_speed/golden_values_dev_dgx_h100.json"},
      {"gpt3_7b_tp4_pp1_memory_speed, A100", "dgx-a100-80gb", "tp=4,pp=1,zero=1,mbs=2", 58'188'115'968.0,
       20'634'103'808.0, "gpt3_7b_tp4_pp1_memory_speed/golden_values_dev_dgx_a100.json"},
      // --num-layers-per-virtual-pipeline-stage 1: 8 chunks of one layer per rank.
      {"gpt3_7b_tp1_pp4_memory_speed, H100", "dgx-h100", "tp=1,pp=4,vpp=8,zero=1,mbs=1", 60'720'852'992.0,
       24'808'996'864.0, "gpt3_7b_tp1_pp4_memory_speed/golden_values_dev_dgx_h100.json"},
      {"gpt3_7b_tp1_pp4_memory_speed, A100", "dgx-a100-80gb", "tp=1,pp=4,vpp=8,zero=1,mbs=1", 60'489'064'448.0,
       24'511'029'248.0, "gpt3_7b_tp1_pp4_memory_speed/golden_values_dev_dgx_a100.json"},
  };
  for (const Golden& g : rows) {
    Layout l;
    const Spec s = megatron_golden_spec(g.cluster, g.layout, &l);
    REQUIRE(l.dp == 2);
    const MemoryEstimate e = estimate_memory(s, l);
    const MemoryBreakdown& last = e.stages[l.pp - 1];  // the last rank logs
    const double peak = double(last.allocated());
    const double state = double(last[Category::kWeights] + last[Category::kGradients] + last[Category::kOptimizer] +
                                last.runtime_in_allocator);
    INFO(g.name << " [" << g.source << "]: predicted max allocated " << peak << " vs " << g.measured_max_allocated
                << " (" << 100 * (peak - g.measured_max_allocated) / g.measured_max_allocated << "%); between steps "
                << state << " vs " << g.measured_allocated << " ("
                << 100 * (state - g.measured_allocated) / g.measured_allocated << "%)");
    CHECK(std::abs(peak - g.measured_max_allocated) / g.measured_max_allocated <= 0.03);
    // Between steps the pp = 4 last stage holds 1.4 GB more than its model
    // state (not yet explained); tp = 4 is within 0.5 %.
    CHECK(std::abs(state - g.measured_allocated) / g.measured_allocated <= 0.07);
  }
}

namespace {

// Megatron-LM's MoE memory regression test, gpt3_mcore_te_tp2_pp2_ep4_etp1_memory_speed
// (NVIDIA/Megatron-LM@d98e8a64 tests/functional_tests/test_cases/moe/<case>/model_config.yaml): a
// DeepSeek-style model (multi-latent attention, 32 routed experts top-4 + one shared, the first layer
// dense, one multi-token-prediction module) on one node of 8 H100s, tp 2, pp 2 with 4 virtual stages
// per rank, ep 4, etp 1, SP, distributed optimizer, micro-batch 4 of seq 4096, global batch 32,
// --attention-backend unfused, --cross-entropy-loss-fusion, bf16. The last rank logs.
Spec megatron_moe_golden_spec(Layout* l) {
  Spec s;
  s.model = load_model_file(test::repo("tests/data/measurements/megatron-moe-mla-memory-speed.yaml"));
  s.cluster = test::cluster("dgx-h100");
  s.num_nodes = 1;
  s.training.framework = Framework::kMegatron;
  s.training.seq_length = 4096;
  s.training.global_batch_size = 32;
  s.training.flash_attention = false;       // --attention-backend unfused
  s.training.cross_entropy_fusion = true;   // --cross-entropy-loss-fusion
  s.training.gradient_accumulation_fusion = true;
  s.training.mtp = true;                    // --mtp-num-layers 1
  s.training.moe_grouped_gemm = true;       // --moe-grouped-gemm
  *l = parse_layout("tp=2,pp=2,vpp=4,ep=4,etp=1,sp=1,zero=1,mbs=4");
  REQUIRE(!resolve_layout(s, l));
  return s;
}

}  // namespace

TEST_CASE("Megatron-LM's MoE memory regression test: max_memory_allocated of the last rank", "[measurements][megatron]") {
  // golden_values_dev_dgx_h100.json at d98e8a64: mem-max-allocated-bytes 57,920,471,040 from step 3
  // to 29 (golden_values_dev_dgxh100_dgxc.json: 57,920,647,168 from step 3), rising to 60,111,630,336
  // by step 40 on one of the two clusters as routing drifts; mem-allocated-bytes (between steps)
  // 6,632,031,744 from step 2 on.
  const double measured_peak = 57'920'471'040.0, measured_state = 6'632'031'744.0;
  Layout l;
  const Spec s = megatron_moe_golden_spec(&l);
  REQUIRE(l.dp == 2);
  REQUIRE(l.edp() == 1);
  const MemoryEstimate e = estimate_memory(s, l);
  const MemoryBreakdown& last = e.stages[l.pp - 1];
  const double peak = double(last.allocated());
  const double state = double(last[Category::kWeights] + last[Category::kGradients] + last[Category::kOptimizer] +
                              last.runtime_in_allocator);
  const double ep = peak / measured_peak - 1, es = state / measured_state - 1;
  WARN("Megatron MoE CI (tp2 pp2 vpp4 ep4, MLA, MTP): predicted max allocated " << peak << " vs " << measured_peak
       << " (" << 100 * ep << "%), between steps " << state << " vs " << measured_state << " (" << 100 * es << "%)");
  // Before the multi-token-prediction module the last rank trains was modelled: -13.6 % and -21.7 %;
  // with it -3.7 % and -7.6 %; with Transformer Engine's cuBLAS workspaces (one + four for the grouped
  // GEMMs) and the fused cross-entropy's fp32 copy: -0.5 % and -5.0 % (0.33 GB between steps unexplained).
  CHECK(std::abs(ep) <= 0.02);
  CHECK(std::abs(es) <= 0.07);
  // The same run's iteration-time (golden_values_dev_dgx_h100.json, median of steps 4-50: 1.0266 s; unfused
  // attention; NVTE_ALLOW_NONDETERMINISTIC_ALGO=0 but not --deterministic-mode): the time model is far too fast
  // on this small MoE, whose 16 layers of h 1024 launch many small kernels (permutation, grouped GEMMs of 8 local
  // experts, the router in fp32) that nothing prices yet.
  const double step = estimate_time(s, l).step_s, et = step / 1.0266 - 1;
  WARN("Megatron MoE CI step time: predicted " << step << " s vs 1.0266 s (" << 100 * et << "%)");
  CHECK(et < 0);
  CHECK(et > -0.5);
}

namespace {

// The value of Megatron flag `flag` in a space-separated argument string, or "" (absent), "1" (a bare flag).
std::string megatron_flag(const std::string& args, const std::string& flag) {
  std::istringstream in(args);
  std::vector<std::string> w{std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] == flag) return i + 1 < w.size() && w[i + 1].rfind("--", 0) != 0 ? w[i + 1] : "1";
  return "";
}

}  // namespace

namespace {

// One table of Megatron-LM functional-test runs (tests/data/measurements/megatron-ci-small-goldens*.txt) on
// `cluster`: each run's own Megatron arguments go through paraplan's reader (--megatron-args) onto the small
// GPT; the flags that change the architecture (untied, no biases, RMSNorm, dropout, experts) set the model as
// they set Megatron's, the vocabulary padded to 128 x tp as Megatron pads it. Returns |error| per run
// (last rank's predicted allocated_bytes against max_memory_allocated), by case.
std::map<std::string, double> functional_test_errors(const char* table, const char* cluster, std::string* report) {
  std::ifstream in(test::repo(table));
  REQUIRE(in);
  const Model base = load_model_file(test::repo("tests/data/measurements/megatron-ci-gpt3-small.yaml"));
  std::map<std::string, double> errors;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, '|');) f.push_back(x);
    REQUIRE(f.size() == 4);
    const std::string& args = f[3];
    Spec s;
    s.model = base;
    Model& m = s.model;
    auto flag = [&](const char* k) { return megatron_flag(args, k); };
    if (!flag("--untie-embeddings-and-output-weights").empty()) m.tie_embeddings = false;
    if (!flag("--disable-bias-linear").empty()) m.bias = false;
    if (flag("--normalization") == "RMSNorm") m.normalization = Normalization::kRmsNorm;
    if (!flag("--hidden-dropout").empty()) m.hidden_dropout = std::stod(flag("--hidden-dropout"));
    if (!flag("--attention-dropout").empty()) m.attention_dropout = std::stod(flag("--attention-dropout"));
    if (!flag("--num-experts").empty()) {
      m.num_experts = std::stoi(flag("--num-experts"));
      m.experts_per_token = flag("--moe-router-topk").empty() ? 2 : std::stoi(flag("--moe-router-topk"));  // Megatron's default 2
      m.moe_ffn_hidden_size = m.ffn_hidden_size;  // --moe-ffn-hidden-size defaults to --ffn-hidden-size
    }
    const int tp = flag("--tensor-model-parallel-size").empty() ? 1 : std::stoi(flag("--tensor-model-parallel-size"));
    m.vocab_size = (m.vocab_size + 128 * tp - 1) / (128 * tp) * (128 * tp);
    s.cluster = test::cluster(cluster);
    s.num_nodes = 1;
    s.training.framework = Framework::kMegatron;
    s.training.flash_attention = true;  // --attention-backend auto: Transformer Engine's flash / fused attention
    LayoutRequest req;
    req.megatron_args = args;
    const Layout l = layout_from_sources(&s, table, req);
    const double predicted = double(estimate_memory(s, l).stages[l.pp - 1].allocated());
    const double measured = std::stod(f[1]), e = predicted / measured - 1;
    errors[f[0]] = e;
    *report += fmt::format("\n  {:<95} {:>6.3f} GB vs {:6.3f} GB ({:+.1f}%)", f[0], predicted / 1e9, measured / 1e9, 100 * e);
  }
  return errors;
}

}  // namespace

TEST_CASE("Megatron-LM's functional tests on H100 and A100: the last rank's max_memory_allocated, small GPT and MoE runs",
          "[measurements][megatron]") {
  for (const auto& [table, cluster, runs] :
       {std::tuple{"tests/data/measurements/megatron-ci-small-goldens.txt", "dgx-h100", 37},
        std::tuple{"tests/data/measurements/megatron-ci-small-goldens-a100.txt", "dgx-a100-80gb", 33}}) {
    std::string report;
    const std::map<std::string, double> errors = functional_test_errors(table, cluster, &report);
    REQUIRE(int(errors.size()) == runs);
    std::vector<double> abs_err;
    for (const auto& [name, e] : errors) {
      // On the A100s the fused cross-entropy run holds about one more fp32 logit shard than on the
      // H100s (2.245 against 1.838 GB for the same arguments): the torch.compile'd kernels differ
      // there; the profile holds the H100's one extra copy.
      if (std::string(cluster) == "dgx-a100-80gb" && name == "gpt/gpt3_mcore_te_tp2_pp2_cross_entropy_loss_fusion") {
        CHECK(e < -0.15);
        continue;
      }
      abs_err.push_back(std::abs(e));
      INFO(cluster << " " << name << ": " << 100 * e << "%");
      CHECK(std::abs(e) <= (std::string(cluster) == "dgx-h100" ? 0.06 : 0.08));
    }
    const double med = median(abs_err);
    WARN("Megatron functional tests on " << cluster << ", last rank's max_memory_allocated: median |error| " << 100 * med
         << "%, max " << 100 * *std::max_element(abs_err.begin(), abs_err.end()) << "%" << report);
    CHECK(med <= 0.035);
  }
}

// torchtitan's own published benchmarks (pytorch/torchtitan@b5bcd76c benchmarks/llama3_h100_202412_torchtitan.md,
// Tables 1 and 3, run at torchtitan 9dec370 with torch 1963fc8 on Grand Teton: 8 H100 96 GB HBM2e per host, 500 W):
// Llama 3.1 8B, FSDP only (zero=3), no torch.compile, no Float8, local batch 2, seq 8192 (train_configs/llama3_8b.toml
// at 9dec370), selective activation checkpointing with the "op" policy (the config's selective_ac_option = 'op').
// Memory(GiB) is torchtitan's max_reserved_gib (torchtitan/metrics.py:55-64 at 9dec370: reserved_bytes.all.peak /
// 1024^3), the maximum over the GPUs: the caching allocator's reserved peak, without the CUDA context and NCCL.
TEST_CASE("torchtitan's published Llama 3.1 8B FSDP runs on H100: max reserved memory", "[measurements][fsdp]") {
  struct Row {
    int gpus;
    double max_reserved_gib;
  };
  const Row rows[] = {{8, 82.4}, {128, 67.0}};  // Table 1 (8 GPUs, global batch 16), Table 3 (128 GPUs, 256)
  for (const Row& r : rows) {
    Spec s = test::spec_for(test::model("llama-3.1-8b"), r.gpus, 8192, 2 * r.gpus);
    s.cluster = test::cluster("dgx-h100");
    s.cluster.gpu.memory_gib = 96e9 / double(1 << 30);  // H100 96 GB HBM2e (the benchmark's hardware section)
    s.num_nodes = r.gpus / 8;
    s.training.framework = Framework::kFsdp;
    s.training.flash_attention = true;
    Layout l = parse_layout(fmt::format("dp={},zero=3,recompute=selective,mbs=2", r.gpus));
    REQUIRE(!resolve_layout(s, &l));
    const MemoryEstimate e = estimate_memory(s, l);
    const double predicted = double(e.reserved_bytes) / double(1 << 30), err = predicted / r.max_reserved_gib - 1;
    WARN("torchtitan Llama 3.1 8B FSDP, " << r.gpus << " H100, op-SAC, local batch 2: predicted max reserved "
                                            << predicted << " GiB, published " << r.max_reserved_gib << " GiB ("
                                            << 100 * err << "%)");
    // -4.6 % and -3.6 % on 2026-11-27, with the loss's backward peak (without it -14 %).
    CHECK(std::abs(err) <= 0.06);
    CHECK(e.fits);
  }
}

// The same benchmark page's Table 2: Llama 3.1 8B on 8 H100 (96 GB) with FSDP over the dp x cp ranks and
// context parallelism 1-8 (dp x cp = 8; torchtitan@9dec370 parallelize_llama.py:80-85 shards over "dp_shard_cp"),
// local batch 1, the sequence 32,768 tokens per rank (32K-256K in all), full activation checkpointing,
// torch.compile and Float8 on the blocks' linears. The peak is the loss's backward (the fp32 logits of 32,768
// tokens x 128,256, 15.7 GiB a tensor), which neither touches: torchtitan@9dec370 compiles each TransformerBlock
// only (parallelize_llama.py:297-306) and runs the loss eagerly (train.py:131-138, "compiling loss function causes
// CUDA errors"), and Float8 swaps every Linear but the output layer (torchtitan/float8.py:99); with full
// checkpointing a block keeps only its input. Predicted as bf16 eager runs (paraplan's fp8 is Transformer
// Engine's); the same prediction for every row, measured within 0.6 GiB of each other.
TEST_CASE("torchtitan's published Llama 3.1 8B FSDP + context-parallel runs on H100: max reserved memory",
          "[measurements][fsdp]") {
  struct Row {
    int dp, cp;
    double max_reserved_gib;
  };
  const Row rows[] = {{8, 1, 83.9}, {4, 2, 84.2}, {2, 4, 84.0}, {1, 8, 84.5}};
  for (const Row& r : rows) {
    Spec s = test::spec_for(test::model("llama-3.1-8b"), 8, 32768 * r.cp, r.dp);
    s.cluster = test::cluster("dgx-h100");
    s.cluster.gpu.memory_gib = 96e9 / double(1 << 30);
    s.training.framework = Framework::kFsdp;
    s.training.flash_attention = true;
    Layout l = parse_layout(fmt::format("dp={},cp={},zero=3,recompute=full,mbs=1", r.dp, r.cp));
    REQUIRE(!resolve_layout(s, &l));
    const MemoryEstimate e = estimate_memory(s, l);
    const double predicted = double(e.reserved_bytes) / double(1 << 30), err = predicted / r.max_reserved_gib - 1;
    WARN("torchtitan Llama 3.1 8B FSDP " << r.dp << " CP " << r.cp << ", seq " << 32768 * r.cp
                                         << ", full AC: predicted max reserved " << predicted << " GiB, published "
                                         << r.max_reserved_gib << " GiB (" << 100 * err << "%)");
    // -0.9 % to -1.6 % on 2026-11-28.
    CHECK(std::abs(err) <= 0.05);
  }
}

// Table 4 of that page: Llama 3.1 70B on 256 H100 (96 GB), FSDP 32 x TP 8 (sequence parallel, loss parallel: on by
// default at tp > 1, torchtitan@9dec370 torchtitan/parallelisms/parallel_dims.py:119-120, train.py:225-228), local batch 16, seq 8192,
// full activation checkpointing, torch.compile and Float8 on the blocks: 71.9 GiB. The loss is vocab-parallel
// (14 B per logit forward, 16 B backward: fsdp.cpp) and the output layer saves its all-gathered input; before
// those two terms (2026-11-28) the prediction was 53.3 GiB (-26 %), now 62.8 GiB (-12.6 %). The rest is NOT
// explained: the Float8 casts and compiled blocks under TP are not modelled, and AsyncTP (the table's second row,
// 67.6 GiB) lowers the measurement by 4.3 GiB, which says the peak lies in a block's recomputation rather than at
// the loss, where paraplan puts it. Held here as a known shortfall.
TEST_CASE("torchtitan's published Llama 3.1 70B FSDP + TP run on H100: max reserved memory (a known shortfall)",
          "[measurements][fsdp]") {
  Spec s = test::spec_for(test::model("llama-3.1-70b"), 256, 8192, 512);
  s.cluster = test::cluster("dgx-h100");
  s.cluster.gpu.memory_gib = 96e9 / double(1 << 30);
  s.num_nodes = 32;
  s.training.framework = Framework::kFsdp;
  s.training.flash_attention = true;
  Layout l = parse_layout("dp=32,tp=8,sp=1,zero=3,recompute=full,mbs=16");
  REQUIRE(!resolve_layout(s, &l));
  const MemoryEstimate e = estimate_memory(s, l);
  const double predicted = double(e.reserved_bytes) / double(1 << 30), err = predicted / 71.9 - 1;
  WARN("torchtitan Llama 3.1 70B FSDP 32 TP 8, full AC: predicted max reserved " << predicted
                                                                                 << " GiB, published 71.9 GiB ("
                                                                                 << 100 * err << "%)");
  CHECK(err < 0);
  CHECK(err > -0.15);
  CHECK(e.fits);
}

TEST_CASE("NeMo Megatron-Bridge's GPT-OSS-120B on 64 H100 (BF16): tokens/s of a measured MoE run", "[measurements][moe]") {
  // NVIDIA-NeMo/Megatron-Bridge@067f987d docs/performance-summary.md and performance-summary-archive.md,
  // "Model: GPT OSS 120B", DGX-H100 rows: 64 GPUs, BF16, GBS 1280, MBS 1, seq 4096, TP 1, PP 4, CP 1, EP 8:
  // 5,993 (26.02), 5,984 (26.02.01), 5,810 (26.04), 5,824 (26.04.01) tokens/s/GPU. The recipe
  // (src/megatron/bridge/perf_recipes/gpt_oss/h100/gpt_oss.py, gpt_oss_120b_pretrain_64gpu_h100_bf16_config):
  // no SP, moe_router_force_load_balancing (so the busiest expert rank holds the mean: imbalance 1),
  // selective recompute of layernorm and moe_act only (not expressible: recompute=none here; both are
  // memory-bound re-runs), grouped GEMMs, fused cross-entropy, Megatron's default fp32 reduction.
  Spec s;
  s.model = load_model_file(test::repo("tests/data/measurements/gpt-oss-120b.yaml"));
  REQUIRE(count_params(s.model).total == 116'829'154'368);
  s.cluster = test::cluster("dgx-h100");
  s.num_nodes = 8;
  s.training.framework = Framework::kMegatron;
  s.training.seq_length = 4096;
  s.training.global_batch_size = 1280;
  s.training.flash_attention = true;
  s.training.moe_load_imbalance = 1.0;
  s.training.moe_grouped_gemm = true;
  s.training.cross_entropy_fusion = true;
  s.training.grad_dtype = DType::kFp32;
  Layout l = parse_layout("tp=1,pp=4,ep=8,etp=1,zero=1,recompute=none,mbs=1");
  REQUIRE(!resolve_layout(s, &l));
  REQUIRE(l.dp == 16);
  CHECK(estimate_memory(s, l).fits);
  const double predicted = estimate_time(s, l).tokens_per_s / l.gpus();
  std::string line;
  for (const double measured : {5993.0, 5984.0, 5810.0, 5824.0}) {
    const double e = predicted / measured - 1;
    line += fmt::format(" {:.0f} ({:+.1f}%)", measured, 100 * e);
    // Where paraplan stands: the MoE step is priced about half again too fast on H100 (the
    // dense rows of the same tables are within a few percent; the small-model and MoE layers'
    // many small kernels are not priced). The issue's target is not met; the bounds catch a regression.
    CHECK(e > 0.3);
    CHECK(e < 0.7);
  }
  WARN("GPT-OSS-120B on 64 H100, BF16, TP1 PP4 EP8: predicted " << predicted << " tokens/s/GPU, published" << line);
  // The 25.11 table's H100 row (performance-summary-archive.md, "25.11 NeMo Container", DGX-H100): the same
  // parallel sizes at micro-batch 4, global batch 512 (2 micro-batches a rank a step): 5,630 tokens/s/GPU. The
  // recipe's other settings of that release are not listed: this one's are kept.
  s.training.global_batch_size = 512;
  Layout l4 = parse_layout("tp=1,pp=4,ep=8,etp=1,zero=1,recompute=none,mbs=4");
  REQUIRE(!resolve_layout(s, &l4));
  const double predicted4 = estimate_time(s, l4).tokens_per_s / l4.gpus(), e4 = predicted4 / 5630 - 1;
  WARN("GPT-OSS-120B on 64 H100, micro-batch 4, global batch 512: predicted " << predicted4
                                                                             << " tokens/s/GPU, published 5630 ("
                                                                             << 100 * e4 << "%)");
  // Where paraplan stands: +29.6 % (the pipeline bubble of 2 micro-batches a step takes a share of the
  // step that paraplan prices right; the MoE layers are as fast as above). A regression bound.
  CHECK(e4 > 0.15);
  CHECK(e4 < 0.45);
}

// ---- Step time against real runs (issue 15) ----

namespace {

// Predicted tokens/s per GPU of a run, or a negative number when paraplan
// cannot express its layout.
double predicted_tokens_per_s_per_gpu(const TimedRow& r) {
  Layout l;
  const Spec s = playbook_spec(r.model, r.nodes, r.dp, r.tp, r.pp, r.zero, r.mbs, r.grad_accum, &l);
  if (resolve_layout(s, &l)) return -1;
  return estimate_time(s, l).tokens_per_s / l.gpus();
}

}  // namespace

TEST_CASE("nanotron on H100 (Ultra-Scale Playbook): tokens/s of the runs that ran, and which layout is fastest",
          "[measurements]") {
  const std::vector<TimedRow> rows = read_timed_rows();
  REQUIRE(rows.size() == 1127);
  std::vector<double> err, abs_err;
  int high = 0, inexpressible = 0;
  std::map<std::pair<std::string, int>, std::vector<std::pair<double, double>>> groups;  // (predicted, measured)
  for (const TimedRow& r : rows) {
    const double p = predicted_tokens_per_s_per_gpu(r);
    if (p > 0) groups[{r.model, r.nodes}].push_back({p, r.tokens_per_s_per_gpu});
    if (r.mfu_pct < 30) continue;
    ++high;
    if (p < 0) {
      ++inexpressible;
      continue;
    }
    err.push_back(p / r.tokens_per_s_per_gpu - 1);
    abs_err.push_back(std::abs(err.back()));
  }
  // The measured-fastest run of each (model, nodes) group with >= 5 runs:
  // its place in the predicted order.
  int ranked = 0, in_top5 = 0;
  std::string places;
  for (const auto& [key, v] : groups) {
    if (v.size() < 5) continue;
    ++ranked;
    size_t best = 0;
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i].second > v[best].second) best = i;
    int place = 0;
    for (const auto& x : v) place += x.first > v[best].first;
    in_top5 += place < 5;
    places += fmt::format(" {}/n{}: {} of {};", key.first, key.second, place + 1, v.size());
  }
  const double med_abs = median(abs_err), med_signed = median(err);
  WARN("nanotron tokens/s, runs with MFU >= 30%: " << high << " runs (" << inexpressible
                                                   << " not expressible), median |error| " << 100 * med_abs
                                                   << "%, median signed " << 100 * med_signed << "%; fastest run in the "
                                                   << "predicted top 5 in " << in_top5 << " of " << ranked << " groups ("
                                                   << "predicted place of the fastest:" << places << ")");
  REQUIRE(high == 148);
  // Where paraplan stands (the issue's targets are 12% and 90%; see README
  // "What is verified"): these bounds catch a regression.
  // On EFA (h100-aws-p5) with the pipelined collectives, 4 us per GEMM and nanotron's own DDP
  // buckets: 18.3% and 11 of 14; with nanotron's host time per layer at tp > 1: 14.9%;
  // with 24 NCCL channels' SMs for collectives inside a p5 node: 14.7% and 12 of 14.
  // The 64-node groups, where measured throughput collapses to a fifth of the
  // 32-node one, are the misses. With FlashAttention-2's causal waves (measured
  // on an H100: tests/data/measurements/h100-nanotron-layer.csv): 13.9% and 11
  // of 14: the fastest of 1B on 8 nodes (dp 64, tp 1, mbs 1: 32 heads x 1
  // sequence, its attention 11% slower for it, as measured) ranks 6th, 0.7%
  // behind the 5th, in a group whose runs at 1-2 micro-batches a step are
  // predicted 20-150% fast (README "What is verified").
  // With nanotron's strided copies and unfused GLU at PyTorch's unvectorized rate (measured on the same H100
  // layer): 8.9% (the issue's 12% met) and 12 of 14 again (1B on 8 nodes 5th). With nanotron's gradient
  // clipping over its whole fp32 accumulator (12 B per parameter of the rank, ZeRO-1 or not): 8.5% and 11 of
  // 14: 1B on 8 nodes' fastest (dp 64, tp 1, mbs 1: a clip over 4x the tp 4 runs' parameters) 6th again, 1%
  // behind the 5th, in a group whose top 5 holds a run measured at half its ZeRO-1 twin (dp 64, mbs 2, ZeRO-0).
  // With nanotron's async collectives (DDP buckets, TP all-gathers and reduce-scatters) in line with compute,
  // as its runs measure them (costmodel/frameworks/nanotron.cpp, TimeVariant::collectives_overlap_compute):
  // 5.3% (signed +3.2%, from +7.6%) and 12 of 14 (1B on 8 nodes 4th); the misses are the two 64-node groups.
  // With each pipeline boundary on its own link (NVLink between stages on one node, costmodel/time.cpp pp_link):
  // 5.6% (+3.8%), the runs whose pipeline spans two nodes faster (1B dp 2 pp 8 on 2 nodes: from 7,000 tokens/s
  // a GPU, its logits priced over the network, to 26,500-29,700; measured 21,700-22,900). With each link's
  // payload and its gradient at once (Megatron's batched send_forward_recv_backward; the first and last
  // stage one link): 5.9% (+4.2%).
  CHECK(med_abs <= 0.065);
  CHECK(in_top5 >= 12);
  // Every pp = 1 run that ran, whatever its MFU: before the host time per
  // layer 63% (the tp 2-8 runs at small micro-batches up to 3.5x fast), with it 28%; with the
  // attention's causal waves and the strided ops 22.8%; with nanotron's clip pass 21.9%; with its collectives
  // in line 8.7%.
  std::vector<double> pp1;
  for (const TimedRow& r : rows)
    if (r.pp == 1)
      if (const double p = predicted_tokens_per_s_per_gpu(r); p > 0) pp1.push_back(std::abs(p / r.tokens_per_s_per_gpu - 1));
  WARN("nanotron tokens/s, every pp = 1 run that ran (" << pp1.size() << "): median |error| " << 100 * median(pp1) << "%");
  CHECK(median(pp1) < 0.10);
}

// nanotron's collectives in line with compute (costmodel/frameworks/nanotron.cpp,
// TimeVariant::collectives_overlap_compute): the Playbook's pp = 1 runs over 16-32 nodes that ran well (MFU
// >= 20 %) and whose data-parallel collectives, as paraplan prices them, are at least a tenth of the measured
// step. With the buckets beside the backward (nanotron's code launches them from torch DDP's hook) paraplan
// predicted every one of them fast: median +19.2 %; with them in line, as measured, -3.8 %.
TEST_CASE("nanotron's data-parallel collectives in line with compute: the Playbook's runs where they weigh most",
          "[measurements]") {
  const std::vector<TimedRow> rows = read_timed_rows();
  std::vector<double> err, share;
  for (const TimedRow& r : rows) {
    if (r.pp != 1 || r.nodes < 16 || r.nodes > 32 || r.mfu_pct < 20) continue;
    Layout l;
    const Spec s = playbook_spec(r.model, r.nodes, r.dp, r.tp, r.pp, r.zero, r.mbs, r.grad_accum, &l);
    REQUIRE(!resolve_layout(s, &l));
    const StepTime t = estimate_time(s, l);
    const double tokens_per_gpu = double(r.dp) * r.mbs * r.grad_accum * 4096 / (8.0 * r.nodes);
    const double measured_s = tokens_per_gpu / r.tokens_per_s_per_gpu;
    if (t.dp_comm_total_s < 0.1 * measured_s) continue;
    // All of the collectives on the step's path.
    CHECK(t.dp_comm_s == Approx(t.dp_comm_total_s).epsilon(1e-9));
    err.push_back(measured_s / t.step_s - 1);  // throughput error: predicted / measured tokens/s - 1
    share.push_back(t.dp_comm_total_s / measured_s);
  }
  std::vector<double> abs_err;
  for (double e : err) abs_err.push_back(std::abs(e));
  WARN("nanotron, pp 1, 16-32 nodes, MFU >= 20%, DP collectives >= 10% of the step: " << err.size() << " runs, DP "
       << 100 * *std::min_element(share.begin(), share.end()) << "-" << 100 * *std::max_element(share.begin(), share.end())
       << "% of the step; tokens/s median signed error " << 100 * median(err) << "%, median |error| "
       << 100 * median(abs_err) << "%");
  CHECK(err.size() == 46);
  CHECK(std::abs(median(err)) < 0.06);
  CHECK(median(abs_err) < 0.08);
}

// nanotron's pipeline polling (costmodel/frameworks/nanotron.cpp, TimeVariant::p2p_poll_sleep_s): the
// benchmark branch's receives poll each metadata transfer with 0.1 s sleeps. The Playbook's pipelines that stay on
// one node, or whose micro-batches outlast a sleep, or that run tp 1, are priced as the pp = 1 runs are; those that
// cross nodes at tp 2-8 with micro-batches shorter than a sleep run from on time to several times slower, with no
// order a term could follow: paraplan flags them (StepTime::kWarnPipelinePoll) instead of pricing them.
TEST_CASE("nanotron pipeline polling: across nodes at tp > 1, micro-batches under one sleep, flagged as measured",
          "[measurements]") {
  const std::vector<TimedRow> rows = read_timed_rows();
  std::vector<double> flagged, unflagged, slot_ratio[9];
  int flagged_slow = 0, flagged_high_mfu = 0;
  for (const TimedRow& r : rows) {
    if (r.pp == 1 || r.tp > 8 || r.nodes > 32) continue;  // 64 nodes: every layout collapses (issue 15 notes)
    Layout l;
    const Spec s = playbook_spec(r.model, r.nodes, r.dp, r.tp, r.pp, r.zero, r.mbs, r.grad_accum, &l);
    if (resolve_layout(s, &l)) continue;  // 2 of the 1,127 runs are not expressible (see above)
    const StepTime t = estimate_time(s, l);
    const double e = t.tokens_per_s / l.gpus() / r.tokens_per_s_per_gpu - 1;
    const bool flag = t.warnings & StepTime::kWarnPipelinePoll;
    (flag ? flagged : unflagged).push_back(flag ? e : std::abs(e));
    if (flag) flagged_slow += e > 0.25, flagged_high_mfu += r.mfu_pct >= 30;
    // Micro-batches under a sleep on a pipeline across nodes, ZeRO-1: measured / predicted time of a micro-batch
    // slot by tp (the step over m + p - 1 slots).
    if (r.zero == 1 && pipeline_crosses_nodes(s.cluster, l) && t.microbatch_s < 0.1 && t.microbatch_s > 0.04) {
      const double measured_step = double(r.dp) * r.mbs * r.grad_accum * 4096 / (r.tokens_per_s_per_gpu * l.gpus());
      slot_ratio[r.tp].push_back(measured_step / t.step_s);
    }
  }
  const double med_flagged = median(flagged), med_unflagged = median(unflagged);
  WARN("nanotron pp > 1 runs (tp <= 8, <= 32 nodes): " << flagged.size() << " flagged (pipeline across nodes, tp > 1, "
       << "micro-batch under 0.1 s): median signed error +" << 100 * med_flagged << "%, " << flagged_slow
       << " of them over 25% fast, " << flagged_high_mfu << " with MFU >= 30%; " << unflagged.size()
       << " not flagged: median |error| " << 100 * med_unflagged << "%; measured / predicted step at 40-100 ms "
       << "micro-batches across nodes (ZeRO-1), tp 1/2/4/8: " << median(slot_ratio[1]) << " / " << median(slot_ratio[2])
       << " / " << median(slot_ratio[4]) << " / " << median(slot_ratio[8]));
  CHECK(flagged.size() >= 250);
  CHECK(med_flagged > 1.0);                          // predicted over twice the measured throughput
  CHECK(flagged_slow * 10 >= int(flagged.size()) * 7);  // most of them far off
  CHECK(flagged_high_mfu * 20 <= int(flagged.size()));  // few of the well-running layouts caught
  CHECK(med_unflagged < 0.15);
  // The pace grows with the tp ranks that each poll on their own: tp 1 on time.
  CHECK(median(slot_ratio[1]) < 1.15);
  CHECK(median(slot_ratio[2]) > median(slot_ratio[1]));
  CHECK(median(slot_ratio[4]) > median(slot_ratio[2]));
  CHECK(median(slot_ratio[8]) > median(slot_ratio[4]));
}

// nanotron's host floor (costmodel/frameworks/nanotron.cpp, TimeVariant::host_layer_tp_s):
// the Playbook's runs with tp 4 or 8 at micro-batch 1 take the same time per
// layer per micro-batch whatever the model, far above the GPU's work: the host
// dispatching the layer sets their pace. The value is the median of these runs
// (measured step / (grad_accum x layers), no model in it); the rows are the
// copy of the Playbook's table in tests/data/measurements.
TEST_CASE("nanotron's host time per layer at tp > 1: the Playbook's host-bound runs (issue 15's fixed costs)",
          "[measurements]") {
  const std::vector<TimedRow> rows = read_timed_rows();
  std::vector<double> per_layer, per_layer_1b, per_layer_3b, fit_err, held_tp2, held_mbs2;
  for (const TimedRow& r : rows) {
    if (r.pp != 1 || r.nodes > 16) continue;
    const int layers = r.model == "1B" ? 16 : 28;  // configs/models/nanotron-bench-*.yaml
    // Tokens of the step over the GPUs' throughput: the step; per micro-batch and layer.
    const double step = double(r.dp) * r.mbs * r.grad_accum * 4096 / (r.tokens_per_s_per_gpu * r.dp * r.tp);
    const double err = predicted_tokens_per_s_per_gpu(r) / r.tokens_per_s_per_gpu - 1;
    if ((r.tp == 4 || r.tp == 8) && r.mbs == 1) {
      per_layer.push_back(step / r.grad_accum / layers);
      (r.model == "1B" ? per_layer_1b : per_layer_3b).push_back(per_layer.back());
      fit_err.push_back(std::abs(err));
    } else if (r.model == "1B" && r.tp == 2 && r.mbs == 1) {
      held_tp2.push_back(std::abs(err));  // not in the fit: tp 2
    } else if (r.tp == 8 && r.mbs == 2) {
      held_mbs2.push_back(std::abs(err));  // not in the fit: micro-batch 2
    }
  }
  REQUIRE(per_layer.size() == 38);
  const double floor_s = profile(Framework::kNanotron).time.host_layer_tp_s;
  WARN("nanotron host time per layer per micro-batch (tp 4-8, micro-batch 1, 38 runs): median "
       << 1e3 * median(per_layer) << " ms (1B " << 1e3 * median(per_layer_1b) << ", 3B " << 1e3 * median(per_layer_3b)
       << "), profile " << 1e3 * floor_s << " ms; tokens/s median |error| " << 100 * median(fit_err)
       << "% (fit), " << 100 * median(held_tp2) << "% (1B tp 2, " << held_tp2.size() << " runs), "
       << 100 * median(held_mbs2) << "% (tp 8 micro-batch 2, " << held_mbs2.size() << " runs)");
  // The profile holds the median of the runs.
  CHECK(std::abs(floor_s / median(per_layer) - 1) < 0.005);
  // The same per layer for a layer of 2.3x the FLOPs: set by the host, not the GPU.
  CHECK(std::abs(median(per_layer_1b) / median(per_layer_3b) - 1) < 0.05);
  // With it the model meets these runs, and runs outside the fit.
  CHECK(median(fit_err) < 0.04);
  CHECK(*std::max_element(fit_err.begin(), fit_err.end()) < 0.10);
  REQUIRE(held_tp2.size() == 10);
  REQUIRE(held_mbs2.size() == 8);
  CHECK(median(held_tp2) < 0.05);
  CHECK(median(held_mbs2) < 0.08);
}

TEST_CASE("nanotron's layer on one H100 through PyTorch, term by term (issue 15: where the per-layer time stands)",
          "[measurements]") {
  // tests/data/measurements/h100-nanotron-layer.csv: nanotron's decoder layer forward + backward, measured on an
  // H100 with the profiler's kernel time by kind (its header says how). paraplan's per-layer terms are the same
  // layout's "linear GEMMs", "attention core" and "memory-bound ops" (explain --formulas) over the layers, tp
  // without sequence parallelism as the measurement emulates it.
  std::vector<double> gemm, attention_64, attention_96, memory, layer;
  std::string report;
  int rows = 0;
  for (const auto& f : read_csv("tests/data/measurements/h100-nanotron-layer.csv", 12)) {
    ++rows;
    const std::string model = f[0];
    const double h = std::stod(f[1]);
    const int tp = std::stoi(f[2]), mbs = std::stoi(f[3]), seq = std::stoi(f[4]);
    const double fwd_bwd = std::stod(f[5]) * 1e-3, m_gemm = std::stod(f[6]) * 1e-3, m_att = std::stod(f[7]) * 1e-3,
                 m_other = std::stod(f[8]) * 1e-3, idle = std::stod(f[9]) * 1e-3;
    REQUIRE(seq == 4096);
    Layout l;
    Spec s = playbook_spec(model == "nanotron-bench-1b" ? "1B" : "3B", 1, 8 / tp, tp, 1, 1, mbs, 1, &l);
    l.sp = false;
    REQUIRE(!resolve_layout(s, &l));
    const double layers = s.model.num_layers;
    double p_gemm = 0, p_att = 0, p_mem = 0;
    for (const TimeTerm& t : stage_time_terms(s, l, 0)) {
      if (t.name == "linear GEMMs") p_gemm = t.seconds / layers;
      if (t.name == "attention core") p_att = t.seconds / layers;
      if (t.name == "memory-bound ops") p_mem = t.seconds / layers;
    }
    REQUIRE(p_gemm > 0);
    REQUIRE(p_att > 0);
    REQUIRE(p_mem > 0);
    gemm.push_back(m_gemm / p_gemm);
    (h == 2048 ? attention_64 : attention_96).push_back(m_att / p_att);  // head dim 64 (1B), 96 (3B)
    report += fmt::format("{} tp {} mbs {}: GEMM {:.3f}, attention {:.3f}, other {:.3f}", model, tp, mbs,
                          m_gemm / p_gemm, m_att / p_att, m_other / p_mem);
    if (!f[11].empty()) {
      // nanotron rotates q and k with flash_attn's one Triton kernel, in place (flash_attn/layers/rotary.py), where
      // the measured layer ran six torch ops each way: take the six-op kernels out (their share of that run's
      // "other") and put back what paraplan counts for the rotary (read + write q and k, forward; twice that
      // backward), at the model's HBM rate.
      const double share = std::stod(f[11]) / std::stod(f[10]);
      const double rotary_model =
          3 * memory_bound_time(2 * 2 * h / tp * double(mbs) * seq * 2, s.cluster);  // q and k widths are h here
      const double nano_other = m_other * (1 - share) + rotary_model;
      memory.push_back(nano_other / p_mem);
      report += fmt::format(", other as nanotron {:.3f}", nano_other / p_mem);
      if (idle < 0.6e-3) {  // the GPU sets the pace: the whole layer
        const double nano_layer = fwd_bwd - m_other * share + rotary_model;
        layer.push_back((p_gemm + p_att + p_mem) / nano_layer - 1);
        report += fmt::format(", layer: paraplan {:+.1f}%", 100 * layer.back());
      }
    }
    report += "\n";
  }
  REQUIRE(rows == 24);
  REQUIRE(memory.size() == 8);
  REQUIRE(layer.size() == 6);
  WARN("measured / paraplan per layer (forward + backward), nanotron's layer on an H100:\n"
       << report << "medians: GEMM " << median(gemm) << ", attention " << median(attention_64) << " (head dim 64), "
       << median(attention_96) << " (96), memory-bound as nanotron " << median(memory) << "; whole layer, GPU-bound: "
       << "paraplan " << 100 * median(layer) << "% (" << 100 * *std::min_element(layer.begin(), layer.end())
       << "% to " << 100 * *std::max_element(layer.begin(), layer.end()) << "%)");
  // What the measurement says of each term (docs/gpu.md "One H100, 2026-11-27"), held so that a change to a term
  // shows here:
  // * the GEMMs run faster in a layer than the cluster's sustained-load gemm_efficiency (0.72) says: 0.82-0.90 of
  //   paraplan's time (the memory-bound kernels between them let the clock rise under the 700 W cap);
  for (double r : gemm) CHECK((r > 0.78 && r < 0.95));
  CHECK((median(gemm) > 0.82 && median(gemm) < 0.90));
  // * FlashAttention-2 at head dim 64 runs at the cluster's published table scaled by the causal schedule's
  //   waves (costmodel/time.cpp flash_attention_rate; 2.04x the table's time at 4 heads x 1 sequence before):
  //   within 1-10 %; at head dim 96, which the table interpolates between 64 and 128, 9-23 % slower (FA2's
  //   hdim-96 kernel, 128 x 64 tiles, runs under both neighbours: ~229 TFLOP/s at s 4096 against 245 at 64);
  for (double r : attention_64) CHECK((r > 0.98 && r < 1.12));
  for (double r : attention_96) CHECK((r > 1.05 && r < 1.25));
  // * nanotron's memory-bound kernels, its strided copies and unfused GLU at the cluster's strided_hbm_efficiency
  //   (0.48: PyTorch's unvectorized path, measured on the GLU's SiLU kernels of this layer) and their backward as
  //   autograd runs it (copies once, the GLU 13 passes per ffn element): 0.90-1.01 of paraplan's time (1.06-1.36
  //   before, with every pass at 0.8 of the HBM rate and the backward twice the forward);
  for (double r : memory) CHECK((r > 0.85 && r < 1.10));
  CHECK((median(memory) > 0.88 && median(memory) < 1.02));
  // * together, where the GPU sets the pace, paraplan's layer is within 5 % of the measured one (0.7-4.7 % slow;
  //   it was 3.8-6.6 % fast before the strided ops and the attention waves).
  for (double e : layer) CHECK(std::abs(e) < 0.05);
}

TEST_CASE("FlashAttention-2 on an H100 at Llama-2-7B's head dim, seq 8192 (out of the layer measurement's shapes)",
          "[measurements]") {
  // tests/data/measurements/h100-attention-variants.csv: [2, 8, 8192, 128] causal attention forward + backward. The
  // causal waves were read off the 1B/3B layer at seq 4096 (32 blocks); here 64 blocks of 16 (sequence, head) pairs.
  std::map<std::string, double> seconds;
  for (const auto& f : read_csv("tests/data/measurements/h100-attention-variants.csv", 5))
    seconds[f[0] + "/" + f[1] + "/" + f[2]] = std::stod(f[3]);
  REQUIRE(seconds.size() == 8);
  Spec s = test::spec_for(test::model("llama-2-7b"), 8, 8192, 4);
  s.cluster = test::cluster("dgx-h100");
  s.training.flash_attention = true;
  Layout l = parse_layout("dp=2,tp=4,pp=1,sp=0,mbs=2");
  REQUIRE(!resolve_layout(s, &l));
  double core = -1;
  for (const TimeTerm& t : stage_time_terms(s, l, 0))
    if (t.name == "attention core") core = t.seconds / s.model.num_layers;
  const double measured = seconds.at("flash/0.0/0"), e = core / measured - 1;
  WARN("FlashAttention-2, [2, 8, 8192, 128] on an H100: paraplan " << core * 1e3 << " ms, measured " << measured * 1e3
       << " ms (" << 100 * e << "%); with dropout 0.1 " << seconds.at("flash/0.1/0") * 1e3 << " ms, deterministic "
       << seconds.at("flash/0.0/1") * 1e3 << " ms; cuDNN " << seconds.at("cudnn/0.0/0") * 1e3 << " ms, with dropout "
       << seconds.at("cudnn/0.1/0") * 1e3 << " ms");
  // Within 5 %, from the table and its causal waves (0.93 here: 16 pairs against the table's 32); 11 % without them.
  CHECK(std::abs(e) < 0.07);
  // Attention dropout: the cluster's flash_attention_dropout_slowdown is this measurement's ratio (Cluster::
  // flash_dropout_slowdown), so with dropout 0.1 the core meets the dropout run as closely as it meets this one.
  CHECK(s.cluster.flash_dropout_slowdown == Approx(seconds.at("flash/0.1/0") / measured).epsilon(1e-6));
  s.model.attention_dropout = 0.1;
  double core_dropout = -1;
  for (const TimeTerm& t : stage_time_terms(s, l, 0))
    if (t.name == "attention core") core_dropout = t.seconds / s.model.num_layers;
  CHECK(core_dropout / seconds.at("flash/0.1/0") - 1 == Approx(e).margin(1e-9));
  // Deterministic algorithms (Megatron --deterministic-mode): the ratio of this measurement without dropout; with
  // dropout the measured ratio is the same within 0.4 %.
  s.model.attention_dropout = 0;
  s.training.deterministic = true;
  CHECK(s.cluster.flash_deterministic_slowdown == Approx(seconds.at("flash/0.0/1") / measured).epsilon(1e-6));
  CHECK(seconds.at("flash/0.1/1") / seconds.at("flash/0.1/0") ==
        Approx(s.cluster.flash_deterministic_slowdown).epsilon(0.004));
  double core_det = -1;
  for (const TimeTerm& t : stage_time_terms(s, l, 0))
    if (t.name == "attention core") core_det = t.seconds / s.model.num_layers;
  CHECK(core_det / seconds.at("flash/0.0/1") - 1 == Approx(e).margin(1e-9));
  // What paraplan does not price, measured here: cuDNN's attention (Transformer Engine's on H100) runs 1.7x
  // FlashAttention-2 (1.47x with dropout, which costs it 34 %).
  CHECK(seconds.at("flash/0.1/0") > 1.1 * measured);
  CHECK(seconds.at("cudnn/0.0/0") < 0.65 * measured);
}

TEST_CASE("Megatron-LM's own CI step times on H100 and A100 (gpt3_7b_*_memory_speed goldens)", "[measurements]") {
  // iteration-time of NVIDIA/Megatron-LM@d98e8a64 tests/functional_tests/test_cases/gpt/<case>/golden_values_dev_<gpu>.json:
  // the median of the logged steps from step 4 on (11 values on H100, 2 on A100; spread < 1%).
  // The runs: 8 GPUs, --deterministic-mode, --no-gradient-accumulation-fusion, --overlap-grad-reduce,
  // --use-distributed-optimizer, TE, bf16, seq 8192, global batch 8 (model_config.yaml).
  struct Golden {
    const char* name;
    const char* cluster;
    const char* layout;
    double measured_s;
  };
  const Golden rows[] = {
      {"gpt3_7b_tp4_pp1_memory_speed, H100", "dgx-h100", "tp=4,pp=1,zero=1,mbs=2", 1.1149},
      {"gpt3_7b_tp4_pp1_memory_speed, A100", "dgx-a100-80gb", "tp=4,pp=1,zero=1,mbs=2", 2.5868},
      {"gpt3_7b_tp1_pp4_memory_speed, H100", "dgx-h100", "tp=1,pp=4,vpp=8,zero=1,mbs=1", 1.1502},
      {"gpt3_7b_tp1_pp4_memory_speed, A100", "dgx-a100-80gb", "tp=1,pp=4,vpp=8,zero=1,mbs=1", 2.9424},
  };
  double sum_abs = 0;
  for (const Golden& g : rows) {
    Layout l;
    Spec s = megatron_golden_spec(g.cluster, g.layout, &l);
    s.training.overlap_dp_comm = true;                 // --overlap-grad-reduce
    s.training.gradient_accumulation_fusion = false;  // --no-gradient-accumulation-fusion
    s.training.grad_dtype = DType::kFp32;              // Megatron's default fp32 reduction
    s.training.deterministic = true;                   // --deterministic-mode
    const double predicted = estimate_time(s, l).step_s, e = predicted / g.measured_s - 1;
    sum_abs += std::abs(e);
    WARN(g.name << ": predicted " << predicted << " s, measured " << g.measured_s << " s (" << 100 * e << "%)");
    // paraplan is optimistic here (the issue's target is a mean of 4%).
    CHECK(e < 0);
    CHECK(e > -0.20);
  }
  WARN("Megatron CI step times: mean |error| " << 100 * sum_abs / 4 << "%");
}

TEST_CASE("Megatron-LM's published FP8 throughput on H100 (examples/llama/README.md, Llama 3 8B/70B/405B)",
          "[measurements][megatron]") {
  // The rows, their sources and the recipe's flags: tests/published_llama3_fp8.hpp.
  const std::vector<test::PublishedLlama3Fp8> rows = test::published_llama3_fp8();
  const int n = int(rows.size());
  double sum_abs = 0;
  for (const test::PublishedLlama3Fp8& p : rows) {
    Spec s;
    std::vector<std::string> ignored;
    const Layout l = test::published_llama3_fp8_run(p, &s, &ignored);
    INFO(p.name << ": layout " << to_string(l));
    // Every flag of the recipe is read but the amax reduction (max or most
    // recent), which changes neither memory nor time.
    CHECK(ignored == std::vector<std::string>{"--fp8-amax-compute-algo"});
    REQUIRE(s.training.fp8);
    REQUIRE(l.gpus() == p.gpus);
    const MemoryEstimate mem = estimate_memory(s, l);
    CHECK(mem.fits);  // these runs ran
    const StepTime t = estimate_time(s, l);
    const double predicted = t.tokens_per_s / p.gpus, e = predicted / p.tokens_per_s_per_gpu - 1;
    sum_abs += std::abs(e);
    WARN(p.name << ": predicted " << predicted << " tokens/s per GPU, published " << p.tokens_per_s_per_gpu << " ("
                << 100 * e << "%)");
    // Where paraplan stands (see docs/verification.md): README rows 8B -7.4%, 70B +0.8%, 405B +7.8%;
    // Megatron-Bridge rows 8B (Megatron-FSDP) -5.2%, 70B at GBS 256 +2.1%, 405B at GBS 1536 +12.3% (the
    // published figure is no higher than at GBS 512, where the model gains from the smaller bubble and the
    // amortised per-step costs); mean 5.9% (5.3% before the interleaved schedule's pipeline sends ran
    // beside compute, as Megatron's --overlap-p2p-communication runs them). These bounds catch a regression.
    CHECK(std::abs(e) < 0.20);
  }
  WARN("Megatron FP8 throughput: mean |error| " << 100 * sum_abs / n << "% over " << n << " rows");
  CHECK(sum_abs / n < 0.08);
}

TEST_CASE("Megatron-LM's published H100 weak-scaling table (README.md, GPT 1.7B-462B)", "[measurements][megatron]") {
  // NVIDIA/Megatron-LM@d98e8a64 README.md:95-113 and images/model_table.png (read off the image):
  // GPT models of 1.7B to 462B parameters on H100 (DGX H100), sequence 4,096, vocabulary 131,072,
  // with --overlap-grad-reduce, --overlap-param-gather and --tp-comm-overlap; per-GPU model
  // TFLOP/s as Megatron counts them (the Narayanan et al. 2021 formula, 72·B·s·L·h²·(1 + s/6h +
  // V/12hL), full s² attention: megatron/training/training.py num_floating_point_operations). The
  // measured step is those FLOPs / (TFLOP/s x GPUs). Not listed, so assumed: GPT-3 blocks as
  // Megatron's defaults build them (GeLU, 4h FFN, LayerNorm, biases, learned positions, untied
  // embeddings: the table's sizes follow, checked below; dropout 0.1), the distributed optimizer
  // reducing in fp32 (the chart names Megatron-Core r0.8.0, whose bf16 forces fp32 gradient
  // accumulation and reduction: core_r0.8.0 megatron/training/arguments.py:299-308), sequence parallelism with tp, micro-batch 1, no interleaving,
  // no recompute, flash (TE fused) attention.
  struct Published {
    const char* name;
    int heads, hidden, layers, tp, pp, dp, gpus, batch;
    double tflops_per_gpu;
    double billions;  // the table's model size
  };
  const Published rows[] = {
      {"1.7B", 16, 2048, 24, 1, 1, 48, 48, 192, 408.8, 1.7},      {"7.1B", 32, 4096, 30, 2, 1, 48, 96, 192, 465.9, 7.1},
      {"16B", 48, 6144, 32, 4, 1, 48, 192, 192, 489.1, 16},       {"32B", 56, 7168, 48, 8, 1, 48, 384, 192, 459.6, 32},
      {"70B", 64, 8192, 84, 8, 2, 48, 768, 384, 419.7, 70},       {"119B", 80, 10240, 92, 8, 4, 48, 1536, 768, 420.5, 119},
      {"177B", 96, 12288, 96, 8, 6, 48, 2304, 1152, 432.8, 177},  {"314B", 128, 16384, 96, 8, 8, 48, 3072, 1536, 474.4, 314},
      {"462B", 144, 18432, 112, 8, 16, 48, 6144, 3072, 459.9, 462},
  };
  const double s = 4096, vocab = 131072;
  double sum_abs = 0;
  for (const Published& p : rows) {
    const Model m = megatron_gpt(p.name, p.heads, p.hidden, p.layers, int(vocab), int(s), false);
    // The architecture read: its parameter count rounds to the table's size.
    CHECK(std::abs(double(total_params(m)) / 1e9 - p.billions) < 0.03 * p.billions + 0.05);
    Spec spec = published_run(m, "dgx-h100", p.gpus, int(s), p.batch);
    spec.training.flash_attention = true;
    LayoutRequest req;
    req.megatron_args = fmt::format(
        "--tensor-model-parallel-size {} {}--pipeline-model-parallel-size {} --micro-batch-size 1 "
        "--global-batch-size {} --seq-length 4096 --bf16 --use-distributed-optimizer --overlap-grad-reduce "
        "--overlap-param-gather",
        p.tp, p.tp > 1 ? "--sequence-parallel --tp-comm-overlap " : "", p.pp, p.batch);
    const Layout l = layout_from_sources(&spec, "megatron-weak-scaling", req);
    INFO(p.name << ": layout " << to_string(l));
    REQUIRE(l.dp == p.dp);
    CHECK(estimate_memory(spec, l).fits);  // these runs ran
    const double flops = 72.0 * p.batch * s * p.layers * double(p.hidden) * p.hidden *
                         (1 + s / (6.0 * p.hidden) + vocab / (12.0 * p.hidden * p.layers));
    const double measured_s = flops / (p.tflops_per_gpu * 1e12 * p.gpus);
    const double predicted_s = estimate_time(spec, l).step_s, e = measured_s / predicted_s - 1;  // throughput error
    sum_abs += std::abs(e);
    WARN(p.name << " (tp " << p.tp << ", pp " << p.pp << ", " << p.gpus << " GPUs): step predicted " << predicted_s
                << " s, published " << measured_s << " s; throughput " << 100 * e << "%");
    // Where paraplan stands: 1.7B +8.9%, 7.1B +11.1% (one node's worth of compute per rank, nothing
    // to hide: the compute itself is priced fast, as on the Playbook runs), 16B -6.5%, 32B -28.8%
    // (its fp32 gradient reduce-scatter over 48 nodes, 16 GB per rank, outlasts the last
    // micro-batch's backward in the model; r0.8.0 had no bf16 reduction), 70B -11.0%, 119B -3.8%,
    // 177B -0.7%, 314B -4.8%, 462B -0.3%; mean 8.4% (8.6% before attention dropout was priced,
    // FlashAttention-2's measured 1.16x; Transformer Engine's cuDNN attention is not modelled). These bounds
    // catch a regression.
    CHECK(std::abs(e) < 0.30);
  }
  WARN("Megatron weak-scaling table: mean |error| of throughput " << 100 * sum_abs / std::size(rows) << "% over "
                                                                  << std::size(rows) << " rows");
  CHECK(sum_abs / std::size(rows) < 0.12);
}

TEST_CASE("nanotron on H100 (Ultra-Scale Playbook, pp > 1): rank-0 memory with nanotron's compute-cost split",
          "[measurements]") {
  // The pp > 1 rows of the full copy, each rank holding what nanotron's
  // compute-cost split gives it (balance=cost). A split that leaves a rank
  // without a block is refused: of the 160 such rows 158 crashed.
  std::vector<double> err, abs_err;
  int ran = 0, ran_not_fit = 0, crashed = 0, crashed_not_fit = 0, refused = 0, refused_ran = 0;
  FlushTally flush;
  // What each run that ran measured beyond the prediction without the stream-held blocks, in multiples of the
  // blocks the model holds (one forward's row-parallel outputs on stage 0), by pipeline depth and regime: tp 2-16
  // on up to 32 nodes, tp 32, 64 nodes. Runs holding at least 1.5 GiB of them.
  std::map<std::pair<int, std::string>, std::vector<double>> held_multiple;
  for (const auto& f : read_csv("tests/data/measurements/ultrascale-playbook-1B-3B.csv")) {
    const int pp = std::stoi(f[6]);
    if (pp == 1) continue;
    Layout l;
    const Spec s = playbook_spec(f[1], std::stoi(f[2]), std::stoi(f[4]), std::stoi(f[5]), pp, std::stoi(f[7]),
                                 std::stoi(f[8]), std::stoi(f[9]), &l);
    if (resolve_layout(s, &l)) {
      ++refused;
      refused_ran += f[11] == "ran";
      continue;
    }
    REQUIRE(l.balance == StageBalance::kCost);
    const MemoryEstimate e = estimate_memory(s, l);
    flush.add(e, f[11] == "ran");
    if (f[11] == "ran") {
      ++ran;
      const double measured = std::stod(f[14]), predicted = double(e.stages[0].reserved()) / kGiB;
      err.push_back((predicted - measured) / measured);
      abs_err.push_back(std::abs(err.back()));
      ran_not_fit += !e.fits;
      const MemoryBreakdown& st = e.stages[0];
      if (st.held_wanted >= 1.5 * kGiB) {
        const int tp = std::stoi(f[5]), nodes = std::stoi(f[2]);
        const double without_held = double(st.reserved() - st.held_for_streams) / kGiB;
        const std::string regime = tp == 32 ? "tp 32" : nodes == 64 ? "64 nodes" : "tp 2-16";
        held_multiple[{pp, regime}].push_back((measured - without_held) / (double(st.held_wanted) / kGiB));
      }
    } else {
      ++crashed;
      crashed_not_fit += !e.fits;
    }
  }
  WARN("pp > 1: " << ran << " runs that ran, median |error| " << 100 * median(abs_err) << "% (signed "
                  << 100 * median(err) << "%), " << ran_not_fit << " predicted not to fit; " << crashed_not_fit << " of "
                  << crashed << " crashed runs predicted not to fit; " << refused << " refused (" << refused_ran
                  << " of them ran)");
  CHECK(ran == 792);
  CHECK(median(abs_err) <= 0.12);
  CHECK(ran_not_fit <= 2);
  CHECK(crashed_not_fit >= 199);
  CHECK(refused_ran <= 2);
  // The allocator-flush warning (the figures its message quotes, with the pp = 1 test's 4 of 8 and 27 of 356): of
  // the pp > 1 runs predicted to fit, those whose held reduce-scatter inputs would not fit beside the rest crashed
  // 27 times in 30, the others 59 times in 846.
  flush.check(30, 27, 846, 59);
  // Where the pp > 1 error lies (MEASURED medians, 2026-11-28; the model holds 1 forward's worth): with tp 2-16 on
  // up to 32 nodes stage 0 held about pp - 1 forwards' worth at pp >= 4 (pp 4: 2.19, 62 runs; pp 8: 6.73, 23;
  // the one pp 16 run 13.3), while at pp 2 (0.33, 121 runs), at tp 32 (pp 2: 0.08, 35; pp 4: 0.22, 20) and on 64
  // nodes (pp 2: 0.12, 13) about none. nanotron@67c5ebb6 polls each send's metadata isend to completion, which the
  // GPU reaches only after the forward queued before it (p2p.py:284-301), so the held inputs of one micro-batch
  // cannot outlive the next; a count growing with the micro-batches in flight points at the caching allocator,
  // whose cached full-size blocks the later micro-batches' smaller long-lived activations split, each forward
  // then taking new segments for its full-size blocks. Not
  // modelled: no allocator simulation says why tp 32, 64 nodes and pp 2 escape it. It is why the model is 16-41 % low
  // at pp 8 tp 4-16 and 38-90 % high at pp 2 tp 16-32 (the medians of each model and tp).
  const auto multiple = [&](int pp_, const std::string& regime) {
    const auto it = held_multiple.find({pp_, regime});
    REQUIRE(it != held_multiple.end());
    INFO("pp " << pp_ << ", " << regime << ": " << it->second.size() << " runs, median " << median(it->second));
    return median(it->second);
  };
  CHECK(held_multiple[{4, "tp 2-16"}].size() == 62);
  CHECK(held_multiple[{8, "tp 2-16"}].size() == 23);
  CHECK(multiple(4, "tp 2-16") > 1.8);
  CHECK(multiple(4, "tp 2-16") < 3.0);
  CHECK(multiple(8, "tp 2-16") > 5.5);
  CHECK(multiple(8, "tp 2-16") < 7.5);
  CHECK(multiple(2, "tp 2-16") < 0.6);
  CHECK(multiple(2, "tp 32") < 0.2);
  CHECK(multiple(4, "tp 32") < 0.4);
  CHECK(multiple(2, "64 nodes") < 0.3);
}

TEST_CASE("Megatron-LM's SC21 weak-scaling table on A100 (Narayanan et al. 2021 Table 1, GPT 1.7B-1T)",
          "[measurements][megatron]") {
  // NVIDIA/Megatron-LM@50a4b5fa02 (2021-04-08) README.md:13-15 and images/cases_april2021.png (read off the image; the
  // paper's Table 1): GPT models of 1.7B to 1T parameters on Selene (DGX A100 80GB, 8 HDR NICs per node), sequence
  // 2048, per-GPU teraFLOP/s counted by the paper's eq. 3 with the recomputed forward, 96·B·s·l·h²·(1 + s/6h +
  // V/16lh), V = 51,200; "measured for end-to-end training, i.e., includes all operations including data loading,
  // optimization, and even logging". The measured step is those FLOPs / (TFLOP/s x GPUs).
  // The runs' settings are the paper's own scripts, NVIDIA/Megatron-LM@de7dc40f (2021-08-10)
  // examples/sc21/run_table_1.sh (tp, pp, micro-batch, heads, DDP implementation, layers per virtual stage) and
  // CONFIG.sh (--fp16, --loss-scale 8192, seq 2048, --activations-checkpoint-method uniform: every layer recomputed,
  // one layer a chunk). Megatron's defaults at that commit: ffn 4h, GeLU, LayerNorm, biases, learned positions, tied
  // embeddings, dropout 0.1, the vocabulary (GPT-2's 50,257) padded to a multiple of 128 x tp, Megatron's own
  // layers (no Transformer Engine: unfused attention with the fused masked softmax), fp16 gradients reduced in fp16
  // (no --accumulate-allreduce-grads-in-fp32), no sequence parallelism, scatter-gather pipeline sends
  // (megatron/p2p_communication.py). The code of those runs reduced the column-parallel input gradient in line
  // (megatron/mpu/mappings.py:88-89; the async all-reduce came with 3f652469, 2021-09-02): read with
  // --no-async-tensor-model-parallel-allreduce. DDP torch (the four smaller models) overlaps the reduction with the
  // last micro-batch's backward in 25 MiB buckets (torch.nn.parallel.DistributedDataParallel's default bucket_cap_mb;
  // megatron/schedules.py:117-123 runs the other micro-batches under no_sync); DDP local reduces after the backward,
  // in line (megatron/model/distributed.py:188-200).
  struct Published {
    const char* name;
    int heads, hidden, layers, tp, pp, mbs, gpus, batch, layers_per_virtual_stage;
    bool torch_ddp;
    double tflops_per_gpu;
    double billions;  // the table's parameter count
  };
  const Published rows[] = {
      {"1.7B", 24, 2304, 24, 1, 1, 16, 32, 512, 0, true, 137, 1.7},
      {"3.6B", 32, 3072, 30, 2, 1, 16, 64, 512, 0, true, 138, 3.6},
      {"7.5B", 32, 4096, 36, 4, 1, 16, 128, 512, 0, true, 142, 7.5},
      {"18B", 48, 6144, 40, 8, 1, 8, 256, 1024, 0, true, 135, 18.4},
      {"39B", 64, 8192, 48, 8, 2, 4, 512, 1536, 0, false, 138, 39.1},
      {"76B", 80, 10240, 60, 8, 4, 2, 1024, 1792, 5, false, 140, 76.1},
      {"145B", 96, 12288, 80, 8, 8, 2, 1536, 2304, 5, false, 148, 145.6},
      {"310B", 128, 16384, 96, 8, 16, 1, 1920, 2160, 3, false, 155, 310.1},
      {"530B", 128, 20480, 105, 8, 35, 1, 2520, 2520, 1, false, 163, 529.6},
      {"1T", 160, 25600, 128, 8, 64, 1, 3072, 3072, 0, false, 163, 1008.0},
  };
  const double s = 2048, vocab_formula = 51200;
  double sum_abs = 0;
  for (const Published& p : rows) {
    const int pad = 128 * p.tp;  // --make-vocab-size-divisible-by 128 (megatron/arguments.py:279) x tp
    const Model m = megatron_gpt(p.name, p.heads, p.hidden, p.layers, (50257 + pad - 1) / pad * pad, int(s), true);
    // The architecture read: its parameter count rounds to the table's (given to 0.1B).
    CHECK(std::abs(double(total_params(m)) / 1e9 - p.billions) < 0.01 * p.billions + 0.05);
    Spec spec = published_run(m, "dgx-a100-80gb", p.gpus, int(s), p.batch);
    spec.training.transformer_engine = false;
    spec.training.pipeline_scatter_gather = true;
    LayoutRequest req;
    req.megatron_args = fmt::format(
        "--tensor-model-parallel-size {} --pipeline-model-parallel-size {} --micro-batch-size {} --global-batch-size {} "
        "--seq-length 2048 --fp16 --activations-checkpoint-method uniform --no-async-tensor-model-parallel-allreduce{}",
        p.tp, p.pp, p.mbs, p.batch,
        p.layers_per_virtual_stage ? fmt::format(" --num-layers-per-virtual-pipeline-stage {}", p.layers_per_virtual_stage)
                                   : "");
    Layout l = layout_from_sources(&spec, "megatron-sc21", req);
    // Gradients in fp16, reduced in fp16; overlapped by torch DDP only. No gradient-accumulation fusion yet
    // (83b1e42f, 2022-02): autograd adds every micro-batch's gradient into param.grad (6 B per parameter).
    spec.training.grad_dtype = DType::kFp16;
    spec.training.gradient_accumulation_fusion = false;
    spec.training.overlap_dp_comm = p.torch_ddp;
    // Pipeline sends in line: batch_isend_irecv, each request waited on, then a device synchronize
    // (megatron/p2p_communication.py:126-130 at de7dc40f); the overlap came in 2023 (f9283c5a8a).
    spec.training.overlap_p2p_comm = false;
    if (p.torch_ddp) spec.training.grad_bucket_params = 25 * 1024 * 1024 / 2, spec.training.grad_bucket_params_given = true;
    REQUIRE(!resolve_layout(spec, &l));
    INFO(p.name << ": layout " << to_string(l));
    REQUIRE(l.dp * p.tp * p.pp == p.gpus);
    REQUIRE(l.recompute == Recompute::kFull);
    REQUIRE(spec.training.precision == DType::kFp16);
    REQUIRE(!spec.training.flash_attention);
    CHECK(estimate_memory(spec, l).fits);  // these runs ran
    const double flops = 96.0 * p.batch * s * p.layers * double(p.hidden) * p.hidden *
                         (1 + s / (6.0 * p.hidden) + vocab_formula / (16.0 * p.hidden * p.layers));
    const double measured_s = flops / (p.tflops_per_gpu * 1e12 * p.gpus);
    const double predicted_s = estimate_time(spec, l).step_s, e = measured_s / predicted_s - 1;  // throughput error
    sum_abs += std::abs(e);
    WARN(p.name << " (" << to_string(l) << ", " << p.gpus << " GPUs): step predicted " << predicted_s
                << " s, published " << measured_s << " s; throughput " << 100 * e << "%");
    // Where paraplan stands: 1.7B +4.2%, 3.6B +3.9%, 7.5B +2.3%, 18B +2.4%, 39B -1.0%, 76B +6.0%, 145B +1.3%,
    // 310B +1.4%, 530B +0.9%, 1T -3.1%; mean 2.7% (3.7% without the gradient accumulation pass, 2-4% of the step
    // where there are 144-512 micro-batches; 6.1% with the backward's TP all-reduces beside the weight gradient,
    // as today's Megatron runs them). Counted once too many: the first micro-batch's gradient, which autograd
    // takes as param.grad without a pass (1/m of the term). Not priced: local DDP's coalescing copies around its
    // one fp16 all-reduce. These bounds catch a regression.
    CHECK(e > -0.05);
    CHECK(e < 0.09);
  }
  WARN("Megatron SC21 table (A100): mean |error| of throughput " << 100 * sum_abs / std::size(rows) << "% over "
                                                                  << std::size(rows) << " rows");
  CHECK(sum_abs / std::size(rows) < 0.05);
}

TEST_CASE("Megatron-DeepSpeed GPT 52B on 64 V100s (BigScience's log): every rank's max_memory_allocated",
          "[measurements][deepspeed]") {
  // tests/data/measurements/bigscience-52b-ds-pipeline-v100.csv (its header: the run, its arguments, the log's lines):
  // GPT 52B, fp16, DeepSpeed ZeRO 0 and its pipeline engine, TP 4 x PP 16, micro-batch 4, 256 micro-batches, full
  // activation checkpointing, on Jean Zay's V100-SXM2-32GB nodes (configs/clusters/jean-zay-v100-32gb.yaml);
  // the DeepSpeed config the log prints, tests/data/measurements/bigscience-52b-ds_config.json.
  Model m = megatron_gpt("bigscience-52b", 32, 8192, 64, 50688, 1024, true);  // vocabulary as the log pads it
  Spec s;
  s.model = m;
  s.cluster = test::cluster("jean-zay-v100-32gb");
  s.num_nodes = 16;
  s.training.seq_length = 1024;
  s.training.global_batch_size = 1024;
  s.training.transformer_engine = false;
  s.training.flash_attention = false;
  s.training.framework = Framework::kDeepSpeed;
  LayoutRequest req;
  req.megatron_args = "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 16 --micro-batch-size 4 "
                      "--global-batch-size 1024 --seq-length 1024 --fp16 --checkpoint-activations";
  req.deepspeed_config = test::repo("tests/data/measurements/bigscience-52b-ds_config.json");
  const Layout l = layout_from_sources(&s, "bigscience-52b", req);
  INFO("layout " << to_string(l));
  REQUIRE(l.dp == 1);
  REQUIRE(l.zero == 0);
  REQUIRE(l.recompute == Recompute::kFull);
  REQUIRE(s.training.precision == DType::kFp16);
  // The log's parameter counts per rank: 805,560,320 on a middle stage, 917,757,952 on the first ("STAGE_PARAMS").
  CHECK(stage_params(m, l, 8).total() == 805'560'320);
  CHECK(stage_params(m, l, 0).total() == 917'757'952);
  const MemoryEstimate e = estimate_memory(s, l);
  REQUIRE(e.stages.size() == 16);
  std::vector<double> abs_err, reserved_err;
  int rows = 0;
  for (const auto& f : read_csv("tests/data/measurements/bigscience-52b-ds-pipeline-v100.csv", 6)) {
    ++rows;
    const int stage = std::stoi(f[1]);
    const double measured = std::stod(f[3]), predicted = double(e.stages[size_t(stage)].allocated()) / (1 << 20);
    const double err = predicted / measured - 1;
    INFO("rank " << f[0] << " (stage " << stage << "): max allocated " << measured << " MiB, predicted " << predicted
                 << " MiB (" << 100 * err << "%)");
    // Stages 0-14 within 1.5 %: the checkpointed layer inputs of the micro-batches in flight (pp - stage of them), the
    // pipeline engine's 1/tp partition of each stage output, and, from stage 9 on, the fp16 optimizer's step (its fp32
    // gradient copies, 4 B per parameter, outgrow the activations there: the log's max is the same 15,446.8 MiB on
    // stages 9-14). The last stage is 4.2 % low: its tied EmbeddingPipe holds the position table too (8.4 M
    // parameters, 0.13-0.16 GiB) and about 0.6 GiB more stays allocated there after the step (its 12,924 MiB against
    // 14 B x 917.8 M = 12,253), neither modelled.
    if (stage < 15) CHECK(std::abs(err) < 0.015);
    else CHECK((err < 0 && err > -0.05));
    abs_err.push_back(std::abs(err));
    // max_memory_reserved, a known gap: the allocator keeps 1.1-3.3 GiB cached beside the peak's live blocks (blocks
    // split around the kept checkpoint inputs and the recomputed layer's buffers of other sizes), which paraplan's
    // reserved figure does not simulate: its reserved is its allocated here (the checkpoints are 64 MiB, whole 2 MiB
    // segments, so no rounding slack).
    const double reserved = double(e.stages[size_t(stage)].reserved()) / (1 << 20), res_err = reserved / std::stod(f[5]) - 1;
    reserved_err.push_back(res_err);
    INFO("max reserved " << f[5] << " MiB, predicted " << reserved << " MiB (" << 100 * res_err << "%)");
    CHECK((res_err < -0.07 && res_err > -0.19));
  }
  CHECK(rows == 64);
  WARN("BigScience 52B on 64 V100s: max_memory_reserved " << 100 * median(reserved_err) << "% at the median (known gap)");
  WARN("BigScience 52B on 64 V100s (DeepSpeed pipeline, fp16): max_memory_allocated median |error| "
       << 100 * median(abs_err) << "% over 64 ranks");
  CHECK(median(abs_err) < 0.01);
  // The peak moves to the optimizer step where the activations in flight are fewer than the step's copies: the same
  // prediction for stages 9-14, as measured.
  for (int stage = 10; stage < 15; ++stage) CHECK(e.stages[size_t(stage)].allocated() == e.stages[9].allocated());
  CHECK(e.stages[8].allocated() > e.stages[9].allocated() - (64 << 20));
  // Its step time: the log's iterations 2-49 (lines 950-1044) take 137.07 s at the median. The V100 time model is not
  // calibrated (the A100 file's gemm_efficiency, no V100 kernel measured): predicted 103.5 s, 24.5 % fast, and
  // flagged, its hardware FLOP utilization above the cluster's best published (this very run's 0.40).
  const StepTime t = estimate_time(s, l);
  const double time_err = t.step_s / 137.07 - 1;
  WARN("BigScience 52B on 64 V100s: step predicted " << t.step_s << " s, logged 137.07 s (" << 100 * time_err << "%)");
  CHECK(time_err < -0.15);
  CHECK(time_err > -0.35);
  CHECK((t.warnings & StepTime::kWarnMfuAboveBest) != 0);
}

TEST_CASE("Megatron-LM of 2021 on 16-256 V100s (BigScience's logs): max_memory_allocated, a known gap",
          "[measurements][megatron]") {
  // tests/data/measurements/bigscience-megatron-2021-v100.csv (its header: five runs, their arguments, the logs): GPT
  // 1.8-13B-a-stage models, fp16, full checkpointing, TP 4, PP 4-64, micro-batch 1, 4 micro-batches. Read as the
  // SC21 table's runs are (Megatron-LM of 2021): fp16 gradients, no gradient-accumulation fusion.
  struct Run {
    int pp, hidden, layers;
    std::int64_t stage1_params;  // the log's "number of parameters on (tensor, pipeline) model parallel rank (t, 1)"
  };
  const Run runs[] = {{4, 6144, 40, 1'132'938'240},
                      {8, 7168, 48, 925'177'344},
                      {16, 9216, 64, 1'019'501'568},
                      {32, 12288, 64, 906'160'128},
                      {64, 16384, 64, 805'433'344}};
  std::map<int, MemoryEstimate> est;
  for (const Run& r : runs) {
    const Model m = megatron_gpt(fmt::format("bigscience-meg-pp{}", r.pp).c_str(), 32, r.hidden, r.layers, 50688, 1024, true);
    Spec s;
    s.model = m;
    s.cluster = test::cluster("jean-zay-v100-32gb");
    s.num_nodes = r.pp;
    s.training.seq_length = 1024;
    s.training.global_batch_size = 4;
    s.training.transformer_engine = false;
    s.training.flash_attention = false;
    LayoutRequest req;
    req.megatron_args = fmt::format("--tensor-model-parallel-size 4 --pipeline-model-parallel-size {} --micro-batch-size 1 "
                                    "--global-batch-size 4 --seq-length 1024 --fp16 --checkpoint-activations",
                                    r.pp);
    Layout l = layout_from_sources(&s, "bigscience-megatron", req);
    s.training.grad_dtype = DType::kFp16;
    s.training.grad_dtype_given = true;
    s.training.gradient_accumulation_fusion = false;
    REQUIRE(!resolve_layout(s, &l));
    REQUIRE(l.dp == 1);
    CHECK(stage_params(m, l, 1).total() == r.stage1_params);
    est.emplace(r.pp, estimate_memory(s, l));
  }
  std::map<int, std::vector<double>> err;
  std::vector<double> res_err;
  for (const auto& f : read_csv("tests/data/measurements/bigscience-megatron-2021-v100.csv", 10)) {
    const int pp = std::stoi(f[0]), stage = std::stoi(f[4]);
    const double predicted = double(est.at(pp).stages[size_t(stage)].allocated()) / (1 << 20);
    err[pp].push_back(predicted / std::stod(f[7]) - 1);
    res_err.push_back(double(est.at(pp).stages[size_t(stage)].reserved()) / (1 << 20) / std::stod(f[9]) - 1);
  }
  // max_memory_reserved, a wider known gap: 23-32 % low (median 28 %), the allocated gap above plus the 2.8-5.5 GiB
  // the allocator kept cached beside the live blocks (not simulated: these fp16 checkpoints and recomputed layers
  // leave no segment-rounding slack in paraplan's figure).
  WARN("Megatron-LM 2021: max_memory_reserved median error " << 100 * median(res_err) << "% over " << res_err.size()
                                                             << " ranks (known gap)");
  CHECK(res_err.size() == 496);
  for (double x : res_err) CHECK((x < -0.20 && x > -0.35));
  for (auto& [pp, e] : err) {
    CHECK(e.size() == size_t(4 * pp));
    WARN("Megatron-LM 2021, pp " << pp << ": max_memory_allocated median error " << 100 * median(e) << "% over "
                                 << e.size() << " ranks");
    // A known gap, 11-15 % low on every rank (medians 11.1-14.5 %): the model's peak is the step's 20 B per parameter (fp16 weights and
    // gradients, fp32 main params and Adam, the gradients' fp32 copies), where these logs show 22.6-23.5 B. Megatron of
    // 2021 kept the fp32 main gradients from one step to the next (its zero_grad skipped fp32_from_float16_groups:
    // NVIDIA/Megatron-LM@63121a9e0f megatron/optimizer/optimizer.py:283-289, today's clears them, :1048-1061) and its
    // local DDP flattened every fp16 gradient into one more copy to all-reduce (megatron/model/distributed.py:188-218);
    // neither is today's Megatron, the profile's. The bounds hold the gap.
    for (double x : e) {
      CHECK(x < -0.10);
      CHECK(x > -0.16);
    }
  }
  CHECK(err.size() == 5);
}

TEST_CASE("BLOOM-176B on 384 A100s (Megatron-DeepSpeed, BigScience's training log): step time", "[measurements][deepspeed]") {
  // bigscience-workshop/bigscience@9e64edec train/tr11-176B-ml: the run's own script tr11-176B-ml.slurm (TP 4, PP 12,
  // micro-batch 2, global batch 2048, 70 layers of hidden 14336 and 112 heads, seq 2048, bf16, --checkpoint-activations,
  // --pp-partition-method 'type:transformer|embedding', --pad-vocab-size-to 250880, ALiBi, --embed-layernorm; the
  // DeepSpeed config it writes, tests/data/measurements/bloom-176b-ds_config.json: ZeRO stage 0 with bf16, i.e.
  // DeepSpeed's BF16_Optimizer, its own ZeRO-1) on 48 nodes of 8 A100 80GB (README.md:41-47: "4 OmniPath links",
  // Omni-Path between nodes), and its logged iteration times at global batch 2048 on those 48 nodes: 105.22 s
  // (chronicles.md:45, iteration 12,695), 106.46 s (chronicles.md:202, iteration 31,214), 104.70 s (README.md:661-663,
  // iteration 85,376). The partition counts the two embeddings as units: 72 / 12 = 6 a stage, the first and the last
  // five layers. Read as paraplan can: ALiBi as learned positions (0.02 % more parameters, one add on the first
  // stage; ALiBi's bias is the input of the scores' baddbmm, no pass of its own), the embedding LayerNorm left out
  // (one norm on the first stage), Megatron's own layers with the fused masked softmax (no flash attention in
  // Megatron-DeepSpeed then), the TP input gradient all-reduced in line (its 2021 Megatron base). The nodes: DGX
  // A100-like (NVSwitch assumed: the README's "NVLink 4 inter-gpu connects" does not say) with 4 x 100 Gb/s
  // Omni-Path links instead of 8 x 200 Gb/s HDR.
  Model m = megatron_gpt("bloom-176b", 112, 14336, 70, 250880, 2048, true);
  m.hidden_dropout = m.attention_dropout = 0;  // BLOOM trained without dropout (its config.json: 0.0)
  Spec s = published_run(m, "dgx-a100-80gb", 384, 2048, 2048);
  s.cluster.inter_node.nics_per_node = 4;
  s.cluster.inter_node.nic_gbps = 100;
  s.cluster.inter_node.bandwidth_gbs = 4 * 100 / 8.0 / 8;  // 6.25 GB/s per GPU per direction
  s.training.transformer_engine = false;
  s.training.flash_attention = false;
  s.training.framework = Framework::kDeepSpeed;  // what the CLI takes for a DeepSpeed config with Megatron arguments
  LayoutRequest req;
  req.megatron_args =
      "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 12 --micro-batch-size 2 --global-batch-size 2048 "
      "--seq-length 2048 --bf16 --checkpoint-activations --account-for-embedding-in-pipeline-split "
      "--account-for-loss-in-pipeline-split --no-async-tensor-model-parallel-allreduce";
  req.deepspeed_config = test::repo("tests/data/measurements/bloom-176b-ds_config.json");
  const Layout l = layout_from_sources(&s, "bloom-176b", req);
  INFO("layout " << to_string(l));
  REQUIRE(l.dp == 8);
  REQUIRE(l.recompute == Recompute::kFull);
  StageSplit split;
  REQUIRE(stage_split(m.num_layers, l, &split));
  CHECK((split.first == 5 && split.middle == 6 && split.last == 5));
  CHECK(estimate_memory(s, l).fits);  // it ran
  const double measured_s = 105.22, predicted_s = estimate_time(s, l).step_s, e = predicted_s / measured_s - 1;
  WARN("BLOOM-176B, 384 A100s: step predicted " << predicted_s << " s, logged " << measured_s << " s (" << 100 * e
                                                 << "%)");
  // Where paraplan stands: -12.6 % (optimistic, as on the H100 runs), at a predicted 54.7 % of peak in the FLOPs the
  // GPUs run where the log's 149 TFLOP/s is 47.8 %. Not separable from here: the DeepSpeed pipeline engine's own
  // schedule and sends, the nodes' NVLink topology, PyTorch 1.11's kernels. The bound catches a regression.
  CHECK(e < 0);
  CHECK(e > -0.18);
}

// NeMo's published H100 FP8 pre-training throughput: Megatron-core with Transformer Engine, run by NeMo's
// launcher. Tokens/s per GPU from NVIDIA/NeMo@9c5c5e9709 (2024-09-09) docs/source/performance/
// performance_summary.md:13-24 (container NeMo 24.07, DGX-H100, FP8: #GPUs, GBS, MBS, sequence, TP, PP, CP, VP
// per row). Each row's other settings are NeMo-Framework-Launcher's config for that model at the tag 24.07
// (launcher_scripts/conf/training/gpt3/{5b,20b,175b}.yaml, llama/{llama2_7b,llama2_13b,llama2_70b,llama3_8b,
// llama3_70b}.yaml, nemotron/{nemotron_8b,nemotron_22b,nemotron_340b}.yaml): no activation recompute
// (activations_checkpoint_granularity null) but Nemotron 340B's selective, sequence_parallel and
// ub_tp_comm_overlap as set there, cross_entropy_loss_fusion in the Llama 3 and Nemotron 8B/22B files,
// gradient accumulation fusion, GPT-3's dropout 0.1 and the others' 0, and Apex's DistributedFusedAdam with
// overlap_grad_sync and
// overlap_param_sync (ZeRO: the optimizer state sharded over dp), gathering parameters in bf16 (NVIDIA/NeMo@
// 9c5c5e9709 nemo/collections/nlp/models/language_modeling/megatron_base_model.py:795-800). The launcher's H100
// FP8 example scripts of the same tag, one per row's model and node count (examples/training/gpt/h100/
// {5b_fp8_8node,20b_fp8_8node,175b_fp8_16node}.sh, llama/h100/{llama2_7b,llama2_13b,llama2_70b,llama3_8b,
// llama3_70b}_fp8.sh), add fp8 hybrid and optim.grad_sync_dtype=bf16: gradients reduced in bf16, as
// nemotron_340b.yaml sets it too; the Nemotron 8B and 22B scripts do not, and that optimizer then reduces in
// its fp32 dtype (NVIDIA/apex@6424da3b apex/contrib/optimizers/distributed_fused_adam.py:606-607).
// The vocabularies are padded to a multiple of 128 x tp (make_vocab_size_divisible_by 128).
// Memory is not compared: DistributedFusedAdam keeps its own gradient buckets, not Megatron's main_grad buffer,
// and the megatron profile's memory would not be NeMo 24.07's.
TEST_CASE("NeMo's published H100 FP8 throughput (NeMo 24.07 performance summary, GPT-3, Llama 2 and 3, Nemotron)",
          "[measurements][megatron]") {
  struct Published {
    const char* name;
    int gpus, global_batch, mbs, seq, tp, pp, cp, vp;
    bool sp, tp_overlap, ce_fusion, bf16_reduce;
    const char* recompute;
    double tokens_per_s_per_gpu;
    bool p2p_overlap = true;  // overlap_p2p_comm in the launcher's config (interleaved rows)
  };
  const Published rows[] = {
      {"GPT3-5B", 64, 2048, 4, 2048, 1, 1, 1, 1, false, false, false, true, "none", 23406},
      {"GPT3-20B", 64, 256, 2, 2048, 2, 1, 1, 1, true, true, false, true, "none", 5851},
      {"GPT3-175B", 128, 256, 1, 2048, 4, 8, 1, 6, true, false, false, true, "none", 716},
      {"GPT3-175B", 512, 2048, 2, 2048, 4, 8, 1, 6, true, false, false, true, "none", 825},
      {"LLAMA2-7B", 8, 128, 1, 4096, 1, 1, 1, 1, false, false, false, true, "none", 16934},
      {"LLAMA2-13B", 16, 128, 1, 4096, 1, 4, 1, 10, false, false, false, true, "none", 8715},
      {"LLAMA2-70B", 64, 128, 1, 4096, 4, 4, 1, 20, true, true, false, true, "none", 1728},
      {"Nemotron-8B", 64, 256, 4, 4096, 2, 1, 1, 1, true, true, true, false, "none", 12507},
      {"Nemotron-22B", 64, 256, 2, 4096, 2, 4, 1, 10, true, true, true, false, "none", 4312},
      {"Nemotron-340B", 128, 32, 1, 4096, 8, 8, 1, 12, true, false, false, true, "selective", 326, false},
      {"LLAMA3-8B", 8, 128, 1, 8192, 1, 1, 2, 1, false, false, true, true, "none", 12273},
      {"LLAMA3-70B", 64, 128, 1, 8192, 4, 4, 2, 5, true, true, true, true, "none", 1524},
  };
  double sum_abs = 0;
  for (const Published& p : rows) {
    const std::string n = p.name;
    Model m;
    if (n == "GPT3-5B") m = megatron_gpt("5b", 32, 4096, 24, 50257, p.seq, true);  // GPTConfig5B: ffn 4h
    if (n == "GPT3-20B") m = megatron_gpt("20b", 48, 6144, 44, 50257, p.seq, true);
    if (n == "GPT3-175B") m = test::model("gpt3-175b");
    if (n == "LLAMA2-7B") m = test::model("llama-2-7b");
    if (n == "LLAMA2-13B") m = test::model("llama-2-13b");
    if (n == "LLAMA2-70B") m = test::model("llama-2-70b");
    if (n == "LLAMA3-8B") m = test::model("llama-3.1-8b");  // Llama 3 and 3.1 differ in RoPE scaling only
    if (n == "LLAMA3-70B") m = test::model("llama-3.1-70b");
    if (n == "Nemotron-340B") m = load_model_file(test::repo("tests/data/hf/nemotron-4-340b/config.json"));
    if (n == "Nemotron-8B" || n == "Nemotron-22B") {
      // NeMo's Nemotron3Config8B and Nemotron4Config22B (nemo/collections/llm/gpt/model/nemotron.py:76-83,
      // 100-107 at 9c5c5e9709; the launcher's nemotron_8b.yaml and nemotron_22b.yaml the same): multi-head
      // attention, squared ReLU, LayerNorm1P, RoPE on half of each head, no biases, untied, vocabulary 256,000.
      m = load_model_file(test::repo("tests/data/hf/nemotron-4-340b/config.json"));
      const bool small = n == "Nemotron-8B";
      m.name = n;
      m.num_layers = small ? 32 : 40;
      m.hidden_size = small ? 4096 : 6144;
      m.num_attention_heads = m.num_kv_heads = small ? 32 : 48;
      m.head_dim = 128;
      m.ffn_hidden_size = 4 * m.hidden_size;
    }
    REQUIRE(m.num_layers > 0);
    // grad_sync_dtype=bf16 (the example scripts; nemotron_340b.yaml), else DistributedFusedAdam's fp32.
    Spec s = nemo_fp8_run(m, p.tp, p.gpus, p.seq, p.global_batch, p.bf16_reduce);
    s.training.tp_comm_overlap = p.tp_overlap;
    s.training.cross_entropy_fusion = p.ce_fusion;
    s.training.overlap_p2p_comm = p.p2p_overlap;
    Layout l = parse_layout(fmt::format("tp={},pp={},cp={},vpp={},zero=1,mbs={},recompute={},sp={}", p.tp, p.pp, p.cp,
                                        p.vp, p.mbs, p.recompute, p.sp ? "true" : "false"));
    const auto problem = resolve_layout(s, &l);
    INFO(p.name << " on " << p.gpus << " GPUs: " << (problem ? problem->message : to_string(l)));
    REQUIRE(!problem);
    REQUIRE(l.gpus() == p.gpus);
    const double predicted = estimate_time(s, l).tokens_per_s / p.gpus, e = predicted / p.tokens_per_s_per_gpu - 1;
    sum_abs += std::abs(e);
    WARN(fmt::format("{} on {} GPUs: predicted {:.0f}, published {:.0f} tokens/s per GPU ({:+.1f}%)", p.name, p.gpus,
                     predicted, p.tokens_per_s_per_gpu, 100 * e));
    // Where paraplan stands: GPT-3 5B +14.7 %, 20B +19.8 %, 175B +15.5 % (128 GPUs, micro-batch 1) and +2.9 %
    // (512 GPUs, micro-batch 2: published 15 % faster per GPU than the 128-GPU run, predicted 3 %), Llama 2 7B
    // +10.7 %, 13B +10.1 %, 70B +17.4 %, Nemotron 8B +18.0 %, 22B +13.8 %, 340B -3.9 % (its pipeline sends in
    // line: overlap_p2p_comm False in nemotron_340b.yaml), Llama 3 8B +4.1 %, 70B +4.8 %: mean 11.3 %. With the
    // interleaved rows' pipeline sends in line (as paraplan priced them before it read Megatron's overlap) the
    // mean was 8.6 %, pp = 1 rows +13.5 % and interleaved rows +3.1 % on average: with the overlap, both sit
    // 10-15 % fast, one cost missing from every layer rather than two errors cancelling, as on Megatron's CI
    // rows. Llama 3 8B's layout is also the Megatron-LM README's (the FP8 test above), published there at
    // 13,812 tokens/s, 12.5 % above NeMo 24.07's 12,273: the same layout a release apart. These bounds catch a
    // regression.
    CHECK(std::abs(e) < 0.22);
  }
  WARN("NeMo 24.07 FP8 table (H100): mean |error| of throughput " << 100 * sum_abs / std::size(rows) << "% over "
                                                                   << std::size(rows) << " rows");
  CHECK(sum_abs / std::size(rows) < 0.12);
}

// NeMo's long-sequence table: Llama 2 7B in FP8 on H100 with context parallelism, 4K to 1M tokens a sequence.
// NVIDIA/NeMo@a2c4cc8ee6 docs/source/performance/performance_long_sequence.md, "LLAMA2-7B (FP8) - H100"
// (container NeMo 24.03.01, DGX-H100): per row the sequence, GPUs, batch size (sequences), TP, PP, DP, CP and
// TFLOP/s per GPU "with CP". The TFLOP/s count is NeMo's of 2024, every attention product counted (no causal
// half): L·h²·(12 + 12·g/a + 18·f/h + 12·s/h + 6·V/(L·h)) per token with V = 32,000 (NVIDIA/NeMo@f0bf77bcf7
// nemo/utils/flops_formulas.py:44-61 and nemo/collections/common/parts/perf_metrics_utils.py:24; the causal
// half came with 7cc8bbb59e, 2025-06). That this is the count of NeMo's 2024 tables: the 24.07 summary's Llama 2
// 7B row (8 GPUs, 16,934 tokens/s per GPU, 780 TFLOP/s; performance_summary.md:18 at 9c5c5e9709) gives 46.06
// GFLOP a token, this formula 46.09 (the causal half would be 42.86). The measured step is those FLOPs /
// (TFLOP/s x GPUs). The runs' other settings are the launcher's Llama 2 7B config (NeMo-Framework-Launcher
// 24.03.01 launcher_scripts/conf/training/llama/llama2_7b.yaml: micro-batch 1, no recompute, no dropout,
// ub_tp_comm_overlap False, DistributedFusedAdam with overlapped gradient and parameter syncs) and its H100 FP8
// example script (examples/training/llama/h100/llama2_7b_fp8.sh at 24.03.01: fp8 hybrid, grad_sync_dtype=bf16); sequence
// parallelism where tp > 1 (ASSUMED, as the launcher's tensor-parallel Llama configs set it).
// Where paraplan stands: 4K +13.2 %, 8K +9.5 %, 16K +9.2 %, 32K +8.5 % (GEMM-bound: as fast as the 24.07 table's
// small models), 64K-256K within 1 %, 512K -7.9 %, 1M -5.7 % (attention-bound: paraplan prices FlashAttention-2's
// rate, where Transformer Engine on Hopper may run cuDNN's faster kernel); mean 6.2 %.
TEST_CASE("NeMo's published long-sequence H100 table (Llama 2 7B, FP8, context parallelism up to 32, 4K-1M tokens)",
          "[measurements][megatron]") {
  struct Published {
    int seq_k, gpus, batch, tp, pp, dp, cp;
    double tflops_per_gpu;
  };
  const Published rows[] = {
      {4, 4, 1024, 1, 1, 4, 1, 768},      {8, 8, 512, 1, 2, 4, 1, 730},     {16, 16, 256, 2, 1, 8, 1, 660},
      {32, 32, 128, 2, 1, 8, 2, 610},     {64, 64, 64, 4, 1, 8, 2, 574},    {128, 128, 32, 4, 1, 8, 4, 555},
      {256, 256, 16, 4, 1, 8, 8, 549},    {512, 512, 8, 8, 1, 4, 16, 549},  {1024, 1024, 4, 8, 1, 4, 32, 536},
  };
  const Model m = test::model("llama-2-7b");
  const double L = m.num_layers, h = m.hidden_size, f = m.ffn_hidden_size, V = 32000;
  double sum_abs = 0;
  for (const Published& p : rows) {
    const int seq = p.seq_k * 1024;
    Spec s = nemo_fp8_run(m, p.tp, std::max(p.gpus, 8), seq, p.batch, true);  // grad_sync_dtype=bf16
    if (p.gpus < 8) s.cluster.gpus_per_node = p.gpus, s.num_nodes = 1;  // the 4K row: 4 GPUs of one node
    Layout l = parse_layout(fmt::format("tp={},pp={},cp={},zero=1,mbs=1,recompute=none,sp={}", p.tp, p.pp, p.cp,
                                        p.tp > 1 ? "true" : "false"));
    const auto problem = resolve_layout(s, &l);
    INFO(p.seq_k << "K: " << (problem ? problem->message : to_string(l)));
    REQUIRE(!problem);
    REQUIRE(l.dp == p.dp);
    REQUIRE(l.gpus() == p.gpus);
    // Memory is not compared, as in the 24.07 table's test: DistributedFusedAdam is not Megatron's optimizer.
    const double flops = double(p.batch) * seq * L * h * h * (12 + 12 + 18 * f / h + 12.0 * seq / h + 6 * V / (L * h));
    const double measured_s = flops / (p.tflops_per_gpu * 1e12 * p.gpus);
    const double predicted_s = estimate_time(s, l).step_s, e = measured_s / predicted_s - 1;  // throughput error
    sum_abs += std::abs(e);
    WARN(fmt::format("{}K on {} GPUs (tp {} pp {} dp {} cp {}): step predicted {:.2f} s, published {:.2f} s; "
                     "throughput {:+.1f}%",
                     p.seq_k, p.gpus, p.tp, p.pp, p.dp, p.cp, predicted_s, measured_s, 100 * e));
    CHECK(std::abs(e) < 0.16);
  }
  CHECK(sum_abs / std::size(rows) < 0.075);
  WARN("NeMo long-sequence table (H100): mean |error| of throughput " << 100 * sum_abs / std::size(rows) << "% over "
                                                                      << std::size(rows) << " rows");
}
