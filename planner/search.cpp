#include "planner/search.hpp"

#include "costmodel/frameworks/profile.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>

namespace paraplan {

const char* reject_name(int reason) {
  return reason == kRejectOom ? "out_of_memory" : invalid_name(Invalid(reason));
}

std::int64_t Plan::invalid() const {
  std::int64_t n = 0;
  for (int i = 0; i < kNumRejectReasons; ++i)
    if (i != kRejectOom) n += rejected[i];
  return n;
}

Candidate evaluate(const Spec& s, const Layout& l, EvalCache* cache) {
  Candidate c;
  c.layout = l;
  const PeakMemory p = peak_memory(s, l, cache ? &cache->memory : nullptr);
  c.peak_stage = p.stage;
  c.peak_bytes = p.bytes;
  const std::int64_t usable = usable_memory_bytes(s);
  c.fits = p.bytes <= usable;
  c.with_held_bytes = p.with_held;
  c.flush_risk = c.fits && p.with_held > usable;
  c.time = estimate_time(s, l, cache ? &cache->time : nullptr);
  return c;
}

namespace {

// Divisors of n in increasing order, in O(sqrt n).
std::vector<int> divisors(int n) {
  std::vector<int> low, high;
  for (int i = 1; std::int64_t(i) * i <= n; ++i)
    if (n % i == 0) {
      low.push_back(i);
      if (i != n / i) high.push_back(n / i);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

// A constraint list as a set: sorted, each value once (a list of 10,001
// duplicates searches each layout once, not 10,001 times).
std::vector<int> unique_values(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

bool allowed(const std::vector<int>& only, int v) {
  return only.empty() || std::find(only.begin(), only.end(), v) != only.end();
}

template <class T>
bool allowed_enum(const std::vector<T>& only, T v) {
  return only.empty() || std::find(only.begin(), only.end(), v) != only.end();
}

// Why every layout with this tp, pp and dp is invalid whatever the inner
// dimensions, if it is (checked in layout_invalid's order), so that the search
// counts them without walking the inner loops.
std::optional<Invalid> outer_invalid(const Spec& s, int tp, int cp, int pp, int dp) {
  const Model& m = s.model;
  if (std::int64_t(dp) * tp * pp > s.num_gpus() || std::int64_t(dp) * tp * pp * cp != s.num_gpus())
    return Invalid::kGpuCount;
  if (tp > s.cluster.gpus_per_node && !s.search.allow_tp_across_nodes) return Invalid::kTpAcrossNodes;
  if (m.num_attention_heads % tp) return Invalid::kHeadsTp;
  if (m.num_kv_heads % tp) return Invalid::kKvHeadsTp;
  if (m.ffn_hidden_size % tp) return Invalid::kFfnTp;
  return std::nullopt;
}

// Context-parallel sizes to try: the spec's list, else 1 and every divisor of
// the GPUs left after tp that splits the sequence into 2·cp equal chunks
// (Megatron's load-balanced ring), when attention is flash / fused, and that
// leaves each rank at least kMinCpTokens tokens of a sequence: the shortest
// shard of any published or measured run (NVIDIA's Llama 3 8B and 405B FP8
// recipes, cp 2 at seq 8192, Megatron-LM@d98e8a64 examples/llama/README.md:105-109;
// NeMo's long-sequence table uses cp from 32K tokens on, 16K a rank; Llama 3:
// cp 16 at 131,072 tokens, 8,192 a rank). Below it the ring's overlap with
// attention, which the model prices as hidden, has no measurement (issue 46:
// cp at 2K tokens a rank was picked for that alone); a spec's search.cp list
// still tries any size.
constexpr int kMinCpTokens = 4096;
std::vector<int> cp_domain(const Spec& s, const std::vector<int>& only, int tp) {
  if (!only.empty()) return unique_values(only);
  std::vector<int> out{1};
  if (!s.training.flash_attention) return out;
  for (int d : divisors(std::max(1, s.num_gpus() / tp)))
    if (d > 1 && s.training.seq_length % (2 * std::int64_t(d)) == 0 && s.training.seq_length / d >= kMinCpTokens)
      out.push_back(d);
  return out;
}

// Values of one dimension to try: the spec's list if it gives one (invalid
// values are then rejected with a reason), else every value that can be valid.
std::vector<int> domain(const std::vector<int>& only, std::vector<int> natural) {
  if (only.empty()) return natural;
  return unique_values(only);
}

// The natural values narrowed to the spec's list. sp with tp = 1 and ZeRO with
// dp = 1 are the same layouts as sp = 0 and zero = 0: those dimensions then
// have the one value 0, whatever the list says.
std::vector<int> distinct(const std::vector<int>& only, std::vector<int> natural) {
  if (only.empty()) return natural;
  std::erase_if(natural, [&](int v) { return !allowed(only, v); });
  return natural;
}

// With dp x cp = 1 every ZeRO stage is the same layout: try one, named by the
// spec's lowest allowed stage (0 when unconstrained).
std::vector<int> one_zero(const std::vector<int>& only) {
  return {only.empty() ? 0 : *std::min_element(only.begin(), only.end())};
}

// Expert-parallel sizes to try with a mixture of experts, as (ep, etp): ep
// every divisor of num_experts, etp 1 or tp (Megatron's default; both the
// spec's lists when it gives them), each pair with etp x ep dividing the
// stage's tp x cp x dp ranks (the expert grid, parallel_state.py:873-884).
// A dense model has the one pair (1, unset).
std::vector<std::pair<int, int>> expert_pairs(const Spec& s, int tp, int cp, int dp) {
  const Model& m = s.model;
  if (!m.is_moe()) return {{1, 0}};
  const std::int64_t ranks = std::int64_t(tp) * cp * dp;
  const std::vector<int> eps = domain(s.search.ep, divisors(m.num_experts));
  const std::vector<int> etps = domain(s.search.etp, tp > 1 ? std::vector<int>{1, tp} : std::vector<int>{1});
  std::vector<std::pair<int, int>> out;
  for (int etp : etps)
    for (int ep : eps)
      if (!s.search.ep.empty() || !s.search.etp.empty() || ranks % (std::int64_t(etp) * ep) == 0) out.push_back({ep, etp});
  return out;
}

// The layer split the search tries for a pipeline size: first/last 0 = even.
// vpp_of: the layer count whose divisors are the vpp values to try (a middle
// rank's layers), 0 when no split exists.
struct UnevenSplit {
  int first = 0, last = 0, vpp_of = 0;
};

UnevenSplit search_split(int layers, int pp) {
  if (pp <= 1) return {0, 0, 0};
  if (pp > layers) return {0, 0, 0};
  if (layers % pp == 0) return {0, 0, layers / pp};
  const int c = (layers + pp - 1) / pp;
  const int rest = layers - (pp - 2) * c;  // for the first and last stages together
  if (rest < 2) return {0, 0, 0};
  const int first = rest / 2, last = rest - first;
  // vpp must divide the middle ranks' layers; the first and last ranks may
  // have one short chunk (chunk_layers), which layout_invalid checks.
  return {first, last, pp > 2 ? c : std::max(first, last)};
}

// With full recompute fitting, the block method (Megatron --recompute-method
// block) with the fewest checkpointed layers per chunk that still fits, if
// fewer than all: activation memory falls as k grows, so a search over k.
// `full_peak`: the full recompute's peak (k = every layer of a chunk).
std::optional<Layout> fewest_block_layers(const Spec& s, const Layout& full, std::int64_t full_peak, EvalCache& cache) {
  Layout b = full;
  b.recompute_method = RecomputeMethod::kBlock;
  if (framework_unsupported(profile(s.training.framework), b)) return std::nullopt;
  StageSplit split;
  if (!stage_split(s.model.num_layers, full, &split)) return std::nullopt;
  const int chunk = (split.most() + full.vpp - 1) / full.vpp;
  if (chunk < 2) return std::nullopt;
  const std::int64_t usable = usable_memory_bytes(s);
  auto peak = [&](int k) {
    b.recompute_layers = k;
    return peak_memory(s, b, &cache.memory).bytes;
  };
  const std::int64_t one = peak(1);
  if (one <= usable) return b;
  // Each checkpointed layer keeps its input in place of its activations, so
  // the peak falls about linearly in k: probe first where the line from k = 1
  // to k = chunk crosses the usable memory, then beside it, then halve as a
  // binary search does (the same answer, in 3 probes instead of log2(chunk)
  // when the line is right).
  int lo = 2, hi = chunk;  // k = chunk is the full recompute that fits
  const double cross = 1 + double(one - usable) * (chunk - 1) / double(std::max<std::int64_t>(1, one - full_peak));
  int k = int(std::min<double>(hi - 1, std::max<double>(lo, std::ceil(cross))));
  for (int probe = 0; lo < hi; ++probe) {
    const bool fit = peak(k) <= usable;
    if (fit) hi = k;
    else lo = k + 1;
    k = probe == 0 && fit && k - 1 >= lo ? k - 1 : probe == 0 && !fit && k + 1 < hi ? k + 1 : lo + (hi - lo) / 2;
  }
  if (lo >= chunk) return std::nullopt;
  b.recompute_layers = lo;
  return b;
}

// What the rankings compare, packed (a Candidate is a few hundred bytes:
// swapping them, or comparing them scattered over memory, was a tenth of the
// search), with the candidate's index.
struct RankKey {
  double step_s;  // Candidate::ranked_step_s
  std::int64_t peak_bytes;
  int index;
  bool fits, warned;
  signed char dims, zero;  // Candidate::parallel_dimensions, the ZeRO stage
  int mp;                  // Candidate::model_parallel_size
  double comm_s;           // Candidate::exposed_comm_s
  // Fitting, no warning: the band of the fastest such step it falls in, its
  // exposed communication in whole bands of that step, and whether its peak
  // is within kTieBand of the usable memory (set_bands).
  int band = 0, comm_bands = 0, memory_bands = 0;
};

RankKey rank_key(const Candidate& x, int index) {
  return {x.ranked_step_s(), x.peak_bytes, index, x.fits, x.warned(), static_cast<signed char>(x.parallel_dimensions()),
          static_cast<signed char>(x.layout.zero), x.model_parallel_size(), x.exposed_comm_s()};
}

// Whole bands of kTieBand of the fastest step (and the exposed communication
// in the same units) keep the order a strict weak ordering.
int bands_of(double x, double fastest) { return int(std::min(1e9, std::floor(x / (kTieBand * fastest)))); }

double fastest_unwarned(const std::vector<RankKey>& keys) {
  double fastest = 0;
  for (const RankKey& k : keys)
    if (k.fits && !k.warned && k.step_s > 0 && (fastest == 0 || k.step_s < fastest)) fastest = k.step_s;
  return fastest;
}

double set_bands(std::vector<RankKey>* keys, std::int64_t usable) {
  const double fastest = fastest_unwarned(*keys);
  for (RankKey& k : *keys)
    if (k.fits && !k.warned && fastest > 0) {
      k.band = time_band(k.step_s, fastest);
      k.comm_bands = bands_of(k.comm_s, fastest);
      k.memory_bands = memory_band(k.peak_bytes, usable);
    }
  return fastest;
}

// The rankings' orders, as function objects (std::sort inlines them; a
// function pointer was called per comparison).
struct RankLess {
  bool operator()(const RankKey& a, const RankKey& b) const {
    if (a.fits != b.fits) return a.fits;
    // A layout the model cannot vouch for (Candidate::warned) ranks
    // after every one it can: the recommendation has no warning when one fits.
    if (a.warned != b.warned) return !a.warned;
    if (a.fits && !a.warned) {
      // The decision rule: a band of the model's uncertainty, then what is robust to it.
      if (a.band != b.band) return a.band < b.band;
      if (a.comm_bands != b.comm_bands) return a.comm_bands < b.comm_bands;
      if (a.dims != b.dims) return a.dims < b.dims;
      if (a.mp != b.mp) return a.mp < b.mp;
      if (a.zero != b.zero) return a.zero < b.zero;
      if (a.memory_bands != b.memory_bands) return a.memory_bands < b.memory_bands;
    }
    if (a.step_s != b.step_s) return a.step_s < b.step_s;
    return a.peak_bytes < b.peak_bytes;
  }
};

// Nothing fits: the closest first, by peak memory.
struct ClosestLess {
  bool operator()(const RankKey& a, const RankKey& b) const {
    if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
    return a.step_s < b.step_s;
  }
};

// Puts each candidate where the sorted keys say, in the vector itself, cycle
// by cycle (a second vector of them was fresh pages to fault in: a tenth of
// the search). keys[i].index: the candidate that goes to position i; -1 once
// placed.
void permute(std::vector<Candidate>* c, std::vector<RankKey>* keys) {
  std::vector<RankKey>& k = *keys;
  for (size_t i = 0; i < k.size(); ++i) {
    if (k[i].index < 0 || size_t(k[i].index) == i) continue;
    Candidate held = std::move((*c)[i]);
    size_t j = i;
    for (;;) {
      const size_t from = size_t(k[j].index);
      k[j].index = -1;
      if (from == i) {
        (*c)[j] = std::move(held);
        break;
      }
      (*c)[j] = std::move((*c)[from]);
      j = from;
    }
  }
}

// The Pareto front of (peak memory, step time) of the fitting entries, as
// positions in `ranked`, sorted as packed points (indices into scattered
// candidates read two of them per comparison); of equal points the better ranked.
std::vector<int> pareto_of(const std::vector<RankKey>& ranked) {
  struct Point {
    std::int64_t peak_bytes;
    double step_s;
    int index;
  };
  std::vector<Point> points;
  for (int i = 0; i < int(ranked.size()); ++i)
    if (ranked[i].fits) points.push_back({ranked[i].peak_bytes, ranked[i].step_s, i});
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
    if (a.step_s != b.step_s) return a.step_s < b.step_s;
    return a.index < b.index;
  });
  std::vector<int> front;
  double best = 1e300;
  for (const Point& p : points)
    if (p.step_s < best) best = p.step_s, front.push_back(p.index);
  return front;
}

std::vector<RankKey> rank_keys(const std::vector<Candidate>& c) {
  std::vector<RankKey> keys;
  keys.reserve(c.size());
  for (size_t i = 0; i < c.size(); ++i) keys.push_back(rank_key(c[i], int(i)));
  return keys;
}

}  // namespace

const char* tie_break_name(TieBreak t) {
  switch (t) {
    case TieBreak::kTime: return "step time beyond the band";
    case TieBreak::kExposedComm: return "less exposed communication and pipeline bubble";
    case TieBreak::kDimensions: return "fewer parallel dimensions";
    case TieBreak::kModelParallel: return "a smaller model-parallel group (more data parallelism)";
    case TieBreak::kZero: return "a lower ZeRO stage";
    case TieBreak::kMemory: return "a memory margin beyond the memory model's 5% uncertainty";
    case TieBreak::kStep: return "a shorter ranked step";
    case TieBreak::kLessMemory: return "less peak memory";
    case TieBreak::kSame: return "nothing (equal on every criterion)";
  }
  return "?";
}

int time_band(double s, double fastest) { return fastest > 0 ? bands_of(s / fastest - 1, 1.0) : 0; }

int memory_band(std::int64_t peak_bytes, std::int64_t usable) {
  return usable > 0 && double(peak_bytes) > (1 - kTieBand) * double(usable);
}

TieBreak deciding_criterion(const Candidate& a, const Candidate& b, double fastest, std::int64_t usable) {
  if (fastest <= 0) return TieBreak::kStep;
  if (time_band(a.ranked_step_s(), fastest) != time_band(b.ranked_step_s(), fastest)) return TieBreak::kTime;
  if (bands_of(a.exposed_comm_s(), fastest) != bands_of(b.exposed_comm_s(), fastest)) return TieBreak::kExposedComm;
  if (a.parallel_dimensions() != b.parallel_dimensions()) return TieBreak::kDimensions;
  if (a.model_parallel_size() != b.model_parallel_size()) return TieBreak::kModelParallel;
  if (a.layout.zero != b.layout.zero) return TieBreak::kZero;
  if (memory_band(a.peak_bytes, usable) != memory_band(b.peak_bytes, usable)) return TieBreak::kMemory;
  if (a.ranked_step_s() != b.ranked_step_s()) return TieBreak::kStep;
  return a.peak_bytes != b.peak_bytes ? TieBreak::kLessMemory : TieBreak::kSame;
}

void rank_candidates(std::vector<Candidate>* c, std::int64_t usable) {
  std::vector<RankKey> keys = rank_keys(*c);
  set_bands(&keys, usable);
  std::sort(keys.begin(), keys.end(), RankLess{});
  permute(c, &keys);
}

std::vector<int> pareto_front(const std::vector<Candidate>& c) { return pareto_of(rank_keys(c)); }

namespace {

// Walks the search space in the search's order: valid(layout) for each valid
// layout; the invalid ones counted by reason in rejected[].
template <class Valid>
void walk_layouts(const Spec& s, std::int64_t* rejected, Valid&& valid) {
  const SearchSpace& q = s.search;
  const int gpus = s.num_gpus(), layers = s.model.num_layers, gbs = s.training.global_batch_size;
  const std::vector<int> sps_tp = distinct(q.sp, {0, 1}), zeros_dp = distinct(q.zero, {0, 1, 2, 3});
  int recomputes = 0;
  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) recomputes += allowed_enum(q.recompute, rc);
  for (int tp : domain(q.tp, divisors(gpus))) {
   for (int cp : cp_domain(s, q.cp, tp)) {
    const int rest = tp * std::int64_t(cp) > gpus ? 1 : std::max(1, gpus / (tp * cp));
    for (int pp : domain(q.pp, divisors(rest))) {
      const std::int64_t tp_pp = std::int64_t(tp) * pp * cp;  // each <= 2^24, the product checked below
      const int dp = std::int64_t(tp) * pp > gpus || tp_pp > gpus || gpus % tp_pp ? 1 : int(gpus / tp_pp);
      if (!allowed(q.dp, dp)) continue;
      const std::vector<int> mbss =
          domain(q.mbs, gbs % dp == 0 ? divisors(gbs / dp) : std::vector<int>{1});
      // Layers per stage: the even split when pp divides the layers, else
      // every middle stage ceil(L/pp) and the first and last stages the rest,
      // split as evenly as possible, first the shorter (Llama 3 405B: 126
      // layers on 16 stages as 7 + 14 × 8 + 7, Dubey et al. 2024 §3.3.2).
      // A cost-balanced framework (nanotron) splits by compute cost, whatever pp (no interleaving).
      const bool cost = profile(s.training.framework).cost_balanced_pipeline && pp > 1;
      const UnevenSplit split = cost ? UnevenSplit{0, 0, 0} : search_split(layers, pp);
      std::vector<int> vpps{1};
      if (pp > 1 && split.vpp_of > 0) vpps = divisors(split.vpp_of);
      const std::vector<int> vpp_values = domain(q.vpp, vpps);
      const std::vector<std::pair<int, int>> experts = expert_pairs(s, tp, cp, dp);
      if (const auto bad = outer_invalid(s, tp, cp, pp, dp)) {
        // Every inner layout is rejected for the same reason: count them.
        std::int64_t n = 0;
        for (int vpp : vpp_values)
          for (Schedule sched : {Schedule::k1F1B, Schedule::kGPipe})
            if (!(sched == Schedule::kGPipe && (pp == 1 || vpp > 1)) && !(pp > 1 && !allowed_enum(q.schedule, sched)))
              n += std::int64_t(mbss.size()) * (tp > 1 ? sps_tp.size() : 1) * (dp * cp > 1 ? zeros_dp.size() : 1) * recomputes *
                   std::int64_t(experts.size());
        rejected[int(*bad)] += n;
        continue;
      }
      for (int vpp : vpp_values) {
        for (Schedule sched : {Schedule::k1F1B, Schedule::kGPipe}) {
          if (sched == Schedule::kGPipe && (pp == 1 || vpp > 1)) continue;  // same as 1F1B / n.a.
          // With pp = 1 there is no pipeline: any schedule constraint is met.
          if (pp > 1 && !allowed_enum(q.schedule, sched)) continue;
          for (int mbs : mbss) {
            for (int sp : tp > 1 ? sps_tp : std::vector<int>{0}) {
             for (const auto& [ep, etp] : experts) {
              // ZeRO shards over dp x cp: distinct stages whenever that group has two ranks.
              for (int zero : dp * cp > 1 ? zeros_dp : one_zero(q.zero)) {
                for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
                  if (!allowed_enum(q.recompute, rc)) continue;
                  Layout l;
                  l.dp = dp, l.tp = tp, l.cp = cp, l.pp = pp, l.vpp = vpp, l.sp = sp, l.zero = zero;
                  l.recompute = rc, l.mbs = mbs, l.schedule = sched, l.ep = ep, l.etp = etp;
                  l.first_stage_layers = split.first, l.last_stage_layers = split.last;
                  if (cost) l.balance = StageBalance::kCost;
                  if (const auto bad = layout_invalid(s, l)) {
                    ++rejected[int(*bad)];
                    continue;
                  }
                  valid(l);
                }
              }
             }
            }
          }
        }
      }
    }
   }
  }
}

}  // namespace

