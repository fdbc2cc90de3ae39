// `paraplan calibrate`: the fits recover known parameters from samples the time
// model itself generated; bus bandwidth follows nccl-tests' definitions; the
// written cluster spec loads and says what was fitted; and the command runs
// end to end (measure, fit, write) and `plan` accepts a spec using its output.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "test_helpers.hpp"
#include "costmodel/time.hpp"
#include "planner/calibrate_cli.hpp"
#include "planner/spec_error.hpp"
#include "planner/spec_loader.hpp"
#include "validate/backend.hpp"
#include "validate/calibrate.hpp"

using namespace paraplan;
using namespace paraplan::validate;
namespace fs = std::filesystem;

namespace {

double rel(double a, double b) { return std::abs(a - b) / std::abs(b); }

// Samples of every collective, group sizes 2, 4 and 8, 4 KiB .. 64 MiB, timed
// by the time model's own formulas with the link (alpha, beta).
std::vector<CollectiveSample> synthetic_collectives(double alpha, double beta) {
  std::vector<CollectiveSample> v;
  for (Collective k : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter})
    for (int n : {2, 4, 8})
      for (std::int64_t bytes : message_sizes(4 << 10, 64 << 20, 4)) {
        CollectiveSample s;
        s.kind = k, s.group_size = n, s.bytes = bytes;
        s.seconds = model_collective_time(k, n, double(bytes), LinkCost{alpha, beta});
        v.push_back(s);
      }
  return v;
}

// A cluster with the roofline numbers only.
Cluster roofline(double peak_tflops, double gemm_eff, double hbm_gbs, double hbm_eff) {
  Cluster c;
  c.gpu.peak_tflops_bf16 = peak_tflops;
  c.gemm_efficiency = gemm_eff;
  c.gpu.hbm_bandwidth_gbs = hbm_gbs;
  c.hbm_efficiency = hbm_eff;
  return c;
}

}  // namespace

TEST_CASE("bus bandwidth follows nccl-tests") {
  struct Row {
    const char* name;
    Collective kind;
    int n;
    double bytes, seconds, alg_gbs, bus_gbs;  // expected, by hand from doc/PERFORMANCE.md
  };
  const Row rows[] = {
      {"all-reduce n=4: busBw = algBw x 2(n-1)/n", Collective::kAllReduce, 4, 1e9, 0.1, 10, 15},
      {"all-gather n=4: busBw = algBw x (n-1)/n", Collective::kAllGather, 4, 1e9, 0.1, 10, 7.5},
      {"reduce-scatter n=8: busBw = algBw x 7/8", Collective::kReduceScatter, 8, 2e9, 0.5, 4, 3.5},
      {"all-reduce n=2: busBw = algBw", Collective::kAllReduce, 2, 1e6, 1e-3, 1, 1},
  };
  for (const Row& r : rows) {
    INFO(r.name);
    CollectiveSample s;
    s.kind = r.kind, s.group_size = r.n, s.bytes = std::int64_t(r.bytes), s.seconds = r.seconds;
    CHECK(s.alg_bw() == Approx(r.alg_gbs * 1e9));
    CHECK(s.bus_bw() == Approx(r.bus_gbs * 1e9));
  }
}

TEST_CASE("the alpha-beta fit recovers the link that generated the samples") {
  struct Row {
    const char* name;
    double alpha_s, bytes_per_s;
  };
  const Row rows[] = {{"NVLink-like: 3 us, 370 GB/s", 3e-6, 370e9},
                      {"shared memory: 0.5 us, 4 GB/s", 0.5e-6, 4e9},
                      {"no latency", 0.0, 10e9}};
  for (const Row& r : rows) {
    INFO(r.name);
    std::vector<CollectiveSample> v = synthetic_collectives(r.alpha_s, r.bytes_per_s);
    const LinkFit f = fit_link(v);
    CHECK(f.alpha_s == Approx(r.alpha_s).margin(1e-12));
    CHECK(rel(f.bytes_per_s, r.bytes_per_s) < 1e-6);
    CHECK(f.rms_rel_error < 1e-6);
    CHECK(f.samples == int(v.size()));
    for (const CollectiveSample& s : v) CHECK(rel(s.fitted_s, s.seconds) < 1e-6);
  }
  std::vector<CollectiveSample> one_size;
  one_size.push_back(synthetic_collectives(1e-6, 1e9).front());
  CHECK_THROWS_AS(fit_link(one_size), std::invalid_argument);
}

