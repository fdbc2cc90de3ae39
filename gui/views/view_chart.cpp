// Trade-off chart: peak memory per GPU (x) against step time (y) for every
// evaluated layout, drawn with ImDrawList (ImPlot is not packaged in Debian).
// GPU capacity and usable memory (capacity less headroom) as vertical lines,
// the Pareto front joined, points coloured by ZeRO stage / recompute / fit.
// Hover: the layout; click: select it; wheel: zoom; drag: pan; double-click: reset.
#include <fmt/format.h>

#include <cmath>

#include "gui/views/style.hpp"
#include "gui/views/views.hpp"

namespace paraplan::gui {

namespace {

ImU32 with_alpha(ImU32 c, int a) { return (c & ~IM_COL32_A_MASK) | (ImU32(a) << IM_COL32_A_SHIFT); }

void controls(Session& s) {
  UiState& ui = s.ui;
  int by = int(ui.color_by);
  ImGui::SetNextItemWidth(150);
  if (ImGui::Combo("colour by", &by, "ZeRO stage\0recompute\0fits / OOM\0")) ui.color_by = ColorBy(by);
  ImGui::SameLine();
  if (ImGui::Checkbox("log step time", &ui.log_y)) {
    ui.log_y_chosen = true;
    ui.chart_view = default_view(s.chart(), ui.log_y);
    ui.chart_zoomed = false;
  }
  ImGui::SameLine();
  ImGui::Checkbox("dim filtered-out", &ui.dim_filtered);
  ImGui::SameLine();
  if (ImGui::Button("Reset view")) {
    ui.chart_view = default_view(s.chart(), ui.log_y);
    ui.chart_zoomed = false;
  }
  ImGui::SameLine();
  help_marker("Hover a point for its layout, click to select it.\nMouse wheel: zoom (shift: memory only, ctrl: time only).\n"
              "Drag: pan. Double-click: reset the view.\nLayouts the table filters out are drawn faint.");
}

void dashed_vline(ImDrawList* dl, float x, float y0, float y1, ImU32 col) {
  for (float y = y0; y < y1; y += 10) dl->AddLine(ImVec2(x, y), ImVec2(x, std::min(y + 6, y1)), col, 1.5f);
}

void draw_axes(ImDrawList* dl, const ChartLayout& L) {
  const Rect& p = L.plot;
  const ImU32 grid = IM_COL32(255, 255, 255, 22), text = IM_COL32(200, 200, 210, 255);
  const float th = ImGui::GetTextLineHeight();
  for (double v : L.x_ticks.values) {
    const float x = std::round(L.x.to_px(v));
    dl->AddLine(ImVec2(x, p.y0), ImVec2(x, p.y1), grid);
    dl->AddLine(ImVec2(x, p.y1), ImVec2(x, p.y1 + 4), text);
    const std::string s = tick_label(v, L.x_ticks);
    dl->AddText(ImVec2(x - ImGui::CalcTextSize(s.c_str()).x / 2, p.y1 + 6), text, s.c_str());
  }
  for (double v : L.y_ticks.values) {
    const float y = std::round(L.y.to_px(v));
    dl->AddLine(ImVec2(p.x0, y), ImVec2(p.x1, y), grid);
    dl->AddLine(ImVec2(p.x0 - 4, y), ImVec2(p.x0, y), text);
    const std::string s = tick_label(v, L.y_ticks);
    dl->AddText(ImVec2(p.x0 - 8 - ImGui::CalcTextSize(s.c_str()).x, y - th / 2), text, s.c_str());
  }
  dl->AddRect(ImVec2(p.x0, p.y0), ImVec2(p.x1, p.y1), IM_COL32(255, 255, 255, 70));
  const char* xt = "peak memory per GPU (GiB), heaviest pipeline stage";
  dl->AddText(ImVec2((p.x0 + p.x1 - ImGui::CalcTextSize(xt).x) / 2, p.y1 + 8 + th), text, xt);
  dl->AddText(ImVec2(p.x0 - 56, p.y0 - th - 6), text, L.y.log ? "step time (s, log)" : "step time (s)");
}

void draw_capacity(ImDrawList* dl, const ChartLayout& L, const ChartData& d, const PlanSnapshot& snap) {
  const Rect& p = L.plot;
  const float xg = L.x.to_px(d.gpu_gib), xu = L.x.to_px(d.usable_gib);
  if (xu >= p.x0 && xu <= p.x1) dashed_vline(dl, xu, p.y0, p.y1, kColHeadroom);
  if (xg >= p.x0 && xg <= p.x1) dl->AddLine(ImVec2(xg, p.y0), ImVec2(xg, p.y1), kColCapacity, 2);
  const std::string g = fmt::format("GPU {:.1f} GiB", d.gpu_gib);
  const std::string u = fmt::format("usable {:.1f} ({:.0f}% headroom)", d.usable_gib, 100 * snap.spec.memory_headroom);
  const float th = ImGui::GetTextLineHeight();
  dl->AddText(ImVec2(xg + 4, p.y0 + 4), kColCapacity, g.c_str());
  dl->AddText(ImVec2(xu - 4 - ImGui::CalcTextSize(u.c_str()).x, p.y0 + 4 + th), kColHeadroom, u.c_str());
}

void draw_points(ImDrawList* dl, const ChartLayout& L, const ChartData& d, const Plan& plan, const UiState& ui,
                 const std::vector<std::uint8_t>& visible) {
  const Rect& p = L.plot;
  const size_t n = d.x_gib.size();
  const bool circles = n <= 2500;  // beyond that, 4-vertex squares keep a frame cheap
  const float r = circles ? 3.5f : 2.2f;
  // Faint (filtered out) first, then out-of-memory, then fitting on top.
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t i = 0; i < n; ++i) {
      const Candidate& c = plan.candidates[i];
      const bool shown = visible.empty() || visible[i];
      const int want = !shown ? 0 : !c.fits ? 1 : 2;
      if (want != pass || (!shown && !ui.dim_filtered)) continue;
      const float x = L.x.to_px(d.x_gib[i]), y = L.y.to_px(d.y_s[i]);
      if (x < p.x0 - r || x > p.x1 + r || y < p.y0 - r || y > p.y1 + r) continue;
      ImU32 col = group_color(ui.color_by, color_group(c, ui.color_by));
      if (pass == 0) col = IM_COL32(150, 150, 150, 40);
      else if (pass == 1) col = with_alpha(col, 120);
      if (circles) {
        if (pass == 1) dl->AddCircle(ImVec2(x, y), r, col, 10, 1.2f);  // OOM: hollow
        else dl->AddCircleFilled(ImVec2(x, y), r, col, 10);
      } else {
        dl->AddRectFilled(ImVec2(x - r, y - r), ImVec2(x + r, y + r), col);
      }
    }
  }
}

