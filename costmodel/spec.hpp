// A Spec is everything a plan is made from: model + cluster + training + search
// constraints. Loaded and validated once (planner/spec_loader); nothing in
// costmodel/ re-checks the input, but layouts are checked against the spec here
// because an impossible layout is a rejected candidate, not a crash.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "costmodel/layout.hpp"
#include "costmodel/model.hpp"

namespace paraplan {

// Allowed values per layout dimension for the search; empty = unconstrained.
struct SearchSpace {
  std::vector<int> dp, tp, pp, vpp, zero, mbs;
  std::vector<Recompute> recompute;
  std::vector<int> sp;  // 0 / 1
  std::vector<Schedule> schedule;
  bool allow_tp_across_nodes = false;
};

struct Spec {
  Model model;
  Cluster cluster;
  Training training;
  int num_nodes = 1;
  double memory_headroom = 0.05;  // fraction of GPU memory kept free
  SearchSpace search;
  std::optional<std::string> default_layout;  // `layout:` in the plan spec

  int num_gpus() const { return num_nodes * cluster.gpus_per_node; }
};

// Why a layout cannot run at all (as opposed to "does not fit").
enum class Invalid {
  kGpuCount,        // dp·tp·pp != GPUs
  kHeadsTp,         // attention heads % tp
  kKvHeadsTp,       // kv heads % tp
  kFfnTp,           // ffn hidden % tp
  kSeqSp,           // seq length % tp with sequence parallelism
  kLayersPp,        // layers % (pp·vpp)
  kBatch,           // global batch % (dp·mbs)
  kVpp,             // vpp > 1 without pp > 1, or with GPipe
  kInterleavedMicrobatches,  // interleaved 1F1B needs micro-batches % pp == 0
  kTpAcrossNodes,   // tp larger than a node without the search flag
  kFramework,       // a ZeRO stage or recompute policy the framework does not have
  kCount
};
const char* invalid_name(Invalid r);

struct LayoutProblem {
  Invalid reason;
  std::string field;    // the layout or spec field at fault
  std::string message;  // what was expected
};

// Fills in dp when it is 0 (derived from the GPU count), turns sp off when
// tp == 1 (as Megatron-LM does), and reports the first reason the layout cannot
// run. `check_tp_span` enforces that a tp group fits in one node.
std::optional<LayoutProblem> resolve_layout(const Spec& spec, Layout* layout,
                                            bool check_tp_span = true);
// Allocation-free variant for the search: returns only the reason.
std::optional<Invalid> layout_invalid(const Spec& spec, const Layout& layout,
                                      bool check_tp_span = true);

inline int num_microbatches(const Spec& s, const Layout& l) {
  return int(s.training.global_batch_size / (std::int64_t(l.dp) * l.mbs));
}

}  // namespace paraplan
