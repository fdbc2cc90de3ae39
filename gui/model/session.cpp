#include "gui/model/session.hpp"

#include <thread>

#include "gui/model/spec_writer.hpp"

namespace paraplan::gui {

namespace {
const char* const kViewNames[] = {"overview", "inputs", "table", "chart", "layout", "validate"};
double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

const char* view_name(ViewId v) {
  const int i = int(v);
  return i >= 0 && i < int(ViewId::kCount) ? kViewNames[i] : "?";
}

bool parse_view(const std::string& name, ViewId* out) {
  for (int i = 0; i < int(ViewId::kCount); ++i)
    if (name == kViewNames[i]) return *out = ViewId(i), true;
  return false;
}

Session::Session() = default;

bool Session::update() {
  if (inputs.loaded && inputs.revision != planned_revision_) {
    requested_gen_ = planner_.request(inputs.spec);
    planned_revision_ = inputs.revision;
  }
  bool applied = false;
  if (auto latest = planner_.latest(); latest && latest->generation != applied_gen_) {
    apply(std::move(latest));
    applied = true;
  }
  validate_.poll();
  refresh_table();
  return applied;
}

bool Session::wait_for_plan(std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    update();
    if (!planning()) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    planner_.wait_idle(left);
  }
}

void Session::refresh_table() {
  table_.update(plan_ ? &plan_->plan : nullptr, plan_ ? &plan_->layout_text : nullptr,
                plan_ ? plan_->generation : 0, ui.filter, ui.sort);
}

void Session::apply(std::shared_ptr<const PlanSnapshot> snap) {
  const auto t0 = std::chrono::steady_clock::now();
  plan_ = std::move(snap);
  applied_gen_ = plan_->generation;
  chart_ = chart_data(plan_->plan, plan_->gpu_bytes, plan_->usable_bytes);
  if (!ui.log_y_chosen) ui.log_y = wide_step_range(chart_);
  if (!ui.chart_zoomed) ui.chart_view = default_view(chart_, ui.log_y);
  refresh_table();
  // Keep the selected layout when the new plan still has it (or it still
  // runs on the new spec); otherwise select the recommended one.
  const auto& cands = plan_->plan.candidates;
  selected_ = -1;
  if (selected_layout_) {
    for (int i = 0; i < int(cands.size()); ++i)
      if (cands[i].layout == *selected_layout_) {
        selected_ = i;
        break;
      }
    if (selected_ < 0 && layout_invalid(plan_->spec, *selected_layout_, false)) selected_layout_.reset();
  }
  if (!selected_layout_ && !cands.empty()) {
    selected_ = 0;
    selected_layout_ = cands[0].layout;
  }
  rebuild_detail();
  timing_.layouts = plan_->plan.evaluated;
  timing_.plan_ms = plan_->plan_ms;
  timing_.prepare_ms = plan_->prepare_ms;
  timing_.apply_ms = ms_since(t0);
  timing_.latency_ms = ms_since(plan_->requested);
}

void Session::rebuild_detail() {
  if (!plan_ || !selected_layout_) {
    detail_.reset();
    return;
  }
  if (ui.formulas_stage >= selected_layout_->pp) ui.formulas_stage = -1;
  detail_ = make_detail(plan_->spec, *selected_layout_, ui.formulas_stage);
}

void Session::select(int index) {
  if (!plan_ || index < 0 || index >= int(plan_->plan.candidates.size())) return;
  if (index == selected_) return;
  selected_ = index;
  selected_layout_ = plan_->plan.candidates[index].layout;
  rebuild_detail();
}

bool Session::select_text(const std::string& text, std::string* error) {
  if (!plan_) {
    *error = "no plan yet";
    return false;
  }
  Layout l;
  if (!resolve_layout_text(plan_->spec, text, &l, error)) return false;
  selected_layout_ = l;
  selected_ = -1;
  const auto& cands = plan_->plan.candidates;
  for (int i = 0; i < int(cands.size()); ++i)
    if (cands[i].layout == l) selected_ = i;
  rebuild_detail();
  return true;
}

void Session::set_formulas_stage(int stage) {
  if (stage == ui.formulas_stage) return;
  ui.formulas_stage = stage;
  rebuild_detail();
}

bool Session::start_validate() {
  if (!plan_ || !detail_) return false;
  return validate_.start(paraplan_exe, spec_to_yaml(plan_->spec), detail_->layout, detail_->memory,
                         ui.validate);
}

}  // namespace paraplan::gui
