// Modal dialogs: opening a spec, model or cluster file (a small file browser:
// ImGui has none), and saving the plan (JSON, Markdown) or a PNG of the window.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <fmt/format.h>

#include <filesystem>

#include "gui/views/style.hpp"
#include "gui/views/views.hpp"

namespace paraplan::gui {

namespace fs = std::filesystem;

namespace {

struct FileDialog {
  bool request = false;
  FileTarget target = FileTarget::kSpec;
  std::string dir, path, error;
  std::vector<DirEntry> entries;
  void go(const std::string& d) {
    std::error_code ec;
    const fs::path p = fs::weakly_canonical(fs::absolute(d.empty() ? "." : d, ec), ec);
    dir = p.string();
    entries = list_dir(dir);
  }
};

struct ExportDialog {
  bool request = false;
  int kind = 0;  // 0 JSON, 1 Markdown, 2 PNG
  std::string path;
  int top = 0;  // 0 = every layout
  std::string error;
};

FileDialog& file_dialog() {
  static FileDialog d;
  return d;
}
ExportDialog& export_dialog() {
  static ExportDialog d;
  return d;
}

const char* target_name(FileTarget t) {
  return t == FileTarget::kSpec ? "spec" : t == FileTarget::kModel ? "model" : "cluster";
}

bool open_path(Session& s, FileTarget t, const std::string& path) {
  switch (t) {
    case FileTarget::kSpec:  // a HuggingFace config.json is a model, whichever menu opened it
      if (fs::path(path).extension() == ".json" && s.inputs.loaded) return load_model_into(&s.inputs, path);
      return load_spec_into(&s.inputs, path);
    case FileTarget::kModel: return load_model_into(&s.inputs, path);
    case FileTarget::kCluster: return load_cluster_into(&s.inputs, path);
  }
  return false;
}

void draw_file_dialog(Session& s) {
  FileDialog& d = file_dialog();
  if (d.request) {
    ImGui::OpenPopup("Open file");
    d.request = false;
  }
  ImGui::SetNextWindowSize(ImVec2(640, 480), ImGuiCond_Appearing);
  if (!ImGui::BeginPopupModal("Open file", nullptr)) return;
  ImGui::Text("Open a %s file (.yaml, .yml%s)", target_name(d.target),
              d.target == FileTarget::kCluster ? "" : ", or a HuggingFace config.json for the model");
  ImGui::SetNextItemWidth(-1);
  std::string dir = d.dir;
  if (ImGui::InputText("##dir", &dir, ImGuiInputTextFlags_EnterReturnsTrue)) d.go(dir);
  const float list_h = ImGui::GetContentRegionAvail().y - ImGui::GetFrameHeightWithSpacing() * 3;
  bool open_now = false;
  if (ImGui::BeginChild("##entries", ImVec2(0, list_h), true)) {
    for (const DirEntry& e : d.entries) {
      const std::string label = e.is_dir ? e.name + "/" : e.name;
      const std::string full = (fs::path(d.dir) / e.name).string();
      if (ImGui::Selectable(label.c_str(), !e.is_dir && d.path == full, ImGuiSelectableFlags_AllowDoubleClick)) {
        if (e.is_dir) {
          d.go(full);
          break;
        }
        d.path = full;
        if (ImGui::IsMouseDoubleClicked(0)) open_now = true;
      }
    }
  }
  ImGui::EndChild();
  ImGui::SetNextItemWidth(-1);
  if (ImGui::InputTextWithHint("##path", "path to open", &d.path, ImGuiInputTextFlags_EnterReturnsTrue))
    open_now = true;
  if (!d.error.empty()) ImGui::TextColored(kTextOom, "%s", d.error.c_str());
  if (ImGui::Button("Open", ImVec2(100, 0))) open_now = true;
  ImGui::SameLine();
  if (ImGui::Button("Cancel", ImVec2(100, 0))) ImGui::CloseCurrentPopup();
  if (open_now && !d.path.empty()) {
    if (open_path(s, d.target, d.path)) {
      d.error.clear();
      ImGui::CloseCurrentPopup();
    } else {
      d.error = s.inputs.error;
    }
  }
  ImGui::EndPopup();
}

void draw_export_dialog(Session& s, AppRequests& req) {
  ExportDialog& d = export_dialog();
  const char* titles[] = {"Export plan as JSON", "Export plan as Markdown", "Save PNG of the window"};
  if (d.request) {
    ImGui::OpenPopup(titles[d.kind]);
    d.request = false;
  }
  for (int k = 0; k < 3; ++k) {
    if (!ImGui::BeginPopupModal(titles[k], nullptr, ImGuiWindowFlags_AlwaysAutoResize)) continue;
    ImGui::SetNextItemWidth(460);
    ImGui::InputText("file", &d.path);
    if (k < 2) {
      ImGui::SetNextItemWidth(120);
      ImGui::InputInt("ranked layouts (0 = all)", &d.top);
      d.top = std::max(0, d.top);
      ImGui::TextColored(kTextDim, "The same document as `paraplan plan --format %s --top N`.",
                         k == 0 ? "json" : "markdown");
    } else {
      ImGui::TextColored(kTextDim, "The whole window, as drawn on the next frame (without this dialog).");
    }
    if (!d.error.empty()) ImGui::TextColored(kTextOom, "%s", d.error.c_str());
    if (ImGui::Button("Save", ImVec2(100, 0)) && !d.path.empty()) {
      if (k == 2) {
        req.save_png = d.path;
        ImGui::CloseCurrentPopup();
      } else if (const PlanSnapshot* p = s.plan()) {
        const int top = d.top > 0 ? d.top : int(p->plan.candidates.size());
        d.error = write_file_atomic(
            d.path, export_plan(k == 0 ? ExportFormat::kJson : ExportFormat::kMarkdown, p->spec, p->plan, top));
        if (d.error.empty()) {
          s.ui.status = fmt::format("saved {} ({} layouts)", d.path, std::min<size_t>(top, p->plan.candidates.size()));
          ImGui::CloseCurrentPopup();
        }
      }
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel", ImVec2(100, 0))) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
}

}  // namespace

void open_file_dialog(FileTarget target, const std::string& start_dir) {
  FileDialog& d = file_dialog();
  d.request = true;
  d.target = target;
  d.error.clear();
  d.path.clear();
  d.go(start_dir);
}

void open_export_dialog(int kind) {
  ExportDialog& d = export_dialog();
  d.request = true;
  d.kind = std::clamp(kind, 0, 2);
  d.error.clear();
  static const char* names[] = {"paraplan-plan.json", "paraplan-plan.md", "paraplan-gui.png"};
  d.path = (fs::current_path() / names[d.kind]).string();
}

void draw_dialogs(Session& s, AppRequests& req) {
  draw_file_dialog(s);
  draw_export_dialog(s, req);
}

}  // namespace paraplan::gui
