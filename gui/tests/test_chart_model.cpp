// Chart geometry: axis mapping, default view, zoom and pan, hit-testing and
// the Pareto polyline, with pixel positions worked out by hand.
#include <catch2/catch.hpp>

#include <cmath>

#include "fixtures.hpp"
#include "gui/model/chart_model.hpp"

using namespace paraplan;
using namespace paraplan::gui;
using paraplan::gui::test::six_plan;

namespace {

// x: 0-100 GiB on pixels 0-1000 (10 px per GiB); y: 0-20 s on pixels 500-0
// (25 px per second, upwards). Fixture points land at:
//   0 (40, 10) -> (400, 250)   1 (30, 12) -> (300, 200)   2 (20, 15) -> (200, 125)
//   3 (35, 16) -> (350, 100)   4 (90, 8)  -> (900, 300)   5 (85, 20) -> (850, 0)
ChartLayout simple_layout() {
  ChartLayout l;
  l.plot = {0, 0, 1000, 500};
  l.x = {0, 100, 0, 1000, false};
  l.y = {0, 20, 500, 0, false};
  return l;
}

}  // namespace

TEST_CASE("axis mapping, linear and log", "[chart]") {
  const Axis x{0, 100, 50, 450, false};  // 4 px per unit from pixel 50
  CHECK(x.to_px(25) == Approx(150));
  CHECK(x.from_px(150) == Approx(25));
  const Axis y{10, 20, 300, 100, false};  // upwards: 15 is half way
  CHECK(y.to_px(15) == Approx(200));
  CHECK(y.from_px(300) == Approx(10));
  const Axis lg{1, 1000, 0, 300, true};  // 100 px per decade
  CHECK(lg.to_px(10) == Approx(100));
  CHECK(lg.to_px(100) == Approx(200));
  CHECK(lg.from_px(150) == Approx(std::pow(10.0, 1.5)));
}

TEST_CASE("chart data and default view", "[chart]") {
  const Plan p = six_plan();
  const ChartData d = chart_data(p, std::int64_t(80 * kGiB), std::int64_t(76 * kGiB));
  CHECK(d.gpu_gib == Approx(80));
  CHECK(d.usable_gib == Approx(76));
  CHECK(d.x_max == Approx(90));
  CHECK(d.y_min == Approx(8));
  CHECK(d.y_max == Approx(20));
  CHECK(d.x_gib[3] == Approx(35));
  // x: 0 to min(max(90, 80), 3 x 80) x 1.05 = 94.5; y: all six are inside,
  // 8-20 s padded by 5% of 12 s = 0.6.
  const ChartView v = default_view(d, false);
  CHECK(v.x_lo == 0);
  CHECK(v.x_hi == Approx(94.5));
  CHECK(v.y_lo == Approx(7.4));
  CHECK(v.y_hi == Approx(20.6));
  // Log y: 8 / 1.1 to 20 x 1.1.
  const ChartView lv = default_view(d, true);
  CHECK(lv.log_y);
  CHECK(lv.y_lo == Approx(8 / 1.1));
  CHECK(lv.y_hi == Approx(22));
}

TEST_CASE("a far-off OOM layout does not squash the default view", "[chart]") {
  Plan p = six_plan();
  p.candidates.push_back(test::cand("dp=8", false, 1000, 50, 1, 0, 0, 0));
  const ChartData d = chart_data(p, std::int64_t(80 * kGiB), std::int64_t(76 * kGiB));
  const ChartView v = default_view(d, false);
  // x stops at 3 x 80 GiB x 1.05 = 252; the 1000 GiB point (and its 50 s) is
  // outside, so y still spans 8-20 s.
  CHECK(v.x_hi == Approx(252));
  CHECK(v.y_hi == Approx(20.6));
}

TEST_CASE("a plan whose step times span a decade starts on a log axis", "[chart]") {
  // The six fixture points run from 8 s to 20 s: 2.5x, linear.
  const ChartData d = chart_data(six_plan(), std::int64_t(80 * kGiB), std::int64_t(76 * kGiB));
  CHECK(!wide_step_range(d));
  // An MoE-scale spread: a 0.7 s layout beside the 20 s one is 28.6x, a decade and more: log.
  Plan p = six_plan();
  p.candidates.push_back(test::cand("dp=8", true, 30, 0.7, 1, 0, 0, 0));
  CHECK(wide_step_range(chart_data(p, std::int64_t(80 * kGiB), std::int64_t(76 * kGiB))));
  // Only the points in the default memory window count: a 1000 GiB layout at 300 s is outside it.
  Plan q = six_plan();
  q.candidates.push_back(test::cand("dp=8", false, 1000, 300, 1, 0, 0, 0));
  CHECK(!wide_step_range(chart_data(q, std::int64_t(80 * kGiB), std::int64_t(76 * kGiB))));
}

