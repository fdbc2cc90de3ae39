// A Communicator that times every collective of another one as a phase named
// "<group> <op>" (e.g. "tp all_reduce", "dp reduce_scatter_v", "pp recv"; the
// group is the first word of the inner name, so "tp (emulated)" is "tp"), so
// that step time splits into compute and each collective (issue 6). Works over
// any backend's communicator; with NCCL on the compute stream and CUDA-event
// clocks the phase is the collective's time on the GPU.
// isend is not timed on its own: the NCCL communicator launches pending sends
// together with the next recv (as one NCCL group), so their time is in "recv".
#pragma once

#include <memory>

#include "validate/comm.hpp"
#include "validate/phase_timer.hpp"

namespace paraplan::validate {

std::unique_ptr<Communicator> timed_comm(std::unique_ptr<Communicator> inner, PhaseTimer* timer);
// Wraps every communicator of `g` (null ones stay null).
void time_groups(Groups& g, PhaseTimer* timer);
// The same without taking ownership: views of `g`'s communicators, which must
// outlive them (the executor times the groups its caller owns).
std::unique_ptr<Communicator> timed_view(Communicator* inner, PhaseTimer* timer);
Groups timed_views(const Groups& g, PhaseTimer* timer);

}  // namespace paraplan::validate
