#include "gui/model/chart_model.hpp"

#include <algorithm>
#include <cmath>

#include "costmodel/memory.hpp"

namespace paraplan::gui {

namespace {

double fwd(double v, bool log) { return log ? std::log10(std::max(v, 1e-300)) : v; }
double inv(double v, bool log) { return log ? std::pow(10.0, v) : v; }

}  // namespace

float Axis::to_px(double v) const {
  const double a = fwd(lo, log), b = fwd(hi, log);
  if (b == a) return p0;
  return float(p0 + (fwd(v, log) - a) / (b - a) * double(p1 - p0));
}

double Axis::from_px(float p) const {
  if (p1 == p0) return lo;
  const double a = fwd(lo, log), b = fwd(hi, log);
  return inv(a + double(p - p0) / double(p1 - p0) * (b - a), log);
}

int color_group(const Candidate& c, ColorBy by) {
  switch (by) {
    case ColorBy::kZero: return c.layout.zero;
    case ColorBy::kRecompute: return int(c.layout.recompute);
    case ColorBy::kFits: return c.fits ? 0 : 1;
  }
  return 0;
}

int color_group_count(ColorBy by) { return by == ColorBy::kZero ? 4 : by == ColorBy::kRecompute ? 3 : 2; }

const char* color_group_name(ColorBy by, int g) {
  static const char* zero[] = {"ZeRO 0", "ZeRO 1", "ZeRO 2", "ZeRO 3"};
  static const char* rc[] = {"recompute none", "recompute selective", "recompute full"};
  static const char* fits[] = {"fits", "out of memory"};
  if (g < 0 || g >= color_group_count(by)) return "?";
  return by == ColorBy::kZero ? zero[g] : by == ColorBy::kRecompute ? rc[g] : fits[g];
}

ChartData chart_data(const Plan& plan, std::int64_t gpu_bytes, std::int64_t usable_bytes) {
  ChartData d;
  d.gpu_gib = double(gpu_bytes) / kGiB;
  d.usable_gib = double(usable_bytes) / kGiB;
  const size_t n = plan.candidates.size();
  d.x_gib.resize(n);
  d.y_s.resize(n);
  d.y_min = n ? 1e300 : 0;
  for (size_t i = 0; i < n; ++i) {
    const Candidate& c = plan.candidates[i];
    d.x_gib[i] = float(double(c.peak_bytes) / kGiB);
    d.y_s[i] = float(c.time.step_s);
    d.x_max = std::max(d.x_max, double(d.x_gib[i]));
    d.y_min = std::min(d.y_min, double(d.y_s[i]));
    d.y_max = std::max(d.y_max, double(d.y_s[i]));
  }
  return d;
}

ChartView default_view(const ChartData& d, bool log_y) {
  ChartView v;
  v.log_y = log_y;
  const double cap = std::max(d.gpu_gib, 1e-9);
  v.x_lo = 0;
  v.x_hi = std::min(std::max(d.x_max, cap), 3 * cap) * 1.05;
  double lo = 1e300, hi = -1e300;
  for (size_t i = 0; i < d.x_gib.size(); ++i)
    if (d.x_gib[i] <= v.x_hi) lo = std::min(lo, double(d.y_s[i])), hi = std::max(hi, double(d.y_s[i]));
  if (lo > hi) lo = 0, hi = 1;
  if (log_y && lo > 0) {
    v.y_lo = lo / 1.1, v.y_hi = hi * 1.1;
  } else {
    v.log_y = false;
    const double pad = hi > lo ? 0.05 * (hi - lo) : std::max(0.05 * hi, 1e-6);
    v.y_lo = std::max(0.0, lo - pad), v.y_hi = hi + pad;
  }
  return v;
}

bool wide_step_range(const ChartData& d) {
  const ChartView v = default_view(d, false);
  double lo = 1e300, hi = 0;
  for (size_t i = 0; i < d.x_gib.size(); ++i)
    if (d.x_gib[i] <= v.x_hi && d.y_s[i] > 0) lo = std::min(lo, double(d.y_s[i])), hi = std::max(hi, double(d.y_s[i]));
  return hi > 0 && hi >= 10 * lo;
}

void zoom_view(ChartView* v, double f, double ax, double ay, bool zx, bool zy) {
  if (zx) {
    v->x_lo = ax + (v->x_lo - ax) * f;
    v->x_hi = ax + (v->x_hi - ax) * f;
  }
  if (zy) {
    const double a = fwd(ay, v->log_y), lo = fwd(v->y_lo, v->log_y), hi = fwd(v->y_hi, v->log_y);
    v->y_lo = inv(a + (lo - a) * f, v->log_y);
    v->y_hi = inv(a + (hi - a) * f, v->log_y);
  }
}

void pan_view(ChartView* v, double dx, double dy) {
  v->x_lo += dx, v->x_hi += dx;
  v->y_lo = inv(fwd(v->y_lo, v->log_y) + dy, v->log_y);
  v->y_hi = inv(fwd(v->y_hi, v->log_y) + dy, v->log_y);
}

ChartLayout layout_chart(const ChartView& v, Rect c, const ChartMetrics& m) {
  ChartLayout l;
  l.plot = {c.x0 + m.left, c.y0 + m.top, std::max(c.x0 + m.left + 1, c.x1 - m.right),
            std::max(c.y0 + m.top + 1, c.y1 - m.bottom)};
  l.x = {v.x_lo, v.x_hi, l.plot.x0, l.plot.x1, false};
  l.y = {v.y_lo, v.y_hi, l.plot.y1, l.plot.y0, v.log_y};
  l.x_ticks = nice_ticks(v.x_lo, v.x_hi, max_ticks_for(l.plot.width(), m.x_spacing));
  const int ny = max_ticks_for(l.plot.height(), m.y_spacing);
  l.y_ticks = v.log_y ? log_ticks(v.y_lo, v.y_hi, ny) : nice_ticks(v.y_lo, v.y_hi, ny);
  return l;
}

int hit_test(const ChartData& d, const ChartLayout& l, const std::vector<std::uint8_t>& visible,
             float mx, float my, float radius) {
  int best = -1;
  float best_d2 = radius * radius;
  for (size_t i = 0; i < d.x_gib.size(); ++i) {
    if (!visible.empty() && !visible[i]) continue;
    const float dx = l.x.to_px(d.x_gib[i]) - mx, dy = l.y.to_px(d.y_s[i]) - my;
    const float d2 = dx * dx + dy * dy;
    // Strictly nearer only: on a tie the better-ranked (earlier) candidate wins.
    if (d2 < best_d2 || (best < 0 && d2 <= best_d2)) best_d2 = d2, best = int(i);
  }
  return best;
}

std::vector<Point> pareto_polyline(const Plan& plan, const ChartData& d, const ChartLayout& l) {
  std::vector<Point> pts;
  pts.reserve(plan.pareto.size());
  for (int i : plan.pareto) pts.push_back({l.x.to_px(d.x_gib[i]), l.y.to_px(d.y_s[i])});
  return pts;
}

}  // namespace paraplan::gui
