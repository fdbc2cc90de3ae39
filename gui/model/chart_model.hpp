// Geometry of the trade-off chart (peak memory per GPU on x, step time on y):
// the visible data range, data <-> pixel mapping, ticks, the Pareto polyline
// and hit-testing. No ImGui: the chart view draws what this computes, and
// gui/tests/test_chart_model.cpp checks it without a window.
#pragma once

#include <cstdint>
#include <vector>

#include "gui/model/ticks.hpp"
#include "planner/search.hpp"

namespace paraplan::gui {

struct Rect {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // screen pixels, y grows downwards
  float width() const { return x1 - x0; }
  float height() const { return y1 - y0; }
  bool contains(float x, float y) const { return x >= x0 && x <= x1 && y >= y0 && y <= y1; }
};

// One axis: data [lo, hi] onto pixels [p0, p1] (p1 < p0 for the y axis),
// linear or log10.
struct Axis {
  double lo = 0, hi = 1;
  float p0 = 0, p1 = 1;
  bool log = false;
  float to_px(double v) const;
  double from_px(float p) const;
};

// What points are coloured by.
enum class ColorBy { kZero, kRecompute, kFits };
// The colour group of a candidate: the ZeRO stage (0-3), the recompute mode
// (0 none, 1 selective, 2 full), or 0 fits / 1 out of memory.
int color_group(const Candidate& c, ColorBy by);
int color_group_count(ColorBy by);
const char* color_group_name(ColorBy by, int group);

// Data ranges of a plan, in GiB and seconds.
struct ChartData {
  std::vector<float> x_gib, y_s;  // per candidate
  double gpu_gib = 0;             // GPU capacity line
  double usable_gib = 0;          // capacity less headroom line
  double x_max = 0;               // largest peak memory
  double y_min = 0, y_max = 0;    // step-time range over all candidates
};
ChartData chart_data(const Plan& plan, std::int64_t gpu_bytes, std::int64_t usable_bytes);

// The visible window onto the data; zoomed and panned by the user.
struct ChartView {
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  bool log_y = false;
};
// The default view: memory from 0 to a little past the GPU capacity or the
// largest peak, whichever is less beyond 3 × capacity (far-off OOM layouts do
// not squash the interesting part); step time over all points in it, padded 5%.
ChartView default_view(const ChartData& d, bool log_y);
// Whether the step times in the default view's memory window span a decade or more (an MoE-scale plan, or
// one with far-off pipeline layouts): then a linear axis squashes the fast layouts into its bottom pixels, and
// the chart starts on a log axis unless the user chose (issue 46).
bool wide_step_range(const ChartData& d);
// Zoom by `factor` (< 1 zooms in) about the data point (ax, ay), on x, y or both.
void zoom_view(ChartView* v, double factor, double ax, double ay, bool zoom_x, bool zoom_y);
// Move the view by a data-space offset (on the y axis, in log10 units when log).
void pan_view(ChartView* v, double dx, double dy);

// Pixel layout of the chart inside `canvas`: the plot rectangle (inside the
// margins for tick labels), both axes and their ticks.
struct ChartLayout {
  Rect plot;
  Axis x, y;
  Ticks x_ticks, y_ticks;
};
struct ChartMetrics {
  float left = 64, right = 16, top = 12, bottom = 44;  // margins for labels
  float x_spacing = 90, y_spacing = 44;               // minimum pixels between tick labels
};
ChartLayout layout_chart(const ChartView& v, Rect canvas, const ChartMetrics& m = {});

// The candidate whose point is nearest (mx, my) within `radius` pixels, among
// those with visible[i] != 0 (all when `visible` is empty); -1 when none.
int hit_test(const ChartData& d, const ChartLayout& l, const std::vector<std::uint8_t>& visible,
             float mx, float my, float radius);

// The Pareto front as pixel points, joined in order of increasing memory.
struct Point {
  float x, y;
};
std::vector<Point> pareto_polyline(const Plan& plan, const ChartData& d, const ChartLayout& l);

}  // namespace paraplan::gui