TEST_CASE("zoom and pan", "[chart]") {
  ChartView v;
  v.x_lo = 0, v.x_hi = 100, v.y_lo = 0, v.y_hi = 20;
  zoom_view(&v, 0.5, 40, 10, true, true);  // halve both spans about (40, 10)
  CHECK(v.x_lo == Approx(20));
  CHECK(v.x_hi == Approx(70));
  CHECK(v.y_lo == Approx(5));
  CHECK(v.y_hi == Approx(15));
  zoom_view(&v, 2, 40, 10, true, false);  // x only, back out
  CHECK(v.x_lo == Approx(0));
  CHECK(v.x_hi == Approx(100));
  CHECK(v.y_lo == Approx(5));
  pan_view(&v, 10, -5);
  CHECK(v.x_lo == Approx(10));
  CHECK(v.y_hi == Approx(10));

  ChartView lg;
  lg.log_y = true, lg.y_lo = 1, lg.y_hi = 100;
  // In log10 units: [0, 2] halved about 1 (= log10 10) is [0.5, 1.5].
  zoom_view(&lg, 0.5, 0, 10, false, true);
  CHECK(lg.y_lo == Approx(std::pow(10.0, 0.5)));
  CHECK(lg.y_hi == Approx(std::pow(10.0, 1.5)));
  pan_view(&lg, 0, 1);  // one decade up
  CHECK(lg.y_lo == Approx(std::pow(10.0, 1.5)));
}

TEST_CASE("chart layout: plot inside the margins, ticks for its size", "[chart]") {
  ChartView v;
  v.x_lo = 0, v.x_hi = 94.5, v.y_lo = 7.4, v.y_hi = 20.6;
  const ChartLayout l = layout_chart(v, Rect{0, 0, 864, 556});
  // Margins 64 left, 16 right, 12 top, 44 bottom: plot 64..848 x 12..512.
  CHECK(l.plot.x0 == 64);
  CHECK(l.plot.x1 == 848);
  CHECK(l.plot.y0 == 12);
  CHECK(l.plot.y1 == 512);
  CHECK(l.x.to_px(0) == Approx(64));
  CHECK(l.x.to_px(94.5) == Approx(848));
  CHECK(l.y.to_px(7.4) == Approx(512));  // the bottom of the plot
  // x: 784 px / 90 = 8 ticks at most; 0-94.5 with step 10 gives 0..9 = 10, with 20 gives 0..4 = 5.
  CHECK(l.x_ticks.step == Approx(20));
  CHECK(l.x_ticks.values.size() == 5);
  // y: 500 px / 44 = 11 ticks; 7.4-20.6 with step 1 gives 8..20 = 13, with 2 gives 4..10 = 7.
  CHECK(l.y_ticks.step == Approx(2));
  CHECK(l.y_ticks.values.front() == Approx(8));
  CHECK(l.y_ticks.values.back() == Approx(20));
}

TEST_CASE("hit-testing picks the nearest visible point within the radius", "[chart]") {
  const Plan p = six_plan();
  const ChartData d = chart_data(p, std::int64_t(80 * kGiB), std::int64_t(76 * kGiB));
  const ChartLayout l = simple_layout();
  // (303, 204) is sqrt(3^2 + 4^2) = 5 px from candidate 1 at (300, 200).
  CHECK(hit_test(d, l, {}, 303, 204, 6) == 1);
  CHECK(hit_test(d, l, {}, 303, 204, 4) == -1);  // 5 px > 4 px
  CHECK(hit_test(d, l, {}, 900, 300, 6) == 4);   // OOM points can be picked too
  // Filtered out of the table: not pickable.
  CHECK(hit_test(d, l, {1, 0, 1, 1, 1, 1}, 303, 204, 6) == -1);
  // Between 1 (300, 200) and 3 (350, 100): (320, 170) is sqrt(400 + 900) = 36 px
  // from 1 and sqrt(900 + 4900) = 76 px from 3.
  CHECK(hit_test(d, l, {}, 320, 170, 40) == 1);

  // Two points on the same pixel: the better-ranked (earlier) one wins.
  Plan q;
  q.candidates = {test::cand("dp=8", true, 40, 10, 1, 0, 0, 0), test::cand("dp=8,zero=1", true, 40, 10, 1, 0, 0, 0)};
  const ChartData dq = chart_data(q, std::int64_t(80 * kGiB), std::int64_t(76 * kGiB));
  CHECK(hit_test(dq, l, {}, 400, 250, 6) == 0);
}

TEST_CASE("the Pareto polyline joins the front by increasing memory", "[chart]") {
  const Plan p = six_plan();
  const ChartData d = chart_data(p, std::int64_t(80 * kGiB), std::int64_t(76 * kGiB));
  const std::vector<Point> pts = pareto_polyline(p, d, simple_layout());
  // Front 2, 1, 0 (fixtures.hpp) at (200, 125), (300, 200), (400, 250).
  REQUIRE(pts.size() == 3);
  CHECK(pts[0].x == Approx(200));
  CHECK(pts[0].y == Approx(125));
  CHECK(pts[1].x == Approx(300));
  CHECK(pts[1].y == Approx(200));
  CHECK(pts[2].x == Approx(400));
  CHECK(pts[2].y == Approx(250));
}

TEST_CASE("colour groups", "[chart]") {
  const Plan p = six_plan();
  CHECK(color_group(p.candidates[3], ColorBy::kZero) == 3);
  CHECK(color_group(p.candidates[2], ColorBy::kRecompute) == 2);  // full
  CHECK(color_group(p.candidates[1], ColorBy::kRecompute) == 1);  // selective
  CHECK(color_group(p.candidates[4], ColorBy::kFits) == 1);       // OOM
  CHECK(color_group_count(ColorBy::kZero) == 4);
  CHECK(std::string(color_group_name(ColorBy::kRecompute, 2)) == "recompute full");
}
