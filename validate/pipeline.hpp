// Per-rank order of forward and backward passes for GPipe, 1F1B and
// interleaved 1F1B — the same schedules the memory model counts
// (costmodel/schedule.hpp: in_flight_chunks).
#pragma once

#include <vector>

#include "costmodel/layout.hpp"

namespace paraplan::validate {

struct PipelineAction {
  bool forward;
  int chunk, mb;
};

// The actions of pipeline rank `stage` for M micro-batches, in order.
std::vector<PipelineAction> pipeline_actions(const Layout& l, int stage, int M);

}  // namespace paraplan::validate
