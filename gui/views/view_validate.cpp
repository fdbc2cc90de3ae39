// Validate: runs `paraplan validate` (one emulated rank for layouts larger
// than 8 ranks) on the selected layout in the background, with a progress
// indicator and Cancel, then shows measured next to predicted per category,
// per rank, with the error.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <fmt/format.h>

#include <cmath>

#include "gui/views/style.hpp"
#include "gui/views/views.hpp"

namespace paraplan::gui {

namespace {

// An indeterminate progress bar: a block sliding back and forth.
void busy_bar(double t, const std::string& overlay) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float w = ImGui::GetContentRegionAvail().x, h = ImGui::GetFrameHeight();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p, ImVec2(p.x + w, p.y + h), ImGui::GetColorU32(ImGuiCol_FrameBg), 3);
  const float phase = float(0.5 - 0.5 * std::cos(t * 2.5));
  const float bw = w * 0.25f, x = p.x + phase * (w - bw);
  dl->AddRectFilled(ImVec2(x, p.y), ImVec2(x + bw, p.y + h), ImGui::GetColorU32(ImGuiCol_PlotHistogram), 3);
  dl->AddText(ImVec2(p.x + 8, p.y + (h - ImGui::GetTextLineHeight()) / 2), IM_COL32(255, 255, 255, 255), overlay.c_str());
  ImGui::Dummy(ImVec2(w, h));
}

ImVec4 error_color(const std::optional<double>& e) {
  if (!e) return kTextDim;
  const double a = std::fabs(*e);
  return a <= 0.05 ? kTextGood : a <= 0.15 ? kTextWarn : kTextOom;
}

std::string error_text(const std::optional<double>& e) {
  return e ? fmt::format("{:+.1f}%", 100 * *e) : std::string("n/a");
}

float table_width() { return std::min(ImGui::GetContentRegionAvail().x, 640.0f); }

// One row per rank (clicking one lists its categories below).
void rank_table(const ValidateResult& r, int* chosen) {
  const ImGuiTableFlags f = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchSame |
                            ImGuiTableFlags_ScrollY;
  const float h = std::min(float(r.ranks.size() + 1), 9.0f) * (ImGui::GetTextLineHeight() + 4) + 6;
  if (!ImGui::BeginTable("##ranks", 5, f, ImVec2(table_width(), h))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (const char* c : {"rank", "stage", "predicted", "measured", "error"}) ImGui::TableSetupColumn(c);
  ImGui::TableHeadersRow();
  for (int i = 0; i < int(r.ranks.size()); ++i) {
    const RankResult& k = r.ranks[i];
    const CategoryRow& total = k.rows.back();
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    if (ImGui::Selectable(std::to_string(k.rank).c_str(), i == *chosen, ImGuiSelectableFlags_SpanAllColumns)) *chosen = i;
    ImGui::TableNextColumn();
    ImGui::Text("%d", k.stage);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_text(double(total.predicted)).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_text(double(total.measured)).c_str());
    ImGui::TableNextColumn();
    ImGui::TextColored(!r.tolerance ? error_color(k.error) : std::fabs(k.error) <= *r.tolerance ? kTextGood : kTextOom,
                       "%+.2f%%", 100 * k.error);
  }
  ImGui::EndTable();
}

void comparison_table(const RankResult& r, const std::optional<double>& tolerance) {
  ImGui::Text("rank %d (stage %d) by category: total error %+.2f%%", r.rank, r.stage, 100 * r.error);
  const ImGuiTableFlags f = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchSame;
  if (!ImGui::BeginTable(fmt::format("##rank{}", r.rank).c_str(), 4, f, ImVec2(table_width(), 0))) return;
  ImGui::TableSetupColumn("category");
  ImGui::TableSetupColumn("predicted");
  ImGui::TableSetupColumn("measured");
  ImGui::TableSetupColumn("error");
  ImGui::TableHeadersRow();
  for (const CategoryRow& row : r.rows) {
    ImGui::TableNextRow();
    const bool total = row.name == "total";
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(row.name.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_text(double(row.predicted)).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_text(double(row.measured)).c_str());
    ImGui::TableNextColumn();
    ImVec4 col = error_color(row.error);
    if (total && tolerance && row.error) col = std::fabs(*row.error) <= *tolerance ? kTextGood : kTextOom;
    ImGui::TextColored(col, "%s", error_text(row.error).c_str());
  }
  ImGui::EndTable();
}

// Before a run: what will be measured, and the prediction it is held against.
void predicted_only(const LayoutDetail& d) {
  const MemoryBreakdown& m = d.memory.heaviest();
  ImGui::TextColored(kTextDim, "Predicted for rank %d (stage %d), the heaviest; measured appears here after a run.",
                     d.memory.heaviest_rank, d.memory.heaviest_stage);
  if (!ImGui::BeginTable("##pred", 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchSame,
                         ImVec2(table_width(), 0)))
    return;
  ImGui::TableSetupColumn("category");
  ImGui::TableSetupColumn("predicted");
  ImGui::TableSetupColumn("measured");
  ImGui::TableHeadersRow();
  for (int c = 0; c <= kNumCategories; ++c) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(c < kNumCategories ? category_name(Category(c)) : "total");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_text(double(c < kNumCategories ? m.bytes[c] : m.total())).c_str());
    ImGui::TableNextColumn();
    ImGui::TextColored(kTextDim, "-");
  }
  ImGui::EndTable();
}

