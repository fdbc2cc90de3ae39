// Per-GPU memory of a layout, per pipeline stage, in named categories. The
// validator measures the same categories, so a comparison is term by term.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "costmodel/spec.hpp"

namespace paraplan {

enum class Category {
  kWeights,
  kGradients,
  kOptimizer,
  kActivations,
  kTransient,
  kComm,
  kRuntime,
  kFragmentation,
};
inline constexpr int kNumCategories = 8;
const char* category_name(Category c);

struct MemoryBreakdown {
  std::array<std::int64_t, kNumCategories> bytes{};
  // The part of `runtime` that the caching allocator hands out (PyTorch's
  // cuBLAS workspaces), so it shows in allocated and reserved too.
  std::int64_t runtime_in_allocator = 0;
  // Blocks the caching allocator keeps only because a stream has not yet
  // finished with them (a collective's input): freed by the framework, so
  // out of allocated (DeviceCachingAllocator::free lowers allocated_bytes
  // before it inserts the block's stream events), but not reusable until those
  // events complete, so their segments stay in reserved, up to the memory left
  // over; a failed cudaMalloc first synchronizes and frees them
  // (release_cached_blocks), so they never make a layout fail and are not
  // part of total()/device(). Where the profile says so
  // (Profile::held_in_allocated) they count in allocated too.
  std::int64_t held_for_streams = 0;
  bool held_in_allocated = false;
  // The same blocks before that cap: what the framework would keep held with
  // the host a forward ahead of the GPU and room enough. Where device() plus
  // these exceed the usable memory, the layout fits only if the allocator
  // flushes its cache mid-step (MemoryEstimate::flush_risk).
  std::int64_t held_wanted = 0;
  std::int64_t& operator[](Category c) { return bytes[int(c)]; }
  std::int64_t operator[](Category c) const { return bytes[int(c)]; }
  // Everything that must fit: what nvidia-smi shows (= device()).
  std::int64_t total() const {
    std::int64_t t = 0;
    for (auto b : bytes) t += b;
    return t;
  }
  // torch.cuda.max_memory_allocated(): live tensor blocks.
  std::int64_t allocated() const {
    return total() - bytes[int(Category::kRuntime)] - bytes[int(Category::kFragmentation)] + runtime_in_allocator +
           (held_in_allocated ? held_for_streams : 0);
  }
  // torch.cuda.max_memory_reserved(): allocated + the allocator's cached
  // slack + the blocks still held for a stream.
  std::int64_t reserved() const {
    return allocated() + bytes[int(Category::kFragmentation)] + (held_in_allocated ? 0 : held_for_streams);
  }
  // What must fit: reserved without the stream-held blocks, + CUDA context,
  // NCCL buffers and other memory outside the allocator.
  std::int64_t device() const { return total(); }
};

// Parameters one rank of a stage holds (tp-sharded, before ZeRO).
struct StageParams {
  std::int64_t layers = 0;         // transformer layers on this pipeline rank
  std::int64_t layer = 0;          // one dense layer's parameters on one tp rank
  // Mixtures of experts: how many of `layers` are MoE layers, one MoE layer's
  // parameters on one rank apart from its routed experts (attention, norms,
  // router, shared experts: tp-sharded as dense layers are), and its routed
  // experts on one rank: num_experts / ep experts, each split over etp.
  std::int64_t moe_layers = 0;
  std::int64_t moe_layer = 0;
  std::int64_t expert = 0;
  std::int64_t embedding = 0;      // token (+ position) embedding, stage 0
  std::int64_t output = 0;         // output layer (or tied copy) on the last stage
  std::int64_t final_norm = 0;
  // Trained multi-token-prediction modules on this rank (Training::mtp; the
  // last): their dense parameters with the word-embedding copy the rank then
  // holds, and their routed experts apart (sharded over edp like the others).
  std::int64_t mtp = 0, mtp_experts = 0;
  // The routed experts' parameters: sharded over the expert data-parallel group.
  std::int64_t experts() const { return moe_layers * expert + mtp_experts; }
  std::int64_t total() const {
    return (layers - moe_layers) * layer + moe_layers * (moe_layer + expert) + embedding + output + final_norm + mtp +
           mtp_experts;
  }
  // The most parameters one layer holds on this rank (ZeRO-3 gathers a layer at a time).
  std::int64_t largest_layer() const {
    const std::int64_t moe = moe_layers > 0 ? moe_layer + expert : 0;
    return layers - moe_layers > 0 && layer > moe ? layer : moe;
  }
};
// `mtp`: the run trains the model's multi-token-prediction modules (Training::mtp).
StageParams stage_params(const Model& m, const Layout& l, int stage, bool mtp = false);

// Model state of Ψ parameters on one data-parallel rank under a ZeRO stage
// (Rajbhandari et al. 2020, §5.1: (2 + 2 + K)Ψ, with 1: optimizer / N_d,
// 2: + gradients / N_d, 3: + parameters / N_d). Shards round up.
struct ModelState {
  std::int64_t weights, gradients, optimizer;
  std::int64_t total() const { return weights + gradients + optimizer; }
};
ModelState model_state_bytes(std::int64_t psi, int zero, int dp, int weight_bytes, int grad_bytes,
                             double optimizer_bytes);

// One line of `explain --formulas`.
struct Term {
  Category category;
  std::string name;     // e.g. "Adam state"
  std::string formula;  // with the numbers put in
  std::int64_t bytes;
  std::string source;   // where the term comes from (framework profile: repo@commit file:line)
  bool held_for_streams = false;  // counted in reserved (and allocated where the profile says: see MemoryBreakdown)
};

// Memory of one rank of `stage`. The layout must be resolved (resolve_layout).
MemoryBreakdown stage_memory(const Spec& spec, const Layout& layout, int stage);
// The same, term by term with formulas (allocates; for `explain`).
std::vector<Term> stage_terms(const Spec& spec, const Layout& layout, int stage);

struct MemoryEstimate {
  std::vector<MemoryBreakdown> stages;
  int heaviest_stage = 0;
  int heaviest_rank = 0;  // global rank: tp innermost, then dp, then pp
  std::int64_t gpu_bytes = 0;
  std::int64_t headroom_bytes = 0;  // kept free: memory_headroom × GPU memory
  std::int64_t usable_bytes = 0;    // gpu − headroom
  std::int64_t peak_bytes = 0;      // heaviest stage's total (= its device bytes)
  std::int64_t allocated_bytes = 0; // heaviest stage: max_memory_allocated
  std::int64_t reserved_bytes = 0;  // heaviest stage: max_memory_reserved
  std::int64_t device_bytes = 0;    // heaviest stage: what must fit (nvidia-smi)
  std::int64_t margin_bytes = 0;    // usable − peak (negative: does not fit)
  bool fits = false;
  // The most any stage's device figure plus the stream-held blocks it would
  // keep (MemoryBreakdown::held_wanted) comes to, and whether that exceeds the
  // usable memory for a layout that fits: then the caching allocator must
  // synchronize and free those blocks mid-step (CUDACachingAllocator
  // release_cached_blocks), which a run survives only if the freed blocks are
  // not stranded in split segments (memory_warning_message says more).
  std::int64_t with_held_bytes = 0;
  bool flush_risk = false;
  std::int64_t params_total = 0;
  std::int64_t params_per_rank = 0;  // heaviest stage, before ZeRO sharding
  const MemoryBreakdown& heaviest() const { return stages[heaviest_stage]; }
};
MemoryEstimate estimate_memory(const Spec& spec, const Layout& layout);

// Allocation-free peak for the search: heaviest stage and its total.
struct PeakMemory {
  int stage = 0;
  std::int64_t bytes = 0;
  std::int64_t with_held = 0;  // MemoryEstimate::with_held_bytes over the stages evaluated
};
// Per-search memo of a layer's memory terms (saved bytes, rounding slack,
// transient peak), which ZeRO and the recompute method do not change: a
// search passes one to every peak_memory call on its Spec; the results equal
// those without it (tested).
class MemoryCache {
 public:
  MemoryCache();
  ~MemoryCache();
  MemoryCache(const MemoryCache&) = delete;
  MemoryCache& operator=(const MemoryCache&) = delete;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};
PeakMemory peak_memory(const Spec& spec, const Layout& layout, MemoryCache* cache = nullptr);

// The memory warning of a layout that fits only with an allocator flush
// (MemoryEstimate::flush_risk), with its figures; empty when there is none.
std::string memory_warning_message(std::int64_t device_bytes, std::int64_t with_held_bytes, std::int64_t usable_bytes);
std::string memory_warning_message(const MemoryEstimate& e);

std::int64_t gpu_memory_bytes(const Cluster& c);
std::int64_t usable_memory_bytes(const Spec& s);

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// A stage that could need more than this is reported as needing exactly this
// (1 EiB: it fits nowhere), so that no 64-bit byte count overflows.
inline constexpr std::int64_t kSaturatedBytes = std::int64_t(1) << 60;

}  // namespace paraplan
