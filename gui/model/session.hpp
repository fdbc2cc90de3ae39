// Everything one paraplan-gui window shows, as plain data (no ImGui): the
// inputs, the plan on screen, the table and chart models, the selection and
// its detail, the validate job and the UI state. The views read and edit it;
// update() moves it forward once per frame (re-plan on edits, pick up
// finished plans, keep the selection). Tested without a window.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gui/model/chart_model.hpp"
#include "gui/model/files.hpp"
#include "gui/model/inputs.hpp"
#include "gui/model/layout_detail.hpp"
#include "gui/model/planner_thread.hpp"
#include "gui/model/table_model.hpp"
#include "gui/model/validate_job.hpp"

namespace paraplan::gui {

// What the window shows: every view tiled, or one of them filling it.
enum class ViewId { kOverview, kInputs, kTable, kChart, kLayout, kValidate, kCount };
const char* view_name(ViewId v);  // "overview", "inputs", "table", "chart", "layout", "validate"
bool parse_view(const std::string& name, ViewId* out);

// UI state the views keep between frames (Tracy's ViewData): plain values.
struct UiState {
  ViewId focus = ViewId::kOverview;
  TableFilter filter;
  SortSpec sort;
  ColorBy color_by = ColorBy::kZero;
  bool log_y = false;
  bool log_y_chosen = false;    // the user set log_y (--log-y, the checkbox): else each plan picks (wide_step_range)
  bool dim_filtered = true;     // chart: points the table filters out drawn faint
  ChartView chart_view;
  bool chart_zoomed = false;    // the user moved the view: keep it across re-plans
  int hovered = -1;             // candidate under the mouse this frame (chart or table row)
  int hovered_prev = -1;        // ... last frame (so a view drawn first can show the other's hover)
  bool scroll_to_selection = false;  // table: bring the selected row into view once
  bool pin_tooltip = false;     // chart: show the selected point's tooltip without a mouse (screenshots)
  int formulas_stage = -1;
  ValidateOptions validate;
  int validate_rank = -1;       // rank whose categories the Validate view lists; -1 = the worst
  std::string status;           // last message of an action (saved, failed, ...)
};

// Timings of the last re-plan, from the edit to the frame that shows it.
struct ReplanTiming {
  std::int64_t layouts = 0;
  double plan_ms = 0, prepare_ms = 0;  // worker: make_plan, layout strings
  double apply_ms = 0;                 // UI thread: chart data, table, selection detail
  double latency_ms = 0;               // edit -> applied on the UI thread
};

class Session {
 public:
  Session();

  Inputs inputs;
  UiState ui;
  Catalog catalog;
  std::string paraplan_exe;  // the CLI next to paraplan-gui (validate)

  // Once per frame: posts a re-plan when the inputs changed, applies a
  // finished plan. Returns true when a new plan was applied.
  bool update();
  // Blocks until the planner is idle and its plan applied (screenshots, tests).
  bool wait_for_plan(std::chrono::milliseconds timeout);
  bool planning() const { return planner_.busy() || applied_gen_ != requested_gen_; }
  void set_on_plan_done(std::function<void()> f) { planner_.set_on_done(std::move(f)); }

  const PlanSnapshot* plan() const { return plan_.get(); }
  const ChartData& chart() const { return chart_; }
  const TableModel& table() const { return table_; }
  // Recomputes the table rows when the filter or sort changed (cheap otherwise).
  void refresh_table();

  // The selected candidate (index into plan()->plan.candidates), or -1.
  int selected() const { return selected_; }
  void select(int index);
  // Selects a layout given as text; when it is not among the candidates (the
  // search constraints exclude it) it is still shown in the detail views.
  bool select_text(const std::string& text, std::string* error);
  const std::optional<LayoutDetail>& detail() const { return detail_; }
  void set_formulas_stage(int stage);

  // Starts `paraplan validate` on the selected layout.
  bool start_validate();
  ValidateJob& validate() { return validate_; }

  const ReplanTiming& timing() const { return timing_; }

 private:
  void apply(std::shared_ptr<const PlanSnapshot> snap);
  void rebuild_detail();

  PlannerThread planner_;
  std::uint64_t planned_revision_ = ~0ull, requested_gen_ = 0, applied_gen_ = 0;
  std::shared_ptr<const PlanSnapshot> plan_;
  ChartData chart_;
  TableModel table_;
  int selected_ = -1;
  std::optional<Layout> selected_layout_;
  std::optional<LayoutDetail> detail_;
  ValidateJob validate_;
  ReplanTiming timing_;
};

}  // namespace paraplan::gui
