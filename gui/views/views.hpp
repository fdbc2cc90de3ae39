// The views: one file each, drawing what the Session (view-model) holds with
// Dear ImGui. Each draws into the window it is given (position and size in
// pixels); the menu decides the arrangement (overview or one view filling it).
#pragma once

#include <imgui.h>

#include <string>

#include "gui/model/session.hpp"

namespace paraplan::gui {

// Requests the views make of the main loop (they cannot reach GLFW or GL).
struct AppRequests {
  std::string save_png;  // write a PNG of the next frame here
  bool quit = false;
};

void draw_menu_bar(Session& s, AppRequests& req);
void draw_status_bar(Session& s, ImVec2 pos, ImVec2 size);
// Lays the views out in the work area (below the menu, above the status bar).
void draw_views(Session& s, ImVec2 pos, ImVec2 size);

void draw_inputs(Session& s);
void draw_table(Session& s);
void draw_chart(Session& s);
void draw_layout(Session& s);
void draw_validate(Session& s);

// Modal dialogs opened from the menu and the Inputs panel.
enum class FileTarget { kSpec, kModel, kCluster };
void open_file_dialog(FileTarget target, const std::string& start_dir);
void open_export_dialog(int kind);  // 0 JSON, 1 Markdown, 2 PNG
void draw_dialogs(Session& s, AppRequests& req);

}  // namespace paraplan::gui
