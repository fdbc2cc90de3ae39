// The menu bar, the status bar, and the arrangement of the views: all tiled
// (overview) or one filling the window.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "gui/views/style.hpp"
#include "gui/views/views.hpp"

namespace paraplan::gui {

namespace {

const char* const kTitles[] = {"Overview", "Inputs", "Ranked layouts", "Trade-off: memory vs step time",
                               "Selected layout", "Validate"};

constexpr ImGuiWindowFlags kPane = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize |
                                   ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings |
                                   ImGuiWindowFlags_NoBringToFrontOnFocus;

void pane(Session& s, ViewId v, ImVec2 pos, ImVec2 size) {
  ImGui::SetNextWindowPos(pos);
  ImGui::SetNextWindowSize(size);
  ImGuiWindowFlags flags = kPane;
  if (v == ViewId::kChart) flags |= ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse;
  if (ImGui::Begin(kTitles[int(v)], nullptr, flags)) {
    switch (v) {
      case ViewId::kInputs: draw_inputs(s); break;
      case ViewId::kTable: draw_table(s); break;
      case ViewId::kChart: draw_chart(s); break;
      case ViewId::kLayout: draw_layout(s); break;
      case ViewId::kValidate: draw_validate(s); break;
      default: break;
    }
  }
  ImGui::End();
}

std::string dir_of(const std::string& path, const std::string& fallback) {
  if (path.empty()) return fallback;
  return std::filesystem::path(path).parent_path().string();
}

}  // namespace

void draw_views(Session& s, ImVec2 p, ImVec2 sz) {
  if (s.ui.focus != ViewId::kOverview) {
    pane(s, s.ui.focus, p, sz);
    return;
  }
  const float in_w = std::clamp(sz.x * 0.2f, 300.0f, 360.0f);
  const float right_w = std::clamp(sz.x * 0.33f, 460.0f, 620.0f);
  const float mid_w = std::max(200.0f, sz.x - in_w - right_w);
  const float chart_h = std::floor(sz.y * 0.56f);
  const float layout_h = std::floor(sz.y * 0.62f);
  pane(s, ViewId::kInputs, p, ImVec2(in_w, sz.y));
  pane(s, ViewId::kChart, ImVec2(p.x + in_w, p.y), ImVec2(mid_w, chart_h));
  pane(s, ViewId::kTable, ImVec2(p.x + in_w, p.y + chart_h), ImVec2(mid_w, sz.y - chart_h));
  pane(s, ViewId::kLayout, ImVec2(p.x + in_w + mid_w, p.y), ImVec2(sz.x - in_w - mid_w, layout_h));
  pane(s, ViewId::kValidate, ImVec2(p.x + in_w + mid_w, p.y + layout_h),
       ImVec2(sz.x - in_w - mid_w, sz.y - layout_h));
}

void draw_menu_bar(Session& s, AppRequests& req) {
  if (!ImGui::BeginMainMenuBar()) return;
  const std::string cfg = s.catalog.dir;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open spec...")) open_file_dialog(FileTarget::kSpec, dir_of(s.inputs.spec_path, cfg));
    if (ImGui::MenuItem("Open model (YAML or HF config.json)..."))
      open_file_dialog(FileTarget::kModel, cfg.empty() ? "." : cfg + "/models");
    if (ImGui::MenuItem("Open cluster..."))
      open_file_dialog(FileTarget::kCluster, cfg.empty() ? "." : cfg + "/clusters");
    if (ImGui::BeginMenu("Examples", !s.catalog.examples.empty())) {
      for (const std::string& e : s.catalog.examples)
        if (ImGui::MenuItem(std::filesystem::path(e).filename().string().c_str())) load_spec_into(&s.inputs, e);
      ImGui::EndMenu();
    }
    ImGui::Separator();
    const bool have = s.plan() != nullptr;
    if (ImGui::MenuItem("Export plan as JSON...", nullptr, false, have)) open_export_dialog(0);
    if (ImGui::MenuItem("Export plan as Markdown...", nullptr, false, have)) open_export_dialog(1);
    if (ImGui::MenuItem("Save PNG of the window...")) open_export_dialog(2);
    ImGui::Separator();
    if (ImGui::MenuItem("Quit")) req.quit = true;
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    for (int v = 0; v < int(ViewId::kCount); ++v)
      if (ImGui::MenuItem(kTitles[v], nullptr, s.ui.focus == ViewId(v))) s.ui.focus = ViewId(v);
    ImGui::EndMenu();
  }
  // Quick switch between the tiled overview and the view under focus.
  ImGui::Separator();
  for (int v = 0; v < int(ViewId::kCount); ++v) {
    const bool on = s.ui.focus == ViewId(v);
    if (on) ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
    if (ImGui::MenuItem(view_name(ViewId(v)))) s.ui.focus = ViewId(v);
    if (on) ImGui::PopStyleColor();
  }
  ImGui::EndMainMenuBar();
}

void draw_status_bar(Session& s, ImVec2 pos, ImVec2 size) {
  ImGui::SetNextWindowPos(pos);
  ImGui::SetNextWindowSize(size);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(8, 3));
  ImGui::Begin("##status", nullptr, kPane | ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoScrollbar);
  if (const PlanSnapshot* p = s.plan()) {
    const ReplanTiming& t = s.timing();
    ImGui::Text("%s on %d x %s (%d GPUs): %lld layouts evaluated, %lld fit", p->spec.model.name.c_str(),
                p->spec.num_nodes, p->spec.cluster.name.c_str(), p->spec.num_gpus(),
                (long long)p->plan.evaluated, (long long)p->plan.feasible);
    ImGui::SameLine();
    ImGui::TextColored(kTextDim, "| re-plan %.1f ms (search %.1f + prepare %.1f on the worker, %.1f ms on the UI thread)",
                       t.latency_ms, t.plan_ms, t.prepare_ms, t.apply_ms);
  } else if (!s.inputs.loaded) {
    ImGui::TextUnformatted("No spec loaded: File > Open spec, or pick an example.");
  }
  if (s.planning()) {
    ImGui::SameLine();
    ImGui::TextColored(kTextWarn, "| planning...");
  }
  if (!s.ui.status.empty()) {
    ImGui::SameLine();
    ImGui::TextColored(kTextDim, "| %s", s.ui.status.c_str());
  }
  ImGui::End();
  ImGui::PopStyleVar();
}

}  // namespace paraplan::gui
