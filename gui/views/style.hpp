// Colours and fonts shared by the views, and small drawing helpers.
#pragma once

#include <imgui.h>

#include <string>
#include <utility>
#include <vector>

#include "gui/model/chart_model.hpp"

namespace paraplan::gui {

struct Fonts {
  ImFont* ui = nullptr;    // proportional (DejaVu Sans when installed)
  ImFont* mono = nullptr;  // the explain text (DejaVu Sans Mono when installed)
};
Fonts& fonts();
// Loads the fonts (falls back to ImGui's built-in one) and sets the style.
void setup_style(float font_px);

ImU32 category_color(int category);  // memory categories, Category order
ImU32 time_term_color(int term);     // TimeTerm order
ImU32 group_color(ColorBy by, int group);

inline constexpr ImU32 kColCapacity = IM_COL32(235, 80, 80, 255);
inline constexpr ImU32 kColHeadroom = IM_COL32(240, 170, 60, 255);
inline constexpr ImU32 kColPareto = IM_COL32(250, 250, 250, 230);
inline constexpr ImU32 kColSelected = IM_COL32(255, 255, 255, 255);
inline constexpr ImU32 kColRecommended = IM_COL32(120, 230, 120, 255);
inline const ImVec4 kTextOom = ImVec4(1.0f, 0.45f, 0.45f, 1.0f);
inline const ImVec4 kTextGood = ImVec4(0.45f, 0.9f, 0.45f, 1.0f);
inline const ImVec4 kTextWarn = ImVec4(1.0f, 0.8f, 0.3f, 1.0f);
inline const ImVec4 kTextDim = ImVec4(0.6f, 0.6f, 0.65f, 1.0f);

// "12.34 GiB", "3.25 MiB", "12.0 KiB", "0".
std::string bytes_text(double bytes);
// A coloured square and a label, on the current line.
void legend_item(ImU32 color, const char* label);
// Legend items left to right, wrapping to a new line when the next one does not fit.
void legend_flow(const std::vector<std::pair<ImU32, std::string>>& items);
// Text with a hover tooltip.
void help_marker(const char* text);

}  // namespace paraplan::gui
