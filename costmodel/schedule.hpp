// Pipeline schedules: how many micro-batches' activations each stage holds at
// its peak. Shared by the memory model and (later) the time model.
#pragma once

#include <algorithm>

#include "costmodel/fixed_list.hpp"
#include "costmodel/layout.hpp"

namespace paraplan {

// The stages whose memory and time stand for every stage of a layer split,
// each once: the first, stage 1 and the last. The middle stages 1 .. pp-2 hold
// the same layers and buffers and no more micro-batches in flight than stage 1
// (in_flight_chunks never grows with the stage), so a 720-stage pipeline costs
// what a 3-stage one does. Not for a compute-cost split (StageBalance::kCost),
// whose ranks all differ.
inline FixedList<int, 3> representative_stages(const Layout& l) {
  FixedList<int, 3> r;
  r.add(0);
  if (l.pp > 1) r.add(1);
  if (l.pp > 2) r.add(l.pp - 1);
  return r;
}

// Forward passes of model chunks a pipeline rank has run, and not yet
// backpropagated, at its activation peak (just before its first backward; the
// steady state keeps the count).
//  * GPipe: all m micro-batches (Huang et al. 2019).
//  * 1F1B: stage i holds min(p - i, m) (Narayanan et al. 2021, PipeDream-Flush).
//  * Interleaved 1F1B (v chunks): Megatron-LM's warm-up of 2(p - i - 1) + (v - 1)p
//    chunk forwards plus the one that precedes the first backward, capped at m·v.
//    On stage 0 this is pv + p - 1 chunks: p·(1 + (p-1)/(p·v)) stage-equivalents.
inline int in_flight_chunks(const Layout& l, int num_microbatches, int stage) {
  const int p = l.pp, m = num_microbatches, v = l.vpp;
  if (l.schedule == Schedule::kGPipe) return m;
  if (v == 1) return std::min(p - stage, m);
  // Megatron's warmup: 2(p - rank - 1) + (v - 1) x the micro-batch group
  // (pp unless --microbatch-group-size-per-virtual-pipeline-stage), then one
  // more forward before the first backward (schedules.py:960-965).
  return std::min(2 * (p - stage - 1) + (v - 1) * l.group() + 1, m * v);
}

// Of those, how many belong to model chunk c (0 <= c < v). Megatron runs
// forwards in groups of g micro-batches per chunk (g = pp by default): chunk
// (k / g) % v for the k-th forward (schedules.py:989-1015, get_schedule_table).
inline int in_flight_of_chunk(const Layout& l, int num_microbatches, int stage, int chunk) {
  const int total = in_flight_chunks(l, num_microbatches, stage);
  if (l.vpp == 1 || l.schedule == Schedule::kGPipe) return total;
  const int g = l.group(), round = g * l.vpp;
  const int full_rounds = total / round, rem = total % round;
  return full_rounds * g + std::clamp(rem - chunk * g, 0, g);
}

// Pipeline bubble as a fraction of the step: (p-1)/(m+p-1) for 1F1B and GPipe,
// (p-1)/(v·m + p-1) for interleaved (Narayanan et al. 2021, eq. 1 and §2.2).
inline double bubble_fraction_of_step(const Layout& l, int m) {
  const double p = l.pp, v = l.interleaved() ? l.vpp : 1;
  return (p - 1) / (v * m + p - 1);
}

// The same bubble relative to the ideal (bubble-free) time: (p-1)/(v·m).
inline double bubble_fraction_of_ideal(const Layout& l, int m) {
  const double p = l.pp, v = l.interleaved() ? l.vpp : 1;
  return (p - 1) / (v * m);
}

}  // namespace paraplan
