#include "gui/views/style.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "costmodel/memory.hpp"

namespace paraplan::gui {

Fonts& fonts() {
  static Fonts f;
  return f;
}

namespace {

ImFont* load_first(const char* const* paths, float px) {
  ImGuiIO& io = ImGui::GetIO();
  for (const char* const* p = paths; *p; ++p) {
    std::error_code ec;
    if (std::filesystem::exists(*p, ec)) return io.Fonts->AddFontFromFileTTF(*p, px);
  }
  return nullptr;
}

}  // namespace

void setup_style(float px) {
  static const char* const sans[] = {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                                     "/usr/share/fonts/TTF/DejaVuSans.ttf",
                                     "/usr/share/fonts/dejavu/DejaVuSans.ttf", nullptr};
  static const char* const mono[] = {"/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
                                     "/usr/share/fonts/TTF/DejaVuSansMono.ttf",
                                     "/usr/share/fonts/dejavu/DejaVuSansMono.ttf", nullptr};
  Fonts& f = fonts();
  f.ui = load_first(sans, px);
  if (!f.ui) f.ui = ImGui::GetIO().Fonts->AddFontDefault();
  f.mono = load_first(mono, px - 1);
  if (!f.mono) f.mono = f.ui;

  ImGui::StyleColorsDark();
  ImGuiStyle& s = ImGui::GetStyle();
  s.WindowRounding = 0;
  s.FrameRounding = 3;
  s.GrabRounding = 3;
  s.WindowBorderSize = 1;
  s.FramePadding = ImVec2(6, 3);
  s.ItemSpacing = ImVec2(8, 5);
  s.CellPadding = ImVec2(6, 2);
  s.Colors[ImGuiCol_WindowBg] = ImVec4(0.10f, 0.105f, 0.12f, 1.0f);
  s.Colors[ImGuiCol_ChildBg] = ImVec4(0.08f, 0.085f, 0.10f, 1.0f);
  s.Colors[ImGuiCol_TitleBg] = ImVec4(0.16f, 0.18f, 0.24f, 1.0f);
  s.Colors[ImGuiCol_TitleBgActive] = ImVec4(0.20f, 0.25f, 0.36f, 1.0f);
}

ImU32 category_color(int c) {
  static const ImU32 k[] = {
      IM_COL32(86, 140, 230, 255),   // weights
      IM_COL32(120, 190, 240, 255),  // gradients
      IM_COL32(160, 110, 230, 255),  // optimizer
      IM_COL32(240, 150, 60, 255),   // activations
      IM_COL32(240, 210, 90, 255),   // transient
      IM_COL32(90, 200, 160, 255),   // comm
      IM_COL32(150, 150, 160, 255),  // runtime
      IM_COL32(200, 100, 130, 255),  // fragmentation
  };
  return c >= 0 && c < 8 ? k[c] : IM_COL32(200, 200, 200, 255);
}

ImU32 time_term_color(int t) {
  static const ImU32 k[] = {
      IM_COL32(86, 140, 230, 255),   // compute
      IM_COL32(240, 150, 60, 255),   // TP comm
      IM_COL32(90, 200, 160, 255),   // PP comm
      IM_COL32(160, 110, 230, 255),  // DP comm
      IM_COL32(200, 100, 130, 255),  // bubble
      IM_COL32(240, 210, 90, 255),   // optimizer
      IM_COL32(120, 200, 230, 255),  // CP ring
      IM_COL32(230, 120, 80, 255),   // EP all-to-all
      IM_COL32(150, 150, 150, 255),  // host dispatch wait
  };
  return t >= 0 && t < int(sizeof k / sizeof k[0]) ? k[t] : IM_COL32(200, 200, 200, 255);
}

ImU32 group_color(ColorBy by, int g) {
  static const ImU32 zero[] = {IM_COL32(90, 160, 250, 255), IM_COL32(90, 215, 140, 255),
                               IM_COL32(250, 190, 70, 255), IM_COL32(235, 100, 200, 255)};
  static const ImU32 rc[] = {IM_COL32(90, 160, 250, 255), IM_COL32(250, 190, 70, 255),
                             IM_COL32(235, 100, 200, 255)};
  static const ImU32 fits[] = {IM_COL32(90, 215, 140, 255), IM_COL32(235, 90, 90, 255)};
  if (g < 0 || g >= color_group_count(by)) return IM_COL32(200, 200, 200, 255);
  return by == ColorBy::kZero ? zero[g] : by == ColorBy::kRecompute ? rc[g] : fits[g];
}

std::string bytes_text(double b) {
  const double a = std::fabs(b);
  if (a >= kGiB) return fmt::format("{:.2f} GiB", b / kGiB);
  if (a >= 1024.0 * 1024.0) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024.0));
  if (a > 0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return "0";
}

void legend_item(ImU32 color, const char* label) {
  const float h = ImGui::GetTextLineHeight();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + h * 0.15f), ImVec2(p.x + h * 0.7f, p.y + h * 0.85f),
                                            color, 2);
  ImGui::Dummy(ImVec2(h * 0.7f, h));
  ImGui::SameLine(0, 4);
  ImGui::TextUnformatted(label);
}

void legend_flow(const std::vector<std::pair<ImU32, std::string>>& items) {
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  const float h = ImGui::GetTextLineHeight(), gap = ImGui::GetStyle().ItemSpacing.x;
  for (size_t i = 0; i < items.size(); ++i) {
    const float w = h * 0.7f + 4 + ImGui::CalcTextSize(items[i].second.c_str()).x;
    if (i > 0 && ImGui::GetItemRectMax().x + gap + w <= right) ImGui::SameLine(0, gap);
    ImGui::BeginGroup();
    legend_item(items[i].first, items[i].second.c_str());
    ImGui::EndGroup();
  }
}

void help_marker(const char* text) {
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

}  // namespace paraplan::gui
