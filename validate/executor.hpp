// The executor: one rank of a layout running real training steps of a
// GPT/Llama-style decoder (embedding, N pre-norm blocks, final norm, output
// layer, vocab-parallel cross-entropy; Adam), sharded exactly as the layout
// says, with every buffer allocated through the tracking allocator.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "costmodel/memory.hpp"
#include "costmodel/spec.hpp"
#include "validate/allocator.hpp"
#include "validate/comm.hpp"
#include "validate/device.hpp"

namespace paraplan::validate {

struct RunConfig {
  Spec spec;
  Layout layout;  // resolved
  int rank = 0;   // world rank (or the emulated rank)
  int steps = 3;
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  std::uint64_t seed = 1234;
  bool grad_check = false;  // record gradient checksums at step 1
  bool emulated = false;    // collectives are local stand-ins
  // Called at every schedule action with a short description (heartbeat).
  std::function<void(const std::string&)> progress;
};

// Sum of squares and a hash-weighted sum of one global parameter tensor's
// gradient, over the elements this rank owns (so that summing over ranks gives
// the unsharded tensor's values).
struct GradCheck {
  std::string name;
  double sum_sq = 0, sum_w = 0;
};

// Measured time of the time model's terms, summed over the measured steps:
// forward/backward/optimizer are compute only (the collectives inside them
// excluded); tp/pp/dp_comm are the time spent in each group's collectives,
// waiting for the peer included (so pp_comm holds this stage's pipeline bubble).
struct PhaseSeconds {
  double forward = 0, backward = 0, optimizer = 0, tp_comm = 0, pp_comm = 0, dp_comm = 0;
};

struct RankResult {
  int rank = 0, stage = 0, tp_rank = 0, dp_rank = 0;
  MemoryBreakdown peak;                      // each category's own peak
  std::array<std::string, kNumCategories> peak_phase;
  std::int64_t total_peak = 0;               // peak of the sum
  std::string total_peak_phase;
  MemoryBreakdown at_total_peak;             // categories when the sum peaked
  std::vector<double> loss;                  // mean loss per step (every rank has it)
  std::vector<double> step_seconds;
  PhaseSeconds phases;                       // summed over steps after the first
  // Every timed phase's total (inclusive of what nests in it), summed over the
  // same steps: "step", "forward", "backward", "optimizer", "pp send_wait" and
  // each collective as "<group> <op>" ("tp all_reduce", "dp all_gather_v", ...).
  std::map<std::string, double> phase_totals_s;
  std::map<std::string, std::int64_t> phase_counts;  // intervals of each, same steps
  std::vector<GradCheck> grads;              // step 1, when grad_check
  std::int64_t allocations = 0;
};

// Runs cfg.steps steps on this rank. Throws OutOfMemory when the allocator's
// limit is hit (the caller reports rank, category and phase).
RankResult run_rank(const RunConfig& cfg, Device& dev, TrackingAllocator& alloc, Groups& groups);

// The synthetic learnable task: sequence g (global index) is an arithmetic
// progression modulo the vocabulary with a start and stride drawn from g; the
// target of each token is the next one. The loss can fall from ln V to ~0.
std::int32_t synthetic_token(std::uint64_t seed, std::int64_t seq, std::int64_t pos, std::int64_t vocab);

}  // namespace paraplan::validate
