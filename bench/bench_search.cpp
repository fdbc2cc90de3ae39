// Speed of the planner's inner loop (issue 3, "Speed"):
//   BM_Plan405B_16384  the full exhaustive search for Llama-3.1-405B on 2048 x 8
//                      H100 = 16,384 GPUs, every dp/tp/pp/vpp/sp/zero/recompute/
//                      mbs/schedule the planner can enumerate (target: < 1 s);
//   BM_EvaluateOne     evaluate() of one layout (memory + step time), which must
//                      not allocate.
// Before the benchmark tables the program prints one plain line (to stderr, next
// to the library's "Run on ..." header, so that --benchmark_format=json output on
// stdout stays valid) with the search's layout counts and the median time of 5
// untimed runs.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "planner/search.hpp"
#include "planner/spec_loader.hpp"

namespace {

const char* const kSpecRel = "configs/examples/llama3.1-405b-h100.yaml";

// The 405B example spec with its `search:` block removed: the benchmark covers
// the whole space (tp is still kept inside a node, as the planner's default).
paraplan::Spec load_405b() {
  paraplan::Spec s = paraplan::load_spec_file(std::string(PARAPLAN_SOURCE_DIR) + "/" + kSpecRel);
  s.search = paraplan::SearchSpace{};
  s.search.allow_tp_across_nodes = false;
  return s;
}

const paraplan::Spec& spec_405b() {
  static const paraplan::Spec s = load_405b();
  return s;
}

void BM_Plan405B_16384(benchmark::State& state) {
  const paraplan::Spec& s = spec_405b();
  std::int64_t evaluated = 0, feasible = 0, total = 0;
  double search_s = 0;
  for (auto _ : state) {
    paraplan::Plan plan = paraplan::make_plan(s);
    benchmark::DoNotOptimize(plan.candidates.data());
    evaluated = plan.evaluated;
    feasible = plan.feasible;
    search_s = plan.search_seconds;
    total += plan.evaluated;
  }
  state.counters["evaluated"] = benchmark::Counter(double(evaluated));
  state.counters["feasible"] = benchmark::Counter(double(feasible));
  // Layouts evaluated per second of (CPU) time, over all iterations.
  state.counters["layouts_per_second"] = benchmark::Counter(double(total), benchmark::Counter::kIsRate);
  // make_plan's own wall-clock measurement of its last run (incl. sort and Pareto front).
  state.counters["search_seconds"] = benchmark::Counter(search_s);
}
BENCHMARK(BM_Plan405B_16384)->Unit(benchmark::kMillisecond);

// A representative layout: tp=8 inside a node, 2 pipeline stages (126 layers =
// 2 x 63), ZeRO-1, sequence parallelism, selective recompute; dp derived (1024).
paraplan::Layout representative_layout(const paraplan::Spec& s) {
  paraplan::Layout l = paraplan::parse_layout("tp=8,pp=2,vpp=1,sp=1,zero=1,recompute=selective,mbs=1");
  l.dp = 0;
  if (const auto problem = paraplan::resolve_layout(s, &l))
    throw std::runtime_error("representative layout is invalid: " + problem->message);
  return l;
}

void BM_EvaluateOne(benchmark::State& state) {
  const paraplan::Spec& s = spec_405b();
  paraplan::Layout l;
  try {
    l = representative_layout(s);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.SetLabel(paraplan::to_string(l));
  for (auto _ : state) {
    benchmark::DoNotOptimize(&l);  // the compiler may not assume the layout is unchanged
    paraplan::Candidate c = paraplan::evaluate(s, l);
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EvaluateOne);

// Issue 12's search blow-up: 14,414,400 GPUs (1,801,800 DGX H100 nodes), a
// 720-layer model and a global batch of 14,414,400 sequences (target: < 2 s;
// 42 s before tp_across_nodes and other tp/pp-level rejections were counted
// without walking the inner loops and the heaviest stage was found among
// stages 0, 1 and the last).
paraplan::Spec deep_14m() {
  paraplan::Spec s = paraplan::load_spec_file(std::string(PARAPLAN_SOURCE_DIR) + "/" + kSpecRel);
  s.search = paraplan::SearchSpace{};
  s.model.name = "deep-720";
  s.model.num_layers = 720;
  s.model.hidden_size = 4096;
  s.model.num_attention_heads = 32;
  s.model.num_kv_heads = 32;
  s.model.head_dim = 128;
  s.model.ffn_hidden_size = 16384;
  s.num_nodes = 1'801'800;
  s.training.seq_length = 2048;
  s.training.global_batch_size = 14'414'400;
  return s;
}

void BM_Plan_14M_GPUs_720_layers(benchmark::State& state) {
  static const paraplan::Spec s = deep_14m();
  for (auto _ : state) {
    paraplan::Plan plan = paraplan::make_plan(s);
    benchmark::DoNotOptimize(plan.candidates.data());
    state.counters["evaluated"] = benchmark::Counter(double(plan.evaluated));
  }
}
BENCHMARK(BM_Plan_14M_GPUs_720_layers)->Unit(benchmark::kMillisecond)->Iterations(3);

// Issue 12: a search list of 10,001 duplicate micro-batch sizes (target: < 1 s).
void BM_Plan_duplicate_constraints(benchmark::State& state) {
  static const paraplan::Spec s = [] {
    paraplan::Spec x = paraplan::load_spec_file(std::string(PARAPLAN_SOURCE_DIR) + "/configs/examples/llama2-7b-dgx-h100.yaml");
    x.search.mbs.assign(10'001, 1);
    return x;
  }();
  for (auto _ : state) {
    paraplan::Plan plan = paraplan::make_plan(s);
    benchmark::DoNotOptimize(plan.candidates.data());
  }
}
BENCHMARK(BM_Plan_duplicate_constraints)->Unit(benchmark::kMillisecond);

// Issue 16: the search with expert parallelism (ep over the divisors of
// num_experts, etp 1 or tp): Mixtral-8x7B on 64 H100 (the shipped example),
// and DeepSeek-V3 on 2048 H800 with the published layout removed (the whole space).
paraplan::Spec moe_spec(const char* rel) {
  paraplan::Spec s = paraplan::load_spec_file(std::string(PARAPLAN_SOURCE_DIR) + "/" + rel);
  s.default_layout.reset();
  return s;
}
void plan_loop(benchmark::State& state, const paraplan::Spec& s) {
  std::int64_t evaluated = 0;
  for (auto _ : state) {
    paraplan::Plan plan = paraplan::make_plan(s);
    benchmark::DoNotOptimize(plan.candidates.data());
    evaluated = plan.evaluated;
  }
  state.counters["evaluated"] = benchmark::Counter(double(evaluated));
}
void BM_Plan_Mixtral_64_H100(benchmark::State& state) {
  static const paraplan::Spec s = moe_spec("configs/examples/mixtral-8x7b-h100-64.yaml");
  plan_loop(state, s);
}
BENCHMARK(BM_Plan_Mixtral_64_H100)->Unit(benchmark::kMillisecond);
void BM_Plan_DeepSeekV3_2048_H800(benchmark::State& state) {
  static const paraplan::Spec s = moe_spec("configs/examples/deepseek-v3-h800.yaml");
  plan_loop(state, s);
}
BENCHMARK(BM_Plan_DeepSeekV3_2048_H800)->Unit(benchmark::kMillisecond);

// The plain summary line: counts of one run and the median search time of 5.
void print_summary() {
  const paraplan::Spec& s = spec_405b();
  std::vector<double> secs;
  paraplan::Plan plan;
  for (int i = 0; i < 5; ++i) {
    plan = paraplan::make_plan(s);
    secs.push_back(plan.search_seconds);
  }
  std::sort(secs.begin(), secs.end());
  std::fprintf(stderr, "405B/%d full search: %lld layouts evaluated, %lld feasible, %.3g s (median of %zu runs)\n",
              s.num_gpus(), static_cast<long long>(plan.evaluated),
              static_cast<long long>(plan.feasible), secs[secs.size() / 2], secs.size());
  std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  try {
    spec_405b();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paraplan_bench: cannot load %s/%s: %s\n", PARAPLAN_SOURCE_DIR, kSpecRel, e.what());
    return 1;
  }
  print_summary();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