void result_view(const ValidateJob& job, const LayoutDetail& d, int* chosen) {
  const ValidateResult& r = *job.result();
  if (r.layout != d.layout_text)
    ImGui::TextColored(kTextWarn, "Result for %s (not the selected layout)", r.layout.c_str());
  std::string line = fmt::format("backend {}, max error {:.2f}%", r.backend, 100 * r.max_error);
  if (r.tolerance) line += fmt::format(" (tolerance {:.1f}%)", 100 * *r.tolerance);
  if (r.steps > 0) line += fmt::format(", {} steps", r.steps);
  ImGui::TextUnformatted(line.c_str());
  if (r.step_measured_s > 0)
    ImGui::Text("step time: predicted %.3f s, measured %.3f s (%+.1f%%)", r.step_predicted_s, r.step_measured_s,
                r.step_predicted_s > 0 ? 100 * (r.step_measured_s - r.step_predicted_s) / r.step_predicted_s : 0.0);
  if (!r.loss.empty()) {
    std::vector<float> loss(r.loss.begin(), r.loss.end());
    ImGui::PlotLines("##loss", loss.data(), int(loss.size()), 0,
                     fmt::format("loss {:.4f} -> {:.4f}", r.loss.front(), r.loss.back()).c_str(), FLT_MAX, FLT_MAX,
                     ImVec2(table_width(), 40));
  }
  ImGui::TextColored(kTextDim, "error = (measured - predicted) / predicted; green within 5%%, yellow within 15%%");
  if (r.ranks.empty()) return;
  if (*chosen < 0 || *chosen >= int(r.ranks.size())) {  // default: the worst rank
    *chosen = 0;
    for (int i = 1; i < int(r.ranks.size()); ++i)
      if (std::fabs(r.ranks[i].error) > std::fabs(r.ranks[*chosen].error)) *chosen = i;
  }
  if (r.ranks.size() > 1) rank_table(r, chosen);
  comparison_table(r.ranks[*chosen], r.tolerance);
}

}  // namespace

void draw_validate(Session& s) {
  const auto& d = s.detail();
  if (!d) {
    ImGui::TextColored(kTextDim, "select a layout first");
    return;
  }
  ValidateJob& job = s.validate();
  ValidateOptions& o = s.ui.validate;
  const bool emulate = d->layout.gpus() > o.max_full_ranks;
  ImGui::PushTextWrapPos(0);
  ImGui::TextUnformatted(d->layout_text.c_str());
  if (emulate)
    ImGui::Text("%d ranks: too many to run here; validate emulates rank %d (the heaviest, stage %d) at its real size "
                "(%s predicted).",
                d->layout.gpus(), d->memory.heaviest_rank, d->memory.heaviest_stage,
                bytes_text(double(d->memory.peak_bytes)).c_str());
  else
    ImGui::Text("Runs all %d ranks of the selected layout for real (CPU backend).", d->layout.gpus());
  ImGui::PopTextWrapPos();
  ImGui::SetNextItemWidth(90);
  ImGui::InputInt("steps", &o.steps);
  o.steps = std::clamp(o.steps, 0, 1000);
  ImGui::SameLine();
  ImGui::Checkbox("--backend cpu", &o.backend_cpu);
  ImGui::SameLine();
  ImGui::BeginDisabled(job.running());
  if (ImGui::Button("Run validate")) {
    s.start_validate();
    s.ui.validate_rank = -1;
  }
  ImGui::EndDisabled();
  if (job.running()) {
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) job.cancel();
    const std::string line = job.last_stderr_line();
    busy_bar(job.elapsed_s(), fmt::format("{} {:.1f} s{}{}", job.message(), job.elapsed_s(), line.empty() ? "" : ": ", line));
  }
  if (!job.command().empty()) {
    std::string cmd = job.command();
    ImGui::SetNextItemWidth(-1);
    ImGui::InputText("##cmd", &cmd, ImGuiInputTextFlags_ReadOnly);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("The command that was run (select and copy it to run it by hand)");
  }
  using St = ValidateJob::Status;
  if (job.status() != St::kIdle && job.status() != St::kRunning) {
    const ImVec4 col = job.status() == St::kPassed ? kTextGood
                       : job.status() == St::kCancelled ? kTextDim
                                                        : kTextOom;
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(col, "%s", job.message().c_str());
    ImGui::PopTextWrapPos();
  }
  ImGui::Separator();
  if (job.result()) result_view(job, *d, &s.ui.validate_rank);
  else predicted_only(*d);
}

}  // namespace paraplan::gui