Plan make_plan(const Spec& s) {
  const auto t0 = std::chrono::steady_clock::now();
  Plan plan;
  plan.usable_bytes = usable_memory_bytes(s);
  EvalCache cache;
  // The valid layouts first, so that the candidates are stored once, not
  // copied as the vector grows (a candidate is a few hundred bytes: the copies
  // and the fresh pages they touch were a tenth of the search). Full
  // recompute that fits may add one block-recompute candidate.
  std::vector<Layout> layouts;
  std::int64_t full = 0;
  walk_layouts(s, plan.rejected.data(), [&](const Layout& l) {
    layouts.push_back(l);
    full += l.recompute == Recompute::kFull;
  });
  plan.candidates.reserve(layouts.size() + size_t(full));
  // The rankings' keys, packed, as the candidates come (not read back from them).
  std::vector<RankKey> keys;
  keys.reserve(plan.candidates.capacity());
  auto add = [&](Candidate c) {
    plan.candidates.push_back(std::move(c));
    keys.push_back(rank_key(plan.candidates.back(), int(keys.size())));
    ++plan.evaluated;
  };
  for (const Layout& l : layouts) {
    add(evaluate(s, l, &cache));
    if (plan.candidates.back().fits) ++plan.feasible;
    else ++plan.rejected[kRejectOom];
    if (l.recompute == Recompute::kFull && plan.candidates.back().fits) {
      // Block recompute of the fewest layers per chunk that still fits:
      // less re-run work than recomputing all.
      if (const auto block = fewest_block_layers(s, l, plan.candidates.back().peak_bytes, cache)) {
        add(evaluate(s, *block, &cache));
        ++plan.feasible;
      }
    }
  }
  if (plan.feasible == 0) {
    std::sort(keys.begin(), keys.end(), ClosestLess{});
  } else {
    plan.fastest_ranked_s = set_bands(&keys, plan.usable_bytes);
    std::sort(keys.begin(), keys.end(), RankLess{});
    plan.pareto = pareto_of(keys);  // as rank_candidates + pareto_front
  }
  permute(&plan.candidates, &keys);
  plan.search_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

bool with_gpus(const Spec& s, int gpus, Spec* out) {
  *out = s;
  const int g = s.cluster.gpus_per_node;
  if (gpus < g) {
    out->cluster.gpus_per_node = gpus;
    out->num_nodes = 1;
    return true;
  }
  if (gpus % g) return false;
  out->num_nodes = gpus / g;
  return true;
}

Enough smallest_fitting_gpus(const Spec& s, double budget_s) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto over = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > budget_s; };
  const int g = s.cluster.gpus_per_node;
  const int now = s.num_gpus();
  // fits(n): the fastest fitting layout on n GPUs, if any.
  Enough found;
  const auto fits = [&](int n, Enough* e) {
    Spec t;
    if (!with_gpus(s, n, &t)) return false;
    const Plan p = make_plan(t);
    if (!p.feasible) return false;
    *e = {n, p.candidates[0].layout};
    return true;
  };
  // Double from here (to whole nodes once past one node) until something fits.
  std::int64_t lo = now, hi = 0;
  for (std::int64_t n = 2 * std::int64_t(now); n <= kMaxGpus && !over(); n *= 2) {
    const std::int64_t c = n > g ? (n + g - 1) / g * g : n;  // whole nodes past one node
    if (c > kMaxGpus) break;
    if (fits(int(c), &found)) {
      hi = c;
      break;
    }
    lo = c;
  }
  if (!hi) return {};
  // Bisect between the last that did not fit and the first that did, over valid counts.
  while (!over()) {
    std::int64_t mid = lo + (hi - lo) / 2;
    if (mid >= g) mid = mid / g * g;
    if (mid <= lo || mid >= hi) break;
    Enough e;
    if (fits(int(mid), &e)) hi = mid, found = e;
    else lo = mid;
  }
  return found;
}

}  // namespace paraplan
