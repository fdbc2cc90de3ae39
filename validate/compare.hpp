// Measurement (what the ranks saw) against prediction (the memory and time
// models), per rank and category, and its serialisation.
#pragma once

#include <cmath>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "costmodel/memory.hpp"
#include "costmodel/time.hpp"
#include "validate/executor.hpp"

namespace paraplan::validate {

// A category passes when within 1% of the prediction, or within 64 KiB when
// the prediction is under 6 MiB (small terms are dominated by granularity).
inline constexpr double kCategoryTolerance = 0.01;
inline constexpr std::int64_t kSmallCategoryBytes = 6ll << 20;
inline constexpr std::int64_t kSmallCategorySlack = 64ll << 10;
bool category_within(std::int64_t predicted, std::int64_t measured);

// One term of the time model against what a rank measured, seconds per step.
struct TimeTerm {
  std::string name;  // "forward", "backward", "optimizer", "tp_comm", "pp_comm+bubble", "dp_comm", "other"
  double predicted = 0, measured = 0;
};

struct RankComparison {
  RankResult measured;
  // Per step (the measured steps after the first): compute phases without the
  // collectives inside them, each group's collectives (waits included, so the
  // pipeline bubble shows up in pp_comm+bubble), and "other" = the step less
  // all of these (the executor's bookkeeping; the model has no such term).
  std::vector<TimeTerm> time_terms;
  MemoryBreakdown predicted;  // the memory model's terms for this rank's stage
  // (sum of measured category peaks − predicted total) / predicted total: the
  // model's total is the sum of its category peaks, so this is like for like.
  double error = 0;
  bool categories_ok = true;  // every category within category_within
};

struct Comparison {
  std::string layout;
  std::string backend;
  bool emulated = false;
  int steps = 0;
  double tolerance = 0.02;
  std::vector<RankComparison> ranks;
  double max_error = 0;  // largest |error| over ranks
  std::vector<double> loss;
  double predicted_step_s = 0, measured_step_s = 0;
  StepTime predicted_time;
  // Every step's loss is a number: a NaN or infinity means the run's
  // arithmetic broke, whatever its memory shows.
  bool loss_finite() const;
  // The verdict, and validate's exit code: memory (every rank's peak within the
  // tolerance) and a finite loss. Time is reported apart and judged on its own.
  bool pass() const { return max_error <= tolerance && loss_finite(); }
  // (measured − predicted) / predicted step time, and whether it lies within
  // the time model's stated uncertainty (kTieBand, the decision rule's band).
  double time_error() const { return predicted_step_s > 0 ? (measured_step_s - predicted_step_s) / predicted_step_s : 0; }
  bool time_within_band() const { return predicted_step_s > 0 && std::abs(time_error()) <= kTieBand; }
};

// The prediction a run is compared with: the spec's, with
//  * runtime and fragmentation 0 on the CPU backend (host memory has neither);
//  * no DP/ZeRO overlap (training.overlap_dp_comm false): both executors run
//    every collective on the compute stream, so all of it is on the step's path.
//  * no NCCL buffers for an emulated rank (its collectives are local stand-ins:
//    it creates no communicator).
Spec prediction_spec(const Spec& spec, bool cpu_backend, bool emulated = false);

// The time terms of one measured rank (see RankComparison::time_terms).
std::vector<TimeTerm> time_terms(const Spec& prediction, const Layout& layout, const RankResult& r);

Comparison compare(const Spec& spec, const Layout& layout, const std::string& backend,
                   bool emulated, std::vector<RankResult> results, double tolerance);

// Median of the step times after the first (warm-up) step.
double measured_step_seconds(const RankResult& r);

nlohmann::json rank_result_json(const RankResult& r);
RankResult rank_result_from_json(const nlohmann::json& j);

// The `paraplan validate --format json` document (README has the schema).
nlohmann::json comparison_json(const Comparison& c);
std::string render_comparison(const Comparison& c);

}  // namespace paraplan::validate
