// Shared by the CPU kernel tests (test_kernels.cpp, test_attention_kernels.cpp):
// the device, random and bf16 vectors, errors, and central-difference gradient
// checks. Include after <catch2/catch.hpp>.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "validate/cpu/cpu_device.hpp"

namespace paraplan::kernel_test {

using namespace paraplan::validate;

using i64 = std::int64_t;
using Vec = std::vector<float>;
using B16 = std::vector<bf16>;
using Mask = std::vector<std::uint8_t>;

inline Device& dev() {
  static const std::unique_ptr<Device> d = make_cpu_device();
  return *d;
}

inline Vec random_vec(i64 n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(static_cast<std::size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}
inline B16 to_b16(const Vec& x) {
  B16 y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = to_bf16(x[i]);
  return y;
}
inline Vec to_f32(const B16& x) {
  Vec y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = to_float(x[i]);
  return y;
}
// Values exactly representable in bf16, so bf16 storage changes nothing on input.
inline Vec bf16_exact(Vec x) { return to_f32(to_b16(x)); }

// ||a - b|| / ||b||.
inline double rel_err(const Vec& a, const Vec& b) {
  REQUIRE(a.size() == b.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}
inline double wsum(const Vec& y, const Vec& w) {
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += double(y[i]) * w[i];
  return s;
}

// Central differences of loss() in each element of x (fp32, the loss summed in
// double) against the analytic gradient; reports the worst element.
inline void check_grad(const char* what, Vec& x, const Vec& grad,
                       const std::function<double()>& loss, double h = 1e-2, double tol = 2e-3,
                       std::size_t step = 1) {
  REQUIRE(x.size() == grad.size());
  double worst = 0;
  std::size_t at = 0;
  double fd_at = 0;
  for (std::size_t k = 0; k < x.size(); k += step) {
    const float x0 = x[k], xp = float(x0 + h), xm = float(x0 - h);
    x[k] = xp;
    const double lp = loss();
    x[k] = xm;
    const double lm = loss();
    x[k] = x0;
    const double fd = (lp - lm) / (double(xp) - double(xm));
    const double err = std::abs(fd - grad[k]) / (1.0 + std::abs(fd));
    if (err > worst) worst = err, at = k, fd_at = fd;
  }
  INFO(what << ": worst element " << at << " analytic " << grad[at] << " fd " << fd_at);
  CHECK(worst <= tol);
}

}  // namespace paraplan::kernel_test