void draw_legend(ImDrawList* dl, const ChartLayout& L, ColorBy by) {
  const float th = ImGui::GetTextLineHeight();
  const int rows = color_group_count(by) + 1;
  float w = ImGui::CalcTextSize("Pareto front (fits)").x;
  for (int g = 0; g < color_group_count(by); ++g) w = std::max(w, ImGui::CalcTextSize(color_group_name(by, g)).x);
  w += th + 20;
  const ImVec2 a(L.plot.x1 - w - 8, L.plot.y0 + 8), b(L.plot.x1 - 8, L.plot.y0 + 14 + rows * (th + 2));
  dl->AddRectFilled(a, b, IM_COL32(20, 22, 28, 220), 3);
  dl->AddRect(a, b, IM_COL32(255, 255, 255, 50), 3);
  float y = a.y + 4;
  for (int g = 0; g < color_group_count(by); ++g, y += th + 2) {
    dl->AddCircleFilled(ImVec2(a.x + 10, y + th / 2), 4, group_color(by, g), 10);
    dl->AddText(ImVec2(a.x + 20, y), IM_COL32(220, 220, 225, 255), color_group_name(by, g));
  }
  dl->AddLine(ImVec2(a.x + 4, y + th / 2), ImVec2(a.x + 16, y + th / 2), kColPareto, 2);
  dl->AddText(ImVec2(a.x + 20, y), IM_COL32(220, 220, 225, 255), "Pareto front (fits)");
}

void ring(ImDrawList* dl, const ChartLayout& L, const ChartData& d, int i, float r, ImU32 col, float thick,
          const char* label = nullptr) {
  if (i < 0 || i >= int(d.x_gib.size())) return;
  const ImVec2 c(L.x.to_px(d.x_gib[i]), L.y.to_px(d.y_s[i]));
  dl->AddCircle(c, r, col, 20, thick);
  if (label) dl->AddText(ImVec2(c.x + r + 3, c.y - ImGui::GetTextLineHeight() / 2), col, label);
}

void tooltip(const PlanSnapshot& snap, int i) {
  const Candidate& c = snap.plan.candidates[i];
  ImGui::BeginTooltip();
  ImGui::Text("#%d  %s", i + 1, snap.layout_text[i].c_str());
  ImGui::TextColored(c.fits ? kTextGood : kTextOom, "%s", c.fits ? "fits" : "out of memory");
  ImGui::Text("peak %.2f GiB (stage %d), step %.3f s, %.0f tokens/s, MFU %.1f%%", double(c.peak_bytes) / kGiB,
              c.peak_stage, c.time.step_s, c.time.tokens_per_s, 100 * c.time.mfu);
  ImGui::EndTooltip();
}

