// Ranked table: every evaluated layout, sortable by any column (click a
// header; right-click a header to show the dp/tp/pp/... columns), filtered by
// fits / Pareto / ZeRO stage / recompute / text. OOM rows in red, the
// recommended row in green, the selected row highlighted.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <fmt/format.h>

#include <iterator>

#include "gui/views/style.hpp"
#include "gui/views/views.hpp"

namespace paraplan::gui {

namespace {

void toolbar(UiState& ui) {
  ImGui::Checkbox("fits only", &ui.filter.fits_only);
  ImGui::SameLine();
  ImGui::Checkbox("Pareto front", &ui.filter.pareto_only);
  ImGui::SameLine();
  ImGui::TextColored(kTextDim, "| ZeRO");
  unsigned zero = ui.filter.zero_mask, rc = ui.filter.recompute_mask;
  for (unsigned z = 0; z < 4; ++z) {
    ImGui::SameLine();
    ImGui::CheckboxFlags(fmt::format("{}##z", z).c_str(), &zero, 1u << z);
  }
  ImGui::SameLine();
  ImGui::TextColored(kTextDim, "| recompute");
  const char* names[] = {"none", "sel.", "full"};
  for (unsigned r = 0; r < 3; ++r) {
    ImGui::SameLine();
    ImGui::CheckboxFlags(fmt::format("{}##r", names[r]).c_str(), &rc, 1u << r);
  }
  ui.filter.zero_mask = std::uint8_t(zero);
  ui.filter.recompute_mask = std::uint8_t(rc);
  ImGui::SetNextItemWidth(-1);
  ImGui::InputTextWithHint("##filter", "filter: tp=8 zero=1 selective gpipe ...  (whole fields with '=', else substring)",
                           &ui.filter.text);
}

// Display order: rank and the numbers that rank it first (visible in a narrow
// pane), then the layout's fields, then the whole layout string (hidden).
constexpr Column kOrder[] = {Column::kRank, Column::kFits, Column::kWarn, Column::kPeak, Column::kStep, Column::kTokens,
                             Column::kMfu, Column::kHfu, Column::kDp, Column::kTp, Column::kCp, Column::kEp, Column::kPp,
                             Column::kVpp, Column::kSp, Column::kZero, Column::kRecompute, Column::kMbs,
                             Column::kSchedule, Column::kBubble, Column::kComm, Column::kLayout};
static_assert(std::size(kOrder) == size_t(kNumColumns));

ImGuiTableColumnFlags column_flags(Column c, const SortSpec& initial) {
  ImGuiTableColumnFlags f = ImGuiTableColumnFlags_None;
  if (c == Column::kRank) f |= ImGuiTableColumnFlags_NoHide;
  // The fields one per column; the whole string (long) is one right-click away.
  if (c == Column::kLayout) f |= ImGuiTableColumnFlags_DefaultHide;
  if (c == Column::kTokens || c == Column::kMfu) f |= ImGuiTableColumnFlags_PreferSortDescending;
  // The table keeps its own sort state; it starts from the session's (e.g. --sort).
  if (c == initial.column) {
    f |= ImGuiTableColumnFlags_DefaultSort;
    f &= ~ImGuiTableColumnFlags_PreferSortDescending;
    if (!initial.ascending) f |= ImGuiTableColumnFlags_PreferSortDescending;
  }
  return f;
}

}  // namespace

void draw_table(Session& s) {
  UiState& ui = s.ui;
  toolbar(ui);
  s.refresh_table();
  const PlanSnapshot* snap = s.plan();
  if (!snap) {
    ImGui::TextColored(kTextDim, s.planning() ? "planning..." : "no plan");
    return;
  }
  const Plan& plan = snap->plan;
  const std::vector<int>& rows = s.table().rows();
  ImGui::TextColored(kTextDim, "%zu of %zu layouts shown, %d of them fit; click a row to select it; right-click a header to show or hide columns",
                     rows.size(), plan.candidates.size(), s.table().fitting());

  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_Resizable | ImGuiTableFlags_Reorderable |
                                ImGuiTableFlags_Hideable | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersOuter |
                                ImGuiTableFlags_BordersV | ImGuiTableFlags_ScrollX | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("##layouts", kNumColumns, flags)) return;
  ImGui::TableSetupScrollFreeze(1, 1);
  for (Column c : kOrder) ImGui::TableSetupColumn(column_name(c), column_flags(c, ui.sort), 0.0f, ImGuiID(c));
  ImGui::TableHeadersRow();
  if (ImGuiTableSortSpecs* ss = ImGui::TableGetSortSpecs(); ss && ss->SpecsDirty) {
    if (ss->SpecsCount > 0)
      ui.sort = SortSpec{Column(ss->Specs[0].ColumnUserID),
                         ss->Specs[0].SortDirection == ImGuiSortDirection_Ascending};
    ss->SpecsDirty = false;
    s.refresh_table();
  }

  const int sel = s.selected();
  const int sel_row = s.table().row_of(sel);
  ImGuiListClipper clipper;
  clipper.Begin(int(rows.size()));
  const bool scroll = ui.scroll_to_selection && sel_row >= 0;
  if (scroll) clipper.ForceDisplayRangeByIndices(sel_row, sel_row + 1);
  int clicked = -1, hovered = -1;
  while (clipper.Step()) {
    for (int r = clipper.DisplayStart; r < clipper.DisplayEnd; ++r) {
      const int i = rows[r];
      const Candidate& c = plan.candidates[i];
      ImGui::TableNextRow();
      if (i == 0 && plan.feasible > 0)
        ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1, IM_COL32(60, 140, 60, 110));
      ImGui::PushID(i);
      for (int k = 0; k < kNumColumns; ++k) {
        if (!ImGui::TableSetColumnIndex(k)) continue;
        const Column col = kOrder[k];
        const std::string text = col == Column::kLayout ? snap->layout_text[i] : cell_text(c, i + 1, col);
        if (col == Column::kRank) {
          if (ImGui::Selectable(text.c_str(), i == sel, ImGuiSelectableFlags_SpanAllColumns)) clicked = i;
          if (ImGui::IsItemHovered()) hovered = i;
          if (scroll && r == sel_row) ImGui::SetScrollHereY(0.5f);
        } else if (col == Column::kFits) {
          ImGui::TextColored(c.fits ? kTextGood : kTextOom, "%s", text.c_str());
        } else if (!c.fits) {
          ImGui::TextColored(ImVec4(0.85f, 0.6f, 0.6f, 1.0f), "%s", text.c_str());
        } else {
          ImGui::TextUnformatted(text.c_str());
        }
      }
      ImGui::PopID();
    }
  }
  ImGui::EndTable();
  if (scroll) ui.scroll_to_selection = false;
  if (clicked >= 0) s.select(clicked);
  if (hovered >= 0) ui.hovered = hovered;
}

}  // namespace paraplan::gui
