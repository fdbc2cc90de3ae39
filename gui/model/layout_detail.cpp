#include "gui/model/layout_detail.hpp"

#include <algorithm>

#include "planner/plan_report.hpp"
#include "planner/report.hpp"

namespace paraplan::gui {

const char* time_term_name(TimeTerm t) {
  switch (t) {
    case TimeTerm::kCompute: return "compute";
    case TimeTerm::kTpComm: return "TP comm";
    case TimeTerm::kPpComm: return "PP comm";
    case TimeTerm::kDpComm: return "DP comm (exposed)";
    case TimeTerm::kBubble: return "bubble";
    case TimeTerm::kOptimizer: return "optimizer";
    case TimeTerm::kCpComm: return "CP ring (exposed)";
    case TimeTerm::kEpComm: return "EP all-to-all";
    case TimeTerm::kHostWait: return "host dispatch wait";
    case TimeTerm::kCount: break;
  }
  return "?";
}

double time_term_value(const StepTime& t, TimeTerm term) {
  switch (term) {
    case TimeTerm::kCompute: return t.compute_s;
    case TimeTerm::kTpComm: return t.tp_comm_s;
    case TimeTerm::kPpComm: return t.pp_comm_s;
    case TimeTerm::kDpComm: return t.dp_comm_s;
    case TimeTerm::kBubble: return t.bubble_s;
    case TimeTerm::kOptimizer: return t.optimizer_s;
    case TimeTerm::kCpComm: return t.cp_comm_s;
    case TimeTerm::kEpComm: return t.ep_comm_s;
    case TimeTerm::kHostWait: return t.host_wait_s;
    case TimeTerm::kCount: break;
  }
  return 0;
}

std::vector<Segment> stack_segments(const std::vector<std::pair<int, double>>& values, double scale) {
  std::vector<Segment> out;
  double x = 0;
  for (const auto& [key, v] : values) {
    if (v <= 0) continue;
    const double w = scale > 0 ? v / scale : 0;
    out.push_back({key, v, x, x + w});
    x += w;
  }
  return out;
}

LayoutDetail make_detail(const Spec& spec, const Layout& layout, int formulas_stage) {
  LayoutDetail d;
  d.layout = layout;
  d.layout_text = to_string(layout);
  d.memory = estimate_memory(spec, layout);
  d.time = estimate_time(spec, layout);
  d.scale_bytes = double(std::max(d.memory.gpu_bytes, d.memory.peak_bytes));
  for (int s = 0; s < int(d.memory.stages.size()); ++s) {
    const MemoryBreakdown& m = d.memory.stages[s];
    std::vector<std::pair<int, double>> v;
    for (int c = 0; c < kNumCategories; ++c) v.push_back({c, double(m.bytes[c])});
    d.stages.push_back({s, m.total(), s == d.memory.heaviest_stage, m.total() > d.memory.usable_bytes,
                        stack_segments(v, d.scale_bytes)});
  }
  std::vector<std::pair<int, double>> t;
  for (int i = 0; i < kNumTimeTerms; ++i) t.push_back({i, time_term_value(d.time, TimeTerm(i))});
  d.time_segments = stack_segments(t, d.time.step_s);
  d.formulas_stage = formulas_stage >= 0 && formulas_stage < layout.pp ? formulas_stage : -1;
  d.explain_text = render_explain(Format::kTable, spec, layout, d.memory,
                                  ExplainOptions{true, d.formulas_stage});
  d.explain_text += "\ntime: " + time_text(d.time, layout);
  return d;
}

bool resolve_layout_text(const Spec& spec, const std::string& text, Layout* out, std::string* error) {
  try {
    Layout l = parse_layout(text);
    // As `explain` does: a layout named explicitly may span nodes with its tp group.
    if (auto problem = resolve_layout(spec, &l, /*check_tp_span=*/false)) {
      *error = "layout." + problem->field + ": " + problem->message;
      return false;
    }
    *out = l;
    return true;
  } catch (const LayoutError& e) {
    *error = "layout." + e.field() + ": " + e.what();
  }
  return false;
}

}  // namespace paraplan::gui