TEST_CASE("the GEMM fit recovers peak x efficiency through gemm_time") {
  // Compute-bound shapes and memory-bound ones (k = 2, ~2 FLOP/byte):
  // the fit must pick out the compute-bound ones and recover the efficiency.
  const double peak = 20e12, eff = 0.6, mem_rate = 2000e9;
  const Cluster c = roofline(peak / 1e12, eff, mem_rate / 1e9, 1.0);
  std::vector<GemmSample> v;
  for (const GemmCase& g : gemm_cases(true)) {
    for (std::int64_t k : {g.k, std::int64_t(2)}) {
      GemmSample s;
      s.shape = g;
      s.shape.k = k;
      s.dtype = DType::kBf16;
      s.seconds = gemm_time(Gemm{"", 1, double(g.m), double(g.n), double(k), false}, c, 2);
      v.push_back(s);
    }
  }
  const GemmFit f = fit_gemm(v, peak, mem_rate);
  CHECK(f.peak_flops == peak);
  CHECK(rel(f.efficiency, eff) < 1e-6);
  CHECK(f.rms_rel_error < 1e-6);
  // Without a given peak, the peak is the best rate measured and the product is kept.
  const GemmFit g = fit_gemm(v, 0, mem_rate);
  double best = 0;
  for (const GemmSample& s : v) best = std::max(best, s.flops_per_s());
  CHECK(g.peak_flops == best);
  CHECK(rel(g.peak_flops * g.efficiency, peak * eff) < 1e-6);
}

TEST_CASE("the GEMM fit recovers a fixed time per GEMM beside the efficiency (gemm_fixed_us)") {
  const double peak = 20e12, eff = 0.6, mem_rate = 2000e9, fixed = 3e-6;
  Cluster c = roofline(peak / 1e12, eff, mem_rate / 1e9, 1.0);
  c.gemm_fixed_us = fixed * 1e6;
  std::vector<GemmSample> v;
  for (const GemmCase& g : gemm_cases(true)) {
    GemmSample s;
    s.shape = g;
    s.dtype = DType::kBf16;
    s.seconds = gemm_time(Gemm{"", 1, double(g.m), double(g.n), double(g.k), false}, c, 2);
    v.push_back(s);
  }
  const GemmFit f = fit_gemm(v, peak, mem_rate);
  CHECK(rel(f.efficiency, eff) < 1e-6);
  CHECK(rel(f.fixed_s, fixed) < 1e-6);
  CHECK(f.rms_rel_error < 1e-6);
  for (const GemmSample& s : v) CHECK(rel(s.fitted_s, s.seconds) < 1e-6);
}

