// The selected layout's view-model: per-stage memory as stacked bar segments
// against the GPU capacity, the step-time breakdown as one stacked bar, and
// the `explain --formulas` text. Computed once per selection, not per frame.
#pragma once

#include <string>
#include <vector>

#include "costmodel/memory.hpp"
#include "costmodel/time.hpp"
#include "planner/search.hpp"

namespace paraplan::gui {

// One piece of a stacked bar: `key` is a Category (memory) or a TimeTerm
// (time); [x0, x1) is its extent as a fraction of the bar's full scale.
struct Segment {
  int key = 0;
  double value = 0;  // bytes or seconds
  double x0 = 0, x1 = 0;
};

struct StageBar {
  int stage = 0;
  std::int64_t total = 0;
  bool heaviest = false;
  bool over = false;  // total above the usable memory
  std::vector<Segment> segments;  // non-zero categories, in Category order
};

enum class TimeTerm { kCompute, kTpComm, kPpComm, kDpComm, kBubble, kOptimizer, kCpComm, kEpComm, kHostWait, kCount };
inline constexpr int kNumTimeTerms = int(TimeTerm::kCount);
const char* time_term_name(TimeTerm t);
double time_term_value(const StepTime& t, TimeTerm term);

// Lays `values` (each >= 0) end to end on a bar whose full scale is `scale`;
// zero values are left out.
std::vector<Segment> stack_segments(const std::vector<std::pair<int, double>>& values, double scale);

struct LayoutDetail {
  Layout layout;  // resolved
  std::string layout_text;
  MemoryEstimate memory;
  StepTime time;
  // Full scale of the stage bars: the larger of the GPU capacity and the
  // heaviest stage, so the capacity and headroom lines are always on the bar.
  double scale_bytes = 0;
  std::vector<StageBar> stages;
  std::vector<Segment> time_segments;  // scale = step time
  int formulas_stage = -1;             // -1 = heaviest
  std::string explain_text;            // render_explain(table, formulas) of that stage
};

// For a resolved layout of `spec` (e.g. a plan candidate's).
LayoutDetail make_detail(const Spec& spec, const Layout& layout, int formulas_stage = -1);

// Parses and resolves a layout string against the spec (the --select option,
// the "go to layout" box); returns the error text instead when it cannot run.
bool resolve_layout_text(const Spec& spec, const std::string& text, Layout* out, std::string* error);

}  // namespace paraplan::gui
