// Axis ticks. Every expectation is worked out by hand from the rule in
// ticks.hpp: the smallest step in {1, 2, 5} x 10^k whose multiples inside
// [lo, hi] number at most max_ticks.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "gui/model/ticks.hpp"

using namespace paraplan::gui;

namespace {

void check_values(const Ticks& t, const std::vector<double>& want) {
  REQUIRE(t.values.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(t.values[i] == Approx(want[i]).margin(1e-12));
}

std::vector<std::string> labels(const Ticks& t) {
  std::vector<std::string> out;
  for (double v : t.values) out.push_back(tick_label(v, t));
  return out;
}

}  // namespace

TEST_CASE("linear ticks for awkward ranges", "[ticks]") {
  struct Case {
    const char* name;
    double lo, hi;
    int max_ticks;
    double step;
    std::vector<double> values;
    int decimals;
  };
  const Case cases[] = {
      // 0.37-1.9 GiB, 8 ticks: step 0.1 gives multiples 4..19 = 16 ticks (too many);
      // 0.2 gives ceil(0.37/0.2)=2 .. floor(1.9/0.2)=9 = 8 ticks: 0.4, 0.6, ..., 1.8.
      {"0.37-1.9 GiB", 0.37, 1.9, 8, 0.2, {0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8}, 1},
      // 12-870 s, 8 ticks: 50 gives 1..17 = 17; 100 gives 1..8 = 8: 100, 200, ..., 800.
      {"12-870 s", 12, 870, 8, 100, {100, 200, 300, 400, 500, 600, 700, 800}, 0},
      // 12-870 s, 20 ticks: 20 gives 1..43 = 43; 50 gives 1..17 = 17: 50, 100, ..., 850.
      {"12-870 s, room for 20",
       12,
       870,
       20,
       50,
       {50, 100, 150, 200, 250, 300, 350, 400, 450, 500, 550, 600, 650, 700, 750, 800, 850},
       0},
      // Both ends on ticks: 0.2 gives 0..5 = 6 > 5; 0.5 gives 0, 0.5, 1.
      {"0-1, ends inclusive", 0, 1, 5, 0.5, {0, 0.5, 1}, 1},
      // 0.1/0.1 = 1 and 0.3/0.1 = 2.9999999999999996 in doubles: still 3 ticks with step 0.1
      // (0.05 gives 2..6 = 5 > 3).
      {"0.1-0.3, floating-point ends", 0.1, 0.3, 3, 0.1, {0.1, 0.2, 0.3}, 1},
      // Negative to positive: 0.5 gives -7..4 = 12; 1 gives -3..2 = 6.
      {"-3.5-2.2", -3.5, 2.2, 6, 1, {-3, -2, -1, 0, 1, 2}, 0},
      // Bytes: 5e11 gives 0..6 = 7 > 5; 1e12 gives 0..3 = 4.
      {"0-3.2e12 bytes", 0, 3.2e12, 5, 1e12, {0, 1e12, 2e12, 3e12}, 0},
      // Small: 0.0005 gives 3..9 = 7 > 4; 0.001 gives 2..4 = 3.
      {"0.0012-0.0047", 0.0012, 0.0047, 4, 0.001, {0.002, 0.003, 0.004}, 3},
      // Reversed bounds are swapped: the same as 0.37-1.9.
      {"1.9-0.37 reversed", 1.9, 0.37, 8, 0.2, {0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8}, 1},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const Ticks t = nice_ticks(c.lo, c.hi, c.max_ticks);
    CHECK_FALSE(t.log);
    CHECK(t.step == Approx(c.step));
    CHECK(t.decimals == c.decimals);
    check_values(t, c.values);
    CHECK(int(t.values.size()) <= c.max_ticks);
  }
}

TEST_CASE("tick labels use the step's decimals and never print -0", "[ticks]") {
  CHECK(labels(nice_ticks(0.37, 1.9, 8)) ==
        std::vector<std::string>{"0.4", "0.6", "0.8", "1.0", "1.2", "1.4", "1.6", "1.8"});
  CHECK(labels(nice_ticks(12, 870, 8)) ==
        std::vector<std::string>{"100", "200", "300", "400", "500", "600", "700", "800"});
  CHECK(labels(nice_ticks(-3.5, 2.2, 6)) == std::vector<std::string>{"-3", "-2", "-1", "0", "1", "2"});
  CHECK(labels(nice_ticks(0.0012, 0.0047, 4)) == std::vector<std::string>{"0.002", "0.003", "0.004"});
  // -1e-17 rounds to zero at one decimal: printed "0.0", not "-0.0".
  Ticks t;
  t.decimals = 1;
  CHECK(tick_label(-1e-17, t) == "0.0");
}

TEST_CASE("degenerate tick ranges", "[ticks]") {
  const Ticks one = nice_ticks(5, 5, 8);  // an empty range: one tick at the value
  check_values(one, {5});
  CHECK(nice_ticks(NAN, 1, 8).values.empty());
  CHECK(nice_ticks(0, INFINITY, 8).values.empty());
  CHECK(nice_ticks(0, 1, 0).values.empty());
  // One tick allowed: 0.37-1.9 with step 1 has only 1 (multiples 1..1).
  check_values(nice_ticks(0.37, 1.9, 1), {1});
}

TEST_CASE("log ticks", "[ticks]") {
  // 12-870 s: the only power of ten inside is 100 (10 < 12, 1000 > 870), fewer than
  // two, so 1-2-5 values: 20, 50, 100, 200, 500 (10 < 12 and 1000 > 870 are out).
  Ticks t = log_ticks(12, 870, 8);
  CHECK(t.log);
  check_values(t, {20, 50, 100, 200, 500});
  CHECK(labels(t) == std::vector<std::string>{"20", "50", "100", "200", "500"});
  // 1-1e6: seven powers of ten, all fit in 8.
  check_values(log_ticks(1, 1e6, 8), {1, 10, 100, 1e3, 1e4, 1e5, 1e6});
  // With room for 4: every ceil(7/4) = 2nd exponent, on even exponents: 0, 2, 4, 6.
  check_values(log_ticks(1, 1e6, 4), {1, 100, 1e4, 1e6});
  // 0.37-1.9: the one power 1 inside; 1-2-5 values inside are 0.5 and 1.
  check_values(log_ticks(0.37, 1.9, 8), {0.5, 1});
  // 0.0012-0.047: powers 0.01 only; 1-2-5 inside: 0.002, 0.005, 0.01, 0.02.
  check_values(log_ticks(0.0012, 0.047, 8), {0.002, 0.005, 0.01, 0.02});
  // A range with no 1-2-5 pair inside (12-18) falls back to linear ticks:
  // step 2 gives 6..9 = 4 ticks (1 would give 7 > 4).
  t = log_ticks(12, 18, 4);
  CHECK_FALSE(t.log);
  check_values(t, {12, 14, 16, 18});
  // Not positive: linear.
  CHECK_FALSE(log_ticks(0, 10, 5).log);
}

TEST_CASE("how many ticks fit on an axis", "[ticks]") {
  CHECK(max_ticks_for(784, 90) == 8);  // 784 / 90 = 8.7
  CHECK(max_ticks_for(500, 44) == 11);  // 500 / 44 = 11.4
  CHECK(max_ticks_for(10, 90) == 2);  // never fewer than 2
  CHECK(max_ticks_for(100, 0) == 2);
}