TEST_CASE("the memory fit recovers hbm_efficiency through the time model") {
  const Cluster base = roofline(0.03, 0.7, 0, 0);
  struct Row {
    const char* name;
    double bandwidth, efficiency, optimizer;
  };
  const Row rows[] = {{"CPU-like: 16 GB/s at 0.12, Adam at 0.3", 16e9, 0.12, 0.3},
                      {"GPU-like: 3350 GB/s at 0.8, Adam at 0.9", 3350e9, 0.8, 0.9}};
  for (const Row& r : rows) {
    INFO(r.name);
    Cluster truth = base;
    truth.gpu.hbm_bandwidth_gbs = r.bandwidth / 1e9;
    truth.hbm_efficiency = r.efficiency;
    truth.optimizer_efficiency = r.optimizer;
    std::vector<WorkSample> work;
    for (const WorkCase& c : work_cases(false)) {
      WorkSample s;
      s.what = c;
      s.dtype = DType::kBf16;
      s.seconds = model_work_time(s, truth);
      REQUIRE(s.seconds > 0);
      work.push_back(s);
    }
    std::vector<CopySample> copies{{std::int64_t(1) << 24, DType::kBf16, 0}};
    copies[0].seconds = copies[0].bytes() / r.bandwidth;
    const MemoryFit f = fit_memory(copies, work, base);
    CHECK(rel(f.bandwidth, r.bandwidth) < 1e-12);
    CHECK(rel(f.efficiency, r.efficiency) < 1e-6);
    CHECK(f.rms_rel_error < 1e-6);
    CHECK(f.optimizer_samples == 4);
    CHECK(rel(f.optimizer_efficiency, r.optimizer) < 1e-9);
    CHECK(f.optimizer_rms_rel_error < 1e-9);
    for (const WorkSample& s : work) CHECK(rel(s.fitted_s, s.seconds) < 1e-6);
  }
  // By hand: gpt-small's Adam step in bf16 moves 30 B per parameter (bf16
  // gradient read twice, 12 B of state read and written, bf16 weight written)
  // over its 281,600 parameters (4 layers of 12·64² + 13·64, tied 250 × 64
  // embedding, 1024 × 64 learned positions, final LayerNorm 2·64): 8,448,000 B,
  // at 16 GB/s × 0.3 = 1.76 ms.
  Cluster c = roofline(0.03, 0.7, 16, 0.12);
  c.optimizer_efficiency = 0.3;
  WorkSample adam;
  adam.what = {WorkKind::kAdam, "gpt-small", 64};
  adam.dtype = DType::kBf16;
  CHECK(rel(model_work_time(adam, c), 8448000 / (16e9 * 0.3)) < 1e-12);
  CHECK(rel(8448000 / (16e9 * 0.3), 1.76e-3) < 1e-12);
}

