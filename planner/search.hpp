// Exhaustive search over dp × tp × pp × vpp × sp × zero × recompute × mbs ×
// schedule for a spec's GPU count. Only invalid layouts are pruned (counted by
// reason); every valid one is evaluated, fitting or not, and ranked.
#pragma once

#include <algorithm>
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
  // The step the ranking uses: the raw prediction, raised to what the GPU's
  // best published utilization allows where it is above it (StepTime::clamped_step_s).
  double ranked_step_s() const { return std::max(time.step_s, time.clamped_step_s); }
  // A layout the model cannot vouch for (a time warning other than the
  // utilization cap, which clamps its time instead, or an allocator flush):
  // it ranks after those it can.
  bool warned() const { return (time.warnings & ~StepTime::kWarnMfuAboveBest) != 0 || flush_risk; }
  // The parallel dimensions it uses beyond data parallelism: tp, cp, pp,
  // interleaving (vpp) and ep, each > 1 (one of the decision rule's tie-breaks).
  int parallel_dimensions() const {
    return (layout.tp > 1) + (layout.cp > 1) + (layout.pp > 1) + (layout.vpp > 1) + (layout.ep > 1);
  }
  // The GPUs that hold one model replica, tp x cp x pp: of two layouts with as
  // many dimensions, the one with more data parallelism (the tie-break after them).
  int model_parallel_size() const { return layout.tp * layout.cp * layout.pp; }
  // What the GPUs spend waiting on other GPUs: exposed communication (TP +
  // PP + CP + EP + DP) and the pipeline bubble (fill and drain), in seconds
  // of the raw prediction. The decision rule's first tie-break: the clamp to
  // the best published utilization hides it, and it is the part of a step the
  // measured errors scatter most on (docs/verification.md).
  double exposed_comm_s() const {
    return time.tp_comm_s + time.pp_comm_s + time.cp_comm_s + time.ep_comm_s + time.dp_comm_s + time.bubble_s;
  }
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
  // The fastest ranked step of the fitting layouts without a warning: the decision rule's reference (0 if none).
  double fastest_ranked_s = 0;
  const Candidate* recommended() const { return feasible ? &candidates[0] : nullptr; }
  // Layouts refused before estimation (every reason but out_of_memory), and all the search made:
  // enumerated = evaluated + invalid; evaluated = feasible + rejected[out_of_memory].
  std::int64_t invalid() const;
  std::int64_t enumerated() const { return evaluated + invalid(); }
};

// The decision rule (docs/reference.md "The decision rule"). Ranked step times
// (Candidate::ranked_step_s) in one band of kTieBand (costmodel/time.hpp: the
// time model's stated uncertainty) of the fastest are a tie. The band is
// whole: band k holds the layouts whose ranked step is within [k, k + 1)
// bands of the fastest (a tolerance compared pairwise would not be transitive).
// Within one band, the layouts rank by what is robust to that uncertainty,
// in this order: less exposed communication and pipeline bubble
// (Candidate::exposed_comm_s, counted in whole bands of the fastest step:
// differences the model cannot resolve are ties), fewer
// parallel dimensions (Candidate::parallel_dimensions), a smaller
// model-parallel group (Candidate::model_parallel_size), a lower ZeRO stage,
// a memory margin (a peak more than kTieBand under the usable memory: the
// memory model's own uncertainty, median |error| 4.9 % on the Playbook's
// runs, docs/verification.md; a margin that large or larger is as good as any),
// then the ranked step time, then the peak memory itself.
enum class TieBreak { kTime, kExposedComm, kDimensions, kModelParallel, kZero, kMemory, kStep, kLessMemory, kSame };
const char* tie_break_name(TieBreak t);
// The band of the fastest ranked step `fastest` that step `s` falls in.
int time_band(double s, double fastest);
// 1 where a peak lies within kTieBand of the usable memory (its margin is
// inside the memory model's uncertainty), else 0.
int memory_band(std::int64_t peak_bytes, std::int64_t usable);
// The first criterion of the rule that orders a before b ("time" when they
// lie in different bands); `fastest`: the fastest ranked step of the plan's
// fitting layouts without a warning (Plan::fastest_ranked_s), `usable` the
// usable memory per GPU (Plan::usable_bytes).
TieBreak deciding_criterion(const Candidate& a, const Candidate& b, double fastest, std::int64_t usable);
// make_plan's order: fitting layouts first, those without a warning (Candidate::warned)
// before those with one; the fitting ones without a warning by band of the
// fastest ranked step, then by the tie-breaks above; the rest by ranked step
// time. `usable`: the usable memory per GPU, the memory bands' unit.
void rank_candidates(std::vector<Candidate>* candidates, std::int64_t usable);

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
