// Selected layout: its verdict and throughput, one stacked bar per pipeline
// stage (memory categories against the GPU capacity and the usable memory),
// the step-time breakdown as one stacked bar, and `explain --formulas`.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <fmt/format.h>

#include "gui/views/style.hpp"
#include "gui/views/views.hpp"

namespace paraplan::gui {

namespace {

// One horizontal stacked bar of `segments` (fractions of `width`), with a
// tooltip naming the segment under the mouse. Returns the bar's rectangle.
template <class Name, class Color>
void stacked_bar(const std::vector<Segment>& segments, float width, float height, Name name, Color color,
                 const char* unit) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p, ImVec2(p.x + width, p.y + height), IM_COL32(40, 42, 50, 255));
  ImGui::InvisibleButton("##bar", ImVec2(width, height));
  const bool hovered = ImGui::IsItemHovered();
  const float mx = ImGui::GetIO().MousePos.x;
  for (const Segment& s : segments) {
    const float x0 = p.x + float(s.x0) * width, x1 = p.x + float(std::min(s.x1, 1.0)) * width;
    dl->AddRectFilled(ImVec2(x0, p.y), ImVec2(std::max(x1, x0 + 1), p.y + height), color(s.key));
    if (hovered && mx >= x0 && mx < x1) {
      ImGui::BeginTooltip();
      if (std::string(unit) == "B")
        ImGui::Text("%s: %s", name(s.key), bytes_text(s.value).c_str());
      else
        ImGui::Text("%s: %.3f %s", name(s.key), s.value, unit);
      ImGui::EndTooltip();
    }
  }
}

void header(const LayoutDetail& d, const Candidate* c, int rank) {
  ImGui::PushTextWrapPos(0);
  ImGui::TextUnformatted(d.layout_text.c_str());
  const MemoryEstimate& m = d.memory;
  if (rank > 0) ImGui::Text("rank #%d in the plan", rank);
  else ImGui::TextColored(kTextWarn, "not among the searched layouts (outside the search constraints)");
  if (rank == 1 && c && c->fits) {
    ImGui::SameLine();
    ImGui::TextColored(kTextGood, "(recommended)");
  }
  ImGui::TextColored(m.fits ? kTextGood : kTextOom, "%s: heaviest rank %d (stage %d) needs %s of %s usable, margin %s",
                     m.fits ? "FITS" : "DOES NOT FIT", m.heaviest_rank, m.heaviest_stage,
                     bytes_text(double(m.peak_bytes)).c_str(), bytes_text(double(m.usable_bytes)).c_str(),
                     bytes_text(double(m.margin_bytes)).c_str());
  const std::int64_t held = m.heaviest().held_for_streams;
  const std::string held_part =
      held > 0 ? fmt::format(" - {} held for the NCCL stream (a failed allocation frees it first)", bytes_text(double(held)))
               : std::string();
  ImGui::TextColored(kTextDim, "on the device %s = reserved %s (allocated %s)%s + outside the allocator",
                     bytes_text(double(m.device_bytes)).c_str(), bytes_text(double(m.reserved_bytes)).c_str(),
                     bytes_text(double(m.allocated_bytes)).c_str(), held_part.c_str());
  const StepTime& t = d.time;
  ImGui::Text("step %.3f s, %.0f tokens/s, %.1f TFLOP/s per GPU, MFU %.1f%%, %d micro-batches", t.step_s, t.tokens_per_s,
              t.tflops_per_gpu, 100 * t.mfu, t.microbatches);
  // Where the model cannot vouch for this layout (issue 15): an allocator
  // flush, then the time warnings.
  if (const std::string w = memory_warning_message(m); !w.empty()) ImGui::TextColored(kTextWarn, "warning: %s", w.c_str());
  for (const std::string& w : warning_messages(t)) ImGui::TextColored(kTextWarn, "warning: %s", w.c_str());
  ImGui::PopTextWrapPos();
}