TEST_CASE("the step fit recovers both efficiencies from whole training steps") {
  // Steps generated by the time model at gemm_efficiency 0.62, hbm_efficiency
  // 0.21 and attention_efficiency 0.4; the fit starts from the (wrong)
  // kernel-level 0.85 and 0.15 (attention: the GEMM rate).
  Cluster truth = roofline(0.03, 0.62, 16, 0.21);
  truth.attention_efficiency = 0.4;
  const Cluster kernels = roofline(0.03, 0.85, 16, 0.15);
  for (DType t : {DType::kFp32, DType::kBf16}) {
    std::vector<StepSample> steps;
    for (const StepCase& c : step_cases(false)) {
      if (!step_case_fits(c, 1)) continue;  // one rank: the data-parallel cases
      StepSample s;
      s.what = c;
      s.dtype = t;
      s.seconds = model_step_time(s, truth);
      REQUIRE(s.seconds > 0);
      steps.push_back(s);
    }
    REQUIRE(steps.size() >= 4);
    const StepFit f = fit_steps(steps, kernels);
    CHECK(f.samples == int(steps.size()));
    CHECK(f.rms_rel_error_before > 0.05);
    CHECK(rel(f.gemm_efficiency, 0.62) < 1e-4);
    CHECK(rel(f.hbm_efficiency, 0.21) < 1e-4);
    CHECK(rel(f.attention_efficiency, 0.4) < 1e-4);
    CHECK(f.rms_rel_error < 1e-4);
    for (const StepSample& s : steps) CHECK(rel(s.fitted_s, s.seconds) < 1e-4);
  }
  // On two ranks, with the tp + sp and ZeRO-2 cases, the link latency as the
  // steps see it (25 µs per algorithm step) is recovered too, from the
  // collective fit's 2 µs.
  {
    Cluster truth2 = truth, kernels2 = kernels;
    for (Cluster* c : {&truth2, &kernels2}) {
      c->intra_node = c->inter_node = Link{2.0, 2.0};
      c->intra_comm_efficiency = c->inter_comm_efficiency = 1.0;
    }
    truth2.intra_node.latency_us = truth2.inter_node.latency_us = 25.0;
    std::vector<StepSample> steps;
    int many = 0;
    for (const StepCase& c : step_cases(false)) {
      StepSample s;
      s.what = c;
      s.dtype = DType::kFp32;
      s.ranks = 2;
      s.seconds = model_step_time(s, truth2);
      steps.push_back(s);
      many += c.tp > 1 || c.zero >= 2;
    }
    REQUIRE(many >= 2);
    const StepFit f = fit_steps(steps, kernels2);
    CHECK(f.latency_fitted);
    CHECK(rel(f.latency_s, 25e-6) < 1e-3);
    CHECK(rel(f.gemm_efficiency, 0.62) < 1e-3);
    CHECK(rel(f.hbm_efficiency, 0.21) < 1e-3);
    CHECK(rel(f.attention_efficiency, 0.4) < 1e-3);
    // One rank (the data-parallel cases only): the latency is not fitted.
    std::vector<StepSample> alone;
    for (const StepCase& c : step_cases(false))
      if (step_case_fits(c, 1)) {
        StepSample s;
        s.what = c;
        s.dtype = DType::kFp32;
        s.seconds = model_step_time(s, truth2);
        alone.push_back(s);
      }
    const StepFit g = fit_steps(alone, kernels2);
    CHECK_FALSE(g.latency_fitted);
    CHECK(g.latency_s == 2e-6);
  }
  // Efficiencies stay at most 1, whatever the samples say.
  std::vector<StepSample> fast;
  for (const StepCase& c : step_cases(true)) {
    REQUIRE(step_case_fits(c, 1));
    StepSample s;
    s.what = c;
    s.dtype = DType::kFp32;
    s.seconds = 0.25 * model_step_time(s, roofline(0.03, 1.0, 16, 1.0));
    fast.push_back(s);
  }
  const StepFit f = fit_steps(fast, kernels);
  CHECK(f.gemm_efficiency <= 1.0);
  CHECK(f.hbm_efficiency <= 1.0);
  CHECK(f.attention_efficiency <= 1.0);
  // One sample: nothing to fit, the kernel numbers stand.
  fast.resize(1);
  const StepFit one = fit_steps(fast, kernels);
  CHECK(one.gemm_efficiency == 0.85);
  CHECK(one.hbm_efficiency == 0.15);
  CHECK(one.attention_efficiency == 0.85);
}

TEST_CASE("step cases name their layouts and run where they fit") {
  const StepCase tp_sp{"gpt-small", 32, 8, 2, true, 0}, zero2{"llama-small", 32, 8, 1, false, 2},
      dp{"gpt-small", 32, 8};
  CHECK(step_layout_label(tp_sp) == "tp2 sp");
  CHECK(step_layout_label(zero2) == "zero2");
  CHECK(step_layout_label(dp) == "dp");
  // Two ranks: tp 2 leaves dp 1; ZeRO 2 shards over dp 2.
  const Layout a = step_layout(tp_sp, 2), b = step_layout(zero2, 2), c = step_layout(dp, 4);
  CHECK((a.tp == 2 && a.dp == 1 && a.sp && a.zero == 0));
  CHECK((b.tp == 1 && b.dp == 2 && !b.sp && b.zero == 2));
  CHECK((c.tp == 1 && c.dp == 4 && c.gpus() == 4));
  CHECK(step_case_fits(dp, 1));
  CHECK_FALSE(step_case_fits(tp_sp, 1));
  CHECK_FALSE(step_case_fits(tp_sp, 3));
  CHECK(step_case_fits(tp_sp, 4));
  CHECK_FALSE(step_case_fits(zero2, 1));
  CHECK(step_case_fits(zero2, 2));
  // The data-parallel step of two ranks prices the gradient all-reduce: with a
  // slower link it costs more, by exactly the all-reduce's difference.
  Cluster fast = roofline(0.03, 0.7, 16, 0.2), slow = fast;
  fast.intra_node = fast.inter_node = Link{4.0, 1.0};
  slow.intra_node = slow.inter_node = Link{1.0, 1.0};
  for (Cluster* k : {&fast, &slow}) k->intra_comm_efficiency = k->inter_comm_efficiency = 1.0;
  StepSample s;
  s.what = dp;
  s.dtype = DType::kFp32;
  s.ranks = 2;
  // gpt-small: 4 layers of 12·64² + 13·64 (QKV, out-proj, MLP with biases, two
  // LayerNorms) + tied 250×64 embedding + 1024×64 learned positions (the work
  // model's GPT-2 table) + final LayerNorm (2·64): 281,600 fp32 gradients; ring
  // all-reduce of n = 2 moves 2·(1/2)·S bytes.
  const double bytes = 4.0 * (4 * (12 * 64 * 64 + 13 * 64) + 250 * 64 + 1024 * 64 + 2 * 64);
  const double want = bytes / 1e9 - bytes / 4e9;
  CHECK(rel(model_step_time(s, slow) - model_step_time(s, fast), want) < 1e-6);
}

