#include "planner/search.hpp"

#include <algorithm>
#include <chrono>

namespace paraplan {

const char* reject_name(int reason) {
  return reason == kRejectOom ? "out_of_memory" : invalid_name(Invalid(reason));
}

Candidate evaluate(const Spec& s, const Layout& l) {
  Candidate c;
  c.layout = l;
  const PeakMemory p = peak_memory(s, l);
  c.peak_stage = p.stage;
  c.peak_bytes = p.bytes;
  c.fits = p.bytes <= usable_memory_bytes(s);
  c.time = estimate_time(s, l);
  return c;
}

namespace {

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

bool allowed(const std::vector<int>& only, int v) {
  return only.empty() || std::find(only.begin(), only.end(), v) != only.end();
}

template <class T>
bool allowed_enum(const std::vector<T>& only, T v) {
  return only.empty() || std::find(only.begin(), only.end(), v) != only.end();
}

// Values of one dimension to try: the spec's list if it gives one (invalid
// values are then rejected with a reason), else every value that can be valid.
std::vector<int> domain(const std::vector<int>& only, std::vector<int> natural) {
  if (only.empty()) return natural;
  return only;
}

// The natural values narrowed to the spec's list. sp with tp = 1 and ZeRO with
// dp = 1 are the same layouts as sp = 0 and zero = 0: those dimensions then
// have the one value 0, whatever the list says.
std::vector<int> distinct(const std::vector<int>& only, std::vector<int> natural) {
  if (only.empty()) return natural;
  std::erase_if(natural, [&](int v) { return !allowed(only, v); });
  return natural;
}

// With dp = 1 every ZeRO stage is the same layout: try one, named by the
// spec's lowest allowed stage (0 when unconstrained).
std::vector<int> one_zero(const std::vector<int>& only) {
  return {only.empty() ? 0 : *std::min_element(only.begin(), only.end())};
}

}  // namespace

std::vector<int> pareto_front(const std::vector<Candidate>& c) {
  std::vector<int> idx;
  for (int i = 0; i < int(c.size()); ++i)
    if (c[i].fits) idx.push_back(i);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) {
    if (c[a].peak_bytes != c[b].peak_bytes) return c[a].peak_bytes < c[b].peak_bytes;
    return c[a].time.step_s < c[b].time.step_s;
  });
  std::vector<int> front;
  double best = 1e300;
  for (int i : idx)
    if (c[i].time.step_s < best) best = c[i].time.step_s, front.push_back(i);
  return front;
}

Plan make_plan(const Spec& s) {
  const auto t0 = std::chrono::steady_clock::now();
  Plan plan;
  const SearchSpace& q = s.search;
  const int gpus = s.num_gpus(), layers = s.model.num_layers, gbs = s.training.global_batch_size;
  for (int tp : domain(q.tp, divisors(gpus))) {
    for (int pp : domain(q.pp, divisors(std::max(1, gpus / tp)))) {
      const int dp = gpus % (tp * pp) ? 1 : gpus / (tp * pp);
      if (!allowed(q.dp, dp)) continue;
      const std::vector<int> mbss =
          domain(q.mbs, gbs % dp == 0 ? divisors(gbs / dp) : std::vector<int>{1});
      std::vector<int> vpps{1};
      if (pp > 1 && layers % pp == 0) vpps = divisors(layers / pp);
      for (int vpp : domain(q.vpp, vpps)) {
        for (Schedule sched : {Schedule::k1F1B, Schedule::kGPipe}) {
          if (sched == Schedule::kGPipe && (pp == 1 || vpp > 1)) continue;  // same as 1F1B / n.a.
          // With pp = 1 there is no pipeline: any schedule constraint is met.
          if (pp > 1 && !allowed_enum(q.schedule, sched)) continue;
          for (int mbs : mbss) {
            for (int sp : tp > 1 ? distinct(q.sp, {0, 1}) : std::vector<int>{0}) {
              for (int zero : dp > 1 ? distinct(q.zero, {0, 1, 2, 3}) : one_zero(q.zero)) {
                for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
                  if (!allowed_enum(q.recompute, rc)) continue;
                  Layout l;
                  l.dp = dp, l.tp = tp, l.pp = pp, l.vpp = vpp, l.sp = sp, l.zero = zero;
                  l.recompute = rc, l.mbs = mbs, l.schedule = sched;
                  if (const auto bad = layout_invalid(s, l)) {
                    ++plan.rejected[int(*bad)];
                    continue;
                  }
                  plan.candidates.push_back(evaluate(s, l));
                  ++plan.evaluated;
                  if (plan.candidates.back().fits) ++plan.feasible;
                  else ++plan.rejected[kRejectOom];
                }
              }
            }
          }
        }
      }
    }
  }
  std::sort(plan.candidates.begin(), plan.candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.time.step_s != b.time.step_s) return a.time.step_s < b.time.step_s;
    return a.peak_bytes < b.peak_bytes;
  });
  plan.pareto = pareto_front(plan.candidates);
  plan.search_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

}  // namespace paraplan