void memory_bars(const LayoutDetail& d) {
  ImGui::TextUnformatted("Memory per pipeline stage (one GPU of each)");
  std::vector<std::pair<ImU32, std::string>> legend;
  for (int c = 0; c < kNumCategories; ++c) legend.emplace_back(category_color(c), category_name(Category(c)));
  legend_flow(legend);
  const float label_w = ImGui::CalcTextSize("stage 000 ").x;
  const float total_w = ImGui::CalcTextSize(" 000.00 GiB <").x;
  const float bar_w = std::max(60.0f, ImGui::GetContentRegionAvail().x - label_w - total_w);
  const float bar_h = d.stages.size() > 16 ? 10.0f : 16.0f;
  const int n = int(d.stages.size());
  // Each row is one frame high; beyond a third of the pane the rows scroll.
  const float row_h = ImGui::GetFrameHeightWithSpacing();
  const float rows_h = std::max(row_h * std::min(n, 2), std::min(float(n) * row_h + 4,
                                                                ImGui::GetContentRegionAvail().y * 0.35f));
  ImGui::BeginChild("##stages", ImVec2(0, rows_h), false);
  const float top = ImGui::GetCursorScreenPos().y;
  for (const StageBar& b : d.stages) {
    ImGui::PushID(b.stage);
    ImGui::AlignTextToFramePadding();
    ImGui::TextColored(b.heaviest ? ImVec4(1, 1, 1, 1) : kTextDim, "stage %d", b.stage);
    ImGui::SameLine(label_w);
    stacked_bar(b.segments, bar_w, bar_h, [](int k) { return category_name(Category(k)); }, category_color, "B");
    ImGui::SameLine();
    ImGui::TextColored(b.over ? kTextOom : (b.heaviest ? ImVec4(1, 1, 1, 1) : kTextDim), "%s%s",
                       bytes_text(double(b.total)).c_str(), b.heaviest ? " <" : "");
    ImGui::PopID();
  }
  // Capacity and usable lines across all bars.
  const float x0 = ImGui::GetWindowPos().x + label_w - ImGui::GetScrollX();
  const float bottom = ImGui::GetCursorScreenPos().y;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float xg = x0 + float(double(d.memory.gpu_bytes) / d.scale_bytes) * bar_w;
  const float xu = x0 + float(double(d.memory.usable_bytes) / d.scale_bytes) * bar_w;
  dl->AddLine(ImVec2(xg, top - 2), ImVec2(xg, bottom), kColCapacity, 2);
  for (float y = top - 2; y < bottom; y += 8) dl->AddLine(ImVec2(xu, y), ImVec2(xu, std::min(y + 5, bottom)), kColHeadroom, 1.5f);
  ImGui::EndChild();
  ImGui::TextColored(kTextDim, "red: GPU %s, orange: usable %s (headroom %s)", bytes_text(double(d.memory.gpu_bytes)).c_str(),
                     bytes_text(double(d.memory.usable_bytes)).c_str(), bytes_text(double(d.memory.headroom_bytes)).c_str());
}

void time_bar(const LayoutDetail& d) {
  ImGui::Spacing();
  ImGui::Text("Step time %.3f s", d.time.step_s);
  std::vector<std::pair<ImU32, std::string>> legend;
  for (int t = 0; t < kNumTimeTerms; ++t) {
    const double v = time_term_value(d.time, TimeTerm(t));
    legend.emplace_back(time_term_color(t), fmt::format("{} {:.3f} s ({:.0f}%)", time_term_name(TimeTerm(t)), v,
                                                        d.time.step_s > 0 ? 100 * v / d.time.step_s : 0.0));
  }
  legend_flow(legend);
  ImGui::PushID("time");
  stacked_bar(d.time_segments, ImGui::GetContentRegionAvail().x, 18, [](int k) { return time_term_name(TimeTerm(k)); },
              time_term_color, "s");
  ImGui::PopID();
  if (d.layout.pp > 1)
    ImGui::TextColored(kTextDim, "bubble %.1f%% of the pipeline time ((p-1)/(v*m+p-1)); exposed comm %.1f%% of the step",
                       100 * d.time.bubble_fraction, 100 * d.time.exposed_comm_fraction);
}

void formulas(Session& s, const LayoutDetail& d) {
  ImGui::Spacing();
  ImGui::TextUnformatted("explain --formulas");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(140);
  const std::string cur = d.formulas_stage < 0 ? "heaviest stage" : fmt::format("stage {}", d.formulas_stage);
  if (ImGui::BeginCombo("##fstage", cur.c_str())) {
    if (ImGui::Selectable("heaviest stage", d.formulas_stage < 0)) s.set_formulas_stage(-1);
    for (int st = 0; st < d.layout.pp; ++st)
      if (ImGui::Selectable(fmt::format("stage {}", st).c_str(), d.formulas_stage == st)) s.set_formulas_stage(st);
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  if (ImGui::SmallButton("copy")) ImGui::SetClipboardText(d.explain_text.c_str());
  ImGui::BeginChild("##explain", ImVec2(0, 0), true, ImGuiWindowFlags_HorizontalScrollbar);
  ImGui::PushFont(fonts().mono);
  ImGui::TextUnformatted(d.explain_text.c_str());
  ImGui::PopFont();
  ImGui::EndChild();
}

}  // namespace

void draw_layout(Session& s) {
  const auto& d = s.detail();
  if (!d) {
    ImGui::TextColored(kTextDim, s.planning() ? "planning..." : "select a layout in the table or the chart");
    return;
  }
  // Go to any layout by its string.
  static std::string go;
  static std::string go_error;
  ImGui::SetNextItemWidth(-70);
  const bool enter = ImGui::InputTextWithHint("##goto", "select a layout: tp=2,pp=4,zero=1,...", &go,
                                              ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if ((ImGui::Button("Select", ImVec2(-1, 0)) || enter) && !go.empty()) {
    if (s.select_text(go, &go_error)) go_error.clear(), s.ui.scroll_to_selection = true;
  }
  if (!go_error.empty()) ImGui::TextColored(kTextOom, "%s", go_error.c_str());
  const PlanSnapshot* snap = s.plan();
  const int sel = s.selected();
  header(*d, sel >= 0 && snap ? &snap->plan.candidates[sel] : nullptr, sel + 1);
  ImGui::Separator();
  memory_bars(*d);
  time_bar(*d);
  formulas(s, *d);
}

}  // namespace paraplan::gui
