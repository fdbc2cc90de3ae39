// Exhaustive search over dp × tp × pp × vpp × sp × zero × recompute × mbs ×
// schedule for a spec's GPU count. Only invalid layouts are pruned (counted by
// reason); every valid one is evaluated, fitting or not, and ranked.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "costmodel/memory.hpp"
#include "costmodel/spec.hpp"
#include "costmodel/time.hpp"

namespace paraplan {

struct Candidate {
  Layout layout;
  int peak_stage = 0;
  std::int64_t peak_bytes = 0;
  bool fits = false;
  // The heaviest stage's device figure plus the stream-held blocks it would
  // keep, and whether the layout fits only with an allocator flush
  // (MemoryEstimate::with_held_bytes, flush_risk).
  std::int64_t with_held_bytes = 0;
  bool flush_risk = false;
  StepTime time;
  // A layout the model cannot vouch for (a time warning or an allocator
  // flush): it ranks after those it can.
  bool warned() const { return time.warnings != 0 || flush_risk; }
};

// Rejection reasons: the Invalid reasons plus "does not fit" (out of memory).
inline constexpr int kNumRejectReasons = int(Invalid::kCount) + 1;
inline constexpr int kRejectOom = int(Invalid::kCount);
const char* reject_name(int reason);

struct Plan {
  std::vector<Candidate> candidates;  // every valid layout: fitting ones first, by step time (ties by memory)
  std::int64_t evaluated = 0;         // valid layouts whose memory and time were estimated
  std::int64_t feasible = 0;          // of those, how many fit
  std::array<std::int64_t, kNumRejectReasons> rejected{};
  std::vector<int> pareto;            // indices into candidates: peak memory vs step time
  double search_seconds = 0;
  std::int64_t usable_bytes = 0;  // usable memory per GPU (usable_memory_bytes of the spec)
  const Candidate* recommended() const { return feasible ? &candidates[0] : nullptr; }
  // Layouts refused before estimation (every reason but out_of_memory), and all the search made:
  // enumerated = evaluated + invalid; evaluated = feasible + rejected[out_of_memory].
  std::int64_t invalid() const;
  std::int64_t enumerated() const { return evaluated + invalid(); }
};

// Step times closer than this fraction of the faster one are a tie: the time
// model's own resolution is far coarser (docs/verification.md).
inline constexpr double kTieFraction = 0.0005;
// make_plan's order: fitting layouts first, those without a time warning
// before those with one, each group by step time; among the fitting ones
// without a warning, bands of kTieFraction of the fastest step (band 0: a tie
// with it) rank by peak memory, the least first, so of layouts predicted
// equally fast plan recommends the one with the most headroom.
void rank_candidates(std::vector<Candidate>* candidates);

// When no layout fits: the smallest GPU count (whole nodes, or part of one
// node) at which one does, the spec otherwise unchanged; 0 if none up to
// kMaxGpus or within the time budget. Doubles, then bisects: memory per GPU
// falls as GPUs are added, though divisibility makes it only roughly monotone.
// The spec on `gpus` GPUs: whole nodes of the cluster's size, or one node of
// fewer GPUs; false when gpus is past one node and not a multiple of it.
bool with_gpus(const Spec& s, int gpus, Spec* out);

struct Enough {
  int gpus = 0;
  Layout layout;  // the fastest that fits there
};
Enough smallest_fitting_gpus(const Spec& spec, double budget_s = 3.0);

// Evaluates one resolved layout (no allocation).
// The memos one search keeps (costmodel's MemoryCache and TimeCache): pass
// one to every evaluate() of a Spec; results equal those without it.
struct EvalCache {
  MemoryCache memory;
  TimeCache time;
};
Candidate evaluate(const Spec& spec, const Layout& layout, EvalCache* cache = nullptr);

Plan make_plan(const Spec& spec);

// Indices of the fitting candidates on the Pareto front of (peak memory, step
// time), in order of increasing memory.
std::vector<int> pareto_front(const std::vector<Candidate>& c);

}  // namespace paraplan
