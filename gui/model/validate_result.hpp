// `paraplan validate --format json` output, parsed for the Validate view:
// measured next to predicted per memory category, per rank, with the error.
// Contract: {"layout", "backend", "ranks": [{"rank", "stage", "predicted":
// {category: bytes, ..., "total"}, "measured": {...}, "error"}], "max_error",
// "loss": [...], "step_time_s": {"predicted", "measured"}}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace paraplan::gui {

struct CategoryRow {
  std::string name;  // weights, gradients, ..., total last
  std::int64_t predicted = 0, measured = 0;
  // (measured - predicted) / predicted; empty when predicted is 0 and measured is not.
  std::optional<double> error;
};

struct RankResult {
  int rank = 0, stage = 0;
  double error = 0;  // relative error of the total, as reported
  std::vector<CategoryRow> rows;
};

struct ValidateResult {
  std::string layout, backend;
  std::vector<RankResult> ranks;
  double max_error = 0;
  std::vector<double> loss;
  double step_predicted_s = 0, step_measured_s = 0;
  std::optional<double> tolerance;  // optional key: the largest total error that passes
  int steps = 0;                    // optional key: training steps run (0 = not reported)
};

// Relative error of measured against predicted (see CategoryRow::error).
std::optional<double> relative_error(std::int64_t predicted, std::int64_t measured);

// Throws std::runtime_error naming the missing or mistyped key
// ("validate output: ranks[0].measured: missing"), or the JSON syntax error.
ValidateResult parse_validate_json(const std::string& text);

}  // namespace paraplan::gui