// Zoom, pan, hover and click on the plot (the invisible button just submitted).
void interact(Session& s, const ChartLayout& L) {
  UiState& ui = s.ui;
  const ImGuiIO& io = ImGui::GetIO();
  ChartView& v = ui.chart_view;
  const bool hovered = ImGui::IsItemHovered();
  if (hovered && io.MouseWheel != 0) {
    const float f = std::pow(0.85f, io.MouseWheel);
    zoom_view(&v, f, L.x.from_px(io.MousePos.x), L.y.from_px(io.MousePos.y), !io.KeyCtrl, !io.KeyShift);
    ui.chart_zoomed = true;
  }
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 3) &&
      (io.MouseDelta.x != 0 || io.MouseDelta.y != 0)) {
    const double dx = -double(io.MouseDelta.x) * (v.x_hi - v.x_lo) / L.plot.width();
    const double span = v.log_y ? std::log10(v.y_hi / v.y_lo) : v.y_hi - v.y_lo;
    pan_view(&v, dx, double(io.MouseDelta.y) * span / L.plot.height());
    ui.chart_zoomed = true;
  }
  if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
    v = default_view(s.chart(), ui.log_y);
    ui.chart_zoomed = false;
    return;
  }
  if (!hovered) return;
  const int hit = hit_test(s.chart(), L, ui.dim_filtered ? s.table().visible() : std::vector<std::uint8_t>{},
                           io.MousePos.x, io.MousePos.y, 7);
  if (hit < 0) return;
  ui.hovered = hit;
  if (!ImGui::IsMouseDragging(ImGuiMouseButton_Left, 3)) tooltip(*s.plan(), hit);
  if (ImGui::IsMouseReleased(ImGuiMouseButton_Left) && io.MouseDragMaxDistanceSqr[0] < 9) {
    s.select(hit);
    ui.scroll_to_selection = true;
  }
}

}  // namespace

void draw_chart(Session& s) {
  controls(s);
  const PlanSnapshot* snap = s.plan();
  if (!snap || snap->plan.candidates.empty()) {
    ImGui::TextColored(kTextDim, s.planning() ? "planning..." : "no layouts to show");
    return;
  }
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  if (avail.x < 100 || avail.y < 100) return;
  ImGui::InvisibleButton("##plot", avail);
  ChartMetrics m;
  const float th = ImGui::GetTextLineHeight();
  m.top = th + 12;
  m.bottom = 2 * th + 16;
  m.left = ImGui::CalcTextSize("00000.0").x + 14;
  const ChartLayout L = layout_chart(s.ui.chart_view, Rect{p0.x, p0.y, p0.x + avail.x, p0.y + avail.y}, m);
  const ChartData& d = s.chart();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(ImVec2(L.plot.x0, L.plot.y0), ImVec2(L.plot.x1, L.plot.y1), IM_COL32(14, 15, 19, 255));
  draw_axes(dl, L);
  dl->PushClipRect(ImVec2(L.plot.x0, L.plot.y0), ImVec2(L.plot.x1, L.plot.y1), true);
  draw_capacity(dl, L, d, *snap);
  draw_points(dl, L, d, snap->plan, s.ui, s.table().visible());
  const std::vector<Point> front = pareto_polyline(snap->plan, d, L);
  std::vector<ImVec2> line;
  for (const Point& q : front) line.emplace_back(q.x, q.y);
  if (line.size() >= 2) dl->AddPolyline(line.data(), int(line.size()), kColPareto, 0, 2.0f);
  for (const Point& q : front) dl->AddCircleFilled(ImVec2(q.x, q.y), 2.5f, kColPareto, 8);
  if (snap->plan.feasible > 0) ring(dl, L, d, 0, 8, kColRecommended, 2.5f, s.selected() == 0 ? nullptr : "recommended");
  interact(s, L);
  if (s.ui.pin_tooltip && s.ui.hovered < 0 && s.selected() >= 0) {
    const int i = s.selected();
    ImGui::SetNextWindowPos(ImVec2(L.x.to_px(d.x_gib[i]) + 16, L.y.to_px(d.y_s[i]) + 10));
    tooltip(*snap, i);
  }
  ring(dl, L, d, s.ui.hovered >= 0 ? s.ui.hovered : s.ui.hovered_prev, 6, IM_COL32(255, 255, 255, 160), 1.5f);
  ring(dl, L, d, s.selected(), 10, kColSelected, 2.0f, s.selected() == 0 ? "selected (recommended)" : "selected");
  // How many points lie beyond the right edge (far out of memory).
  int beyond = 0;
  for (float x : d.x_gib) beyond += x > s.ui.chart_view.x_hi;
  if (beyond) {
    const std::string t = fmt::format("{} layouts beyond {:.0f} GiB (zoom out) ->", beyond, s.ui.chart_view.x_hi);
    dl->AddText(ImVec2(L.plot.x1 - ImGui::CalcTextSize(t.c_str()).x - 6, L.plot.y1 - th - 4), IM_COL32(200, 200, 210, 200),
                t.c_str());
  }
  dl->PopClipRect();
  draw_legend(dl, L, s.ui.color_by);
}

}  // namespace paraplan::gui