TEST_CASE("the work samples price what the model charges outside the linear GEMMs") {
  // A layer costs more with slower memory and nothing less than zero; Adam is
  // the optimizer term of a one-rank step.
  const Cluster fast = roofline(0.03, 0.7, 100, 1.0), slow = roofline(0.03, 0.7, 1, 1.0);
  for (const WorkCase& c : work_cases(true)) {
    INFO(work_kind_name(c.kind) << " " << c.model << " seq " << c.seq);
    WorkSample s;
    s.what = c;
    s.dtype = DType::kFp32;
    CHECK(model_work_time(s, fast) > 0);
    CHECK(model_work_time(s, slow) > model_work_time(s, fast));
  }
}

TEST_CASE("the GEMM sweep holds the test specs' layer shapes and larger ones") {
  // gpt-small (tests/data/validate): h 64, QKV 3h = 192, ffn 256; 64 tokens per micro-batch.
  const std::vector<GemmCase> v = gemm_cases(false);
  auto has = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
    for (const GemmCase& g : v)
      if (g.m == m && g.n == n && g.k == k) return true;
    return false;
  };
  CHECK(has(64, 192, 64));   // QKV forward
  CHECK(has(192, 64, 64));   // its weight gradient
  CHECK(has(64, 256, 64));   // fc1 forward
  CHECK(has(64, 64, 256));   // fc2 forward
  CHECK(has(1024, 1024, 1024));
  CHECK(message_sizes(4 << 10, 64 << 20, 4).size() == 8);  // 4 KiB, 16 KiB, ..., 64 MiB
}

TEST_CASE("on a GPU the GEMM sweep adds Llama-2-7B's layer at 4096 tokens and large squares") {
  // Llama-2-7B (configs/models/llama-2-7b.yaml): h 4096, MHA so QKV 3h = 12288, SwiGLU fc1 2 x 11008 = 22016,
  // fc2 11008 -> 4096; tp 8 splits QKV to 1536 and fc1 to 2752 columns; 4096 tokens per micro-batch.
  auto has = [](const std::vector<GemmCase>& v, std::int64_t m, std::int64_t n, std::int64_t k) {
    for (const GemmCase& g : v)
      if (g.m == m && g.n == n && g.k == k) return true;
    return false;
  };
  const std::vector<GemmCase> gpu = gemm_cases(false, true), cpu = gemm_cases(false);
  CHECK(has(gpu, 4096, 12288, 4096));   // QKV forward, tp 1
  CHECK(has(gpu, 12288, 4096, 4096));   // its weight gradient
  CHECK(has(gpu, 4096, 22016, 4096));   // fc1 forward
  CHECK(has(gpu, 4096, 4096, 11008));   // fc2 forward
  CHECK(has(gpu, 4096, 1536, 4096));    // QKV forward, tp 8
  CHECK(has(gpu, 4096, 2752, 4096));    // fc1 forward, tp 8
  CHECK(has(gpu, 8192, 8192, 8192));
  CHECK_FALSE(has(cpu, 4096, 12288, 4096));  // the CPU keeps its small sweep
  CHECK(gpu.size() > cpu.size());
  CHECK(has(gemm_cases(true, true), 4096, 4096, 4096));
}

