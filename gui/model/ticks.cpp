#include "gui/model/ticks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace paraplan::gui {

namespace {

// Relative slack so that a bound equal to a multiple of the step (up to
// floating-point error, e.g. 0.3 / 0.1 = 2.9999999999999996) counts as one.
constexpr double kEps = 1e-9;

long long first_multiple(double lo, double step) { return (long long)std::ceil(lo / step - kEps); }
long long last_multiple(double hi, double step) { return (long long)std::floor(hi / step + kEps); }

int decimals_for(double step) {
  return std::max(0, -(int)std::floor(std::log10(step) + kEps));
}

}  // namespace

Ticks nice_ticks(double lo, double hi, int max_ticks) {
  Ticks t;
  if (!std::isfinite(lo) || !std::isfinite(hi) || max_ticks < 1) return t;
  if (hi < lo) std::swap(lo, hi);
  const double span = hi - lo;
  const double mag = std::max(std::fabs(lo), std::fabs(hi));
  if (span <= mag * 1e-12 || span == 0) {
    t.values = {lo};
    t.decimals = mag > 0 ? std::clamp(3 - (int)std::floor(std::log10(mag)), 0, 12) : 0;
    return t;
  }
  // Start a decade below span / max_ticks (a step just under it can still fit
  // when the bounds fall between multiples) and walk up 1, 2, 5, 10, 20, ...
  double decade = std::pow(10.0, std::floor(std::log10(span / max_ticks)) - 1);
  for (int guard = 0; guard < 64; ++guard, decade *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double step = m * decade;
      const long long a = first_multiple(lo, step), b = last_multiple(hi, step);
      if (b - a + 1 > max_ticks) continue;
      t.step = step;
      t.decimals = decimals_for(step);
      for (long long k = a; k <= b; ++k) {
        const double v = double(k) * step;
        t.values.push_back(v == 0 ? 0.0 : v);  // no -0
      }
      return t;
    }
  }
  return t;
}

Ticks log_ticks(double lo, double hi, int max_ticks) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || max_ticks < 1) return {};
  if (hi < lo) std::swap(lo, hi);
  if (lo <= 0) return nice_ticks(lo, hi, max_ticks);
  Ticks t;
  t.log = true;
  const int d0 = (int)std::ceil(std::log10(lo) - kEps), d1 = (int)std::floor(std::log10(hi) + kEps);
  const int decades = d1 - d0 + 1;
  if (decades >= 2) {
    // Every stride-th power of ten, on exponents that are multiples of the stride.
    const int stride = (decades + max_ticks - 1) / max_ticks;
    for (int d = d0; d <= d1; ++d)
      if (((d % stride) + stride) % stride == 0) t.values.push_back(std::pow(10.0, d));
    if (t.values.size() >= 2) return t;
    t.values.clear();
  }
  // Fewer than two decades inside: 1, 2 and 5 times each power of ten.
  for (int d = d0 - 1; d <= d1; ++d)
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = m * std::pow(10.0, d);
      if (v >= lo * (1 - kEps) && v <= hi * (1 + kEps)) t.values.push_back(v);
    }
  if (t.values.size() >= 2 && int(t.values.size()) <= max_ticks) return t;
  return nice_ticks(lo, hi, max_ticks);
}

int max_ticks_for(float length_px, float min_spacing_px) {
  if (!(min_spacing_px > 0) || !(length_px > 0)) return 2;
  return std::max(2, int(length_px / min_spacing_px));
}

std::string tick_label(double value, const Ticks& t) {
  if (t.log) return fmt::format("{:g}", value);
  std::string s = fmt::format("{:.{}f}", value, t.decimals);
  if (s.find_first_not_of("-0.") == std::string::npos && s[0] == '-') s.erase(0, 1);  // "-0.0"
  return s;
}

}  // namespace paraplan::gui
