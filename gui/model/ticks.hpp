// Axis ticks for the trade-off chart: "nice" values (1, 2, 5 × 10^k) on a
// linear axis, decades (or 1-2-5 within a decade) on a log axis. Pure
// arithmetic, no ImGui: unit-tested in gui/tests/test_ticks.cpp.
#pragma once

#include <string>
#include <vector>

namespace paraplan::gui {

struct Ticks {
  std::vector<double> values;  // increasing, all inside [lo, hi]
  double step = 0;             // linear axes: the distance between ticks; 0 on log axes
  int decimals = 0;            // digits after the point that label every tick exactly
  bool log = false;
};

// The smallest step in {1, 2, 5} × 10^k that puts at most `max_ticks` of its
// multiples inside [lo, hi] (bounds swapped if reversed); the ticks are those
// multiples. lo == hi gives the one tick lo; a non-finite bound gives none.
Ticks nice_ticks(double lo, double hi, int max_ticks);

// Ticks for a log axis over [lo, hi], lo > 0: the powers of ten inside (every
// k-th one when there are more than max_ticks); with fewer than two of them,
// the 1-2-5 values inside; with fewer than two of those, nice_ticks.
Ticks log_ticks(double lo, double hi, int max_ticks);

// How many ticks fit on an axis `length_px` long when labels need
// `min_spacing_px` each (at least 2).
int max_ticks_for(float length_px, float min_spacing_px);

// The label of one tick: fixed `decimals` digits on linear axes, shortest
// form (%g) on log axes. "-0" never appears.
std::string tick_label(double value, const Ticks& t);

}  // namespace paraplan::gui