namespace {

Calibration synthetic_calibration() {
  Calibration c;
  c.host = "test-host";
  c.date = "2026-01-01T00:00:00Z";
  c.device_name = "Test CPU \"quoted\"";
  c.precision = DType::kBf16;
  c.ranks = 2;
  c.cores = 2;
  c.mpi = true;
  c.memory_gib = 11.5;
  c.memory_source = "test";
  c.gemm_fit = {25e9, 0.7, 0.1, 10};
  c.memory_fit = {16e9, 0.125, 0.2, 4, 0.375, 0.05, 4};
  c.link_fit = {0.8e-6, 3.2e9, 0.3, 24};
  c.samples.collectives = synthetic_collectives(0.8e-6, 3.2e9);
  c.step_fit = {0.6, 0.11, 0.35, 0.2, 0.05, 6};  // what is written: the step fit's
  return c;
}

}  // namespace

TEST_CASE("the cluster YAML loads back as the fitted cluster") {
  const Calibration c = synthetic_calibration();
  const Cluster want = calibrated_cluster(c, "calibrated-test");
  test::TempDir dir;
  const fs::path file = dir.path() / "cluster.yaml";
  std::ofstream(file) << calibrated_cluster_yaml(c, "calibrated-test");
  const Cluster got = load_cluster_file(file.string());
  CHECK(got.name == "calibrated-test");
  CHECK(got.source == "measured by paraplan calibrate on test-host, 2026-01-01T00:00:00Z");
  CHECK(got.gpu.name == "Test CPU \"quoted\"");
  CHECK(got.gpus_per_node == 2);
  struct Num {
    const char* name;
    double got, want;
  };
  const Num nums[] = {
      {"memory_gib", got.gpu.memory_gib, 11.5},
      {"peak_tflops_bf16", got.gpu.peak_tflops_bf16, 0.025},
      {"hbm_bandwidth_gbs", got.gpu.hbm_bandwidth_gbs, 16},
      {"intra bandwidth_gbs", got.intra_node.bandwidth_gbs, 3.2},
      {"intra latency_us", got.intra_node.latency_us, 0.8},
      {"inter bandwidth_gbs", got.inter_node.bandwidth_gbs, 3.2},
      {"gemm_efficiency", got.gemm_efficiency, 0.6},
      {"hbm_efficiency", got.hbm_efficiency, 0.11},
      {"optimizer_efficiency", got.optimizer_efficiency, 0.375},  // the memory fit's, not refitted
      {"attention_efficiency", got.attention_efficiency, 0.35},
      {"intra efficiency", got.intra_comm_efficiency, 1.0},
      {"runtime_overhead_gib", got.runtime_overhead_gib + 1, 1},
      {"fragmentation", got.fragmentation + 1, 1},
  };
  for (const Num& n : nums) {
    INFO(n.name);
    CHECK(rel(n.got, n.want) < 1e-5);
  }
  CHECK(rel(got.gpu.peak_tflops_bf16, want.gpu.peak_tflops_bf16) < 1e-5);
  // A plan spec pointing at it loads, and the time model runs on it.
  std::ofstream(dir.path() / "model.yaml") << "name: m\nnum_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\n"
                                              "ffn_hidden_size: 256\nvocab_size: 256\nactivation: gelu\n"
                                              "normalization: layernorm\ntie_embeddings: true\n"
                                              "position_embedding: rope\n";
  std::ofstream(dir.path() / "spec.yaml") << "model: model.yaml\ncluster: cluster.yaml\nnum_nodes: 1\n"
                                             "training:\n  seq_length: 64\n  global_batch_size: 8\n";
  const Spec s = load_spec_file((dir.path() / "spec.yaml").string());
  Layout l = parse_layout("dp=2");
  REQUIRE_FALSE(resolve_layout(s, &l).has_value());
  CHECK(estimate_time(s, l).step_s > 0);
}

TEST_CASE("the YAML says when the link was not measured or ranks were oversubscribed") {
  Calibration c = synthetic_calibration();
  c.ranks = 4;
  CHECK(calibrated_cluster_yaml(c, "x").find("OVERSUBSCRIBED") != std::string::npos);
  CHECK(render_calibration(c).find("not meaningful") != std::string::npos);
  c.mpi = false;
  c.ranks = 1;
  const std::string y = calibrated_cluster_yaml(c, "x");
  CHECK(y.find("NOT MEASURED") != std::string::npos);
  CHECK(y.find("OVERSUBSCRIBED") == std::string::npos);
}

TEST_CASE("paraplan calibrate --quick writes a cluster that plan accepts") {
  test::TempDir dir;
  const test::Result r =
      test::run_paraplan({"calibrate", "--quick", "--ranks", "2", "--output", "@DIR@/cluster.yaml", "--save-samples",
                          "@DIR@/samples.json"},
                         dir.path());
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.code == 0);
  // The saved samples fitted again give the same cluster, byte for byte.
  const test::Result again =
      test::run_paraplan({"calibrate", "--from-samples", "samples.json", "--output", "again.yaml"}, dir.path());
  INFO("refit stderr: " << again.err);
  CHECK(again.code == 0);
  CHECK(test::read_file(dir.path() / "again.yaml") == test::read_file(dir.path() / "cluster.yaml"));
  CHECK(r.out.find("fit: peak") != std::string::npos);
  CHECK(r.out.find("RMS error") != std::string::npos);
  CHECK(r.out.find("wrote") != std::string::npos);
  REQUIRE(fs::exists(dir.path() / "cluster.yaml"));
  CHECK_FALSE(fs::exists(dir.path() / "cluster.yaml.paraplan-tmp"));
  CHECK_NOTHROW(load_cluster_file((dir.path() / "cluster.yaml").string()));
  for (const char* f : {"gpt-small.yaml", "time-gpt-bf16.yaml"})
    fs::copy_file(fs::path(PARAPLAN_SOURCE_DIR) / "tests/data/validate" / f, dir.path() / f);
  std::string spec = test::read_file(dir.path() / "time-gpt-bf16.yaml");
  spec.replace(spec.find("cluster: cpu.yaml"), 17, "cluster: cluster.yaml");
  std::ofstream(dir.path() / "spec.yaml") << spec;
  const test::Result p = test::run_paraplan({"plan", "spec.yaml", "--format", "json"}, dir.path());
  INFO("plan stderr: " << p.err);
  CHECK(p.code == 0);
  CHECK(p.out.find("\"recommended\"") != std::string::npos);
}

TEST_CASE("paraplan calibrate: bad input is one line and exit 2, with no file left") {
  struct Row {
    const char* name;
    std::vector<std::string> args;
    const char* err_has;
  };
  std::vector<Row> rows = {
      {"output folder missing", {"calibrate", "--quick", "--output", "@DIR@/no/such/dir/c.yaml"}, "--output"},
      {"no --output", {"calibrate", "--quick"}, "--output"},
      {"unknown backend", {"calibrate", "--backend", "tpu", "--output", "@DIR@/c.yaml"}, "--backend"},
      {"zero ranks", {"calibrate", "--ranks", "0", "--output", "@DIR@/c.yaml"}, "--ranks"},
      {"samples file missing", {"calibrate", "--from-samples", "@DIR@/none.json", "--output", "@DIR@/c.yaml"},
       "none.json"},
  };
  if (!backend_available(Backend::kGpu))
    rows.push_back({"gpu backend without CUDA", {"calibrate", "--backend", "gpu", "--output", "@DIR@/c.yaml"},
                    "built without CUDA"});
  for (const Row& row : rows) {
    INFO(row.name);
    test::TempDir dir;
    const test::Result r = test::run_paraplan(row.args, dir.path());
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.rfind("paraplan: error: ", 0) == 0);
    CHECK(r.err.find(row.err_has) != std::string::npos);
    CHECK(fs::is_empty(dir.path()));
  }
  // A samples file that is not one: named, exit 2, no cluster written.
  for (const char* text : {"{", "{\"format\": \"something else\"}", "[1, 2]"}) {
    INFO(text);
    test::TempDir dir;
    std::ofstream(dir.path() / "s.json") << text;
    const test::Result r =
        test::run_paraplan({"calibrate", "--from-samples", "@DIR@/s.json", "--output", "@DIR@/c.yaml"}, dir.path());
    CHECK(r.code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find("s.json") != std::string::npos);
    CHECK_FALSE(fs::exists(dir.path() / "c.yaml"));
  }
}

// What `calibrate --backend gpu --ranks 1 --save-samples` measured on one H100
// (tests/data/calibrate/h100-gpu-samples.json, docs/gpu.md "One H100,
// 2026-11-26"). The executor's non-GEMM kernels there are reference-grade (one
// warp per attention row), so a fit of hbm_efficiency to them lands at its
// floor; it used to be written and to price every GEMM as memory-bound (a
// 0.53 ms QKV GEMM "fitted" at 85.6 ms). Now it is reported and set aside.
TEST_CASE("calibrate on a GPU: reference-grade kernels do not set the HBM rate or price the GEMMs", "[calibrate]") {
  std::ifstream in(test::repo("tests/data/calibrate/h100-gpu-samples.json"));
  REQUIRE(in);
  const nlohmann::json j = nlohmann::json::parse(in);
  Calibration c;
  c.backend = "gpu";
  c.precision = DType::kBf16;
  c.ranks = 1;
  c.cores = 16;
  c.mpi = true;
  c.samples = samples_from_json(j.at("samples"));
  fit_calibration(&c);
  // The measured work: Llama-2-7B's QKV at 4096 tokens took 0.534 ms (772 TFLOP/s), 8192^3 1.479 ms.
  int checked = 0;
  for (const GemmSample& g : c.samples.gemm) {
    if (g.dtype != DType::kBf16 || (g.shape.name.rfind("llama-2-7b", 0) != 0 && g.shape.name != "square 8192")) continue;
    INFO(g.shape.name << ": measured " << g.seconds * 1e3 << " ms, fitted " << g.fitted_s * 1e3 << " ms");
    CHECK(std::abs(g.fitted_s / g.seconds - 1) < 0.2);
    ++checked;
  }
  CHECK(checked == 46);  // 15 GEMMs x tp 1, 2, 8 and the 8192 square
  CHECK(c.memory_fit.efficiency < kMinHbmEfficiency);
  CHECK(c.memory_fit_rejected);
  CHECK(c.step_fit_rejected);
  const Cluster k = calibrated_cluster(c, "h100");
  CHECK(k.hbm_efficiency == Cluster{}.hbm_efficiency);
  CHECK(k.gemm_efficiency == c.gemm_fit.efficiency);
  CHECK(k.attention_efficiency == 0);
  // The written peak x efficiency: between the sustained rate measured through PyTorch (683 TFLOP/s at 8192^3,
  // power-capped) and the best GEMM calibrate timed (811 TFLOP/s).
  const double rate = k.gpu.peak_tflops_bf16 * k.gemm_efficiency;
  CHECK(rate > 683);
  CHECK(rate < 811);
  const std::string yaml = calibrated_cluster_yaml(c, "h100");
  CHECK(yaml.find("NOT USED") != std::string::npos);
  CHECK(render_calibration(c).find("NOT written") != std::string::npos);
}
