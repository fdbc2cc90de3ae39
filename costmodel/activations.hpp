// Activations as a per-op list of the tensors each op saves for its backward
// (shape, dtype, how tensor/sequence parallelism shards it). Korthikanti et al.
// 2022 ("Reducing Activation Recomputation in Large Transformer Models", §4)
// count exactly these tensors for a GPT block; listing them per op lets SwiGLU,
// GQA, RMSNorm, no-dropout and flash attention come out right too.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "costmodel/fixed_list.hpp"
#include "costmodel/frameworks/profile.hpp"
#include "costmodel/layout.hpp"
#include "costmodel/model.hpp"

namespace paraplan {

enum class Shard {
  kNone,  // replicated on every tp rank
  kTp,    // split over tp (heads or ffn columns)
  kSp,    // split over tp along the sequence only with sequence parallelism
};

enum class ElemKind { kAct, kMask, kFp32, kIndex, kInt32 };  // activation dtype, 1-byte mask, fp32, int64 index, int32

struct SavedTensor {
  const char* op;
  const char* tensor;
  std::int64_t width;      // elements per token (s·b·width)
  std::int64_t quad_heads; // plus s·b·heads·s elements for score-shaped tensors
  ElemKind kind;
  Shard shard;
  bool core_attention;     // dropped by selective recompute (re-run from Q, K, V)
  bool linear_input = false;  // a transformer linear layer's input: 1 byte under FP8 (TE keeps the FP8 cast)
  // Tokens an expert rank received: the etp ranks' tokens gathered (x etp).
  bool per_etp = false;
  // Sized by the tokens routed to the rank's experts: x ActShape::expert_load.
  bool expert_rows = false;
  // Elements whatever the tokens (a per-layer tensor: a weight's cast, group offsets).
  std::int64_t fixed = 0;
  // Only with expert parallelism (ActShape::ep > 1).
  bool ep_only = false;
  // Elements per token divided by ActShape::ep (a rank's local experts' share).
  bool per_local_expert = false;
  // Only when each local expert's input is a strided slice of the all-to-all
  // output (ep > 1 and more than one local expert): a linear saves its own
  // contiguous copy of it.
  bool strided_only = false;
};

// A dense layer, or a mixture-of-experts layer (router, routed and shared
// experts in place of the MLP). Attention is multi-latent when the model says so.
enum class LayerKind { kDense, kMoe };

using TensorList = FixedList<SavedTensor, 48>;

struct ActShape {
  std::int64_t s, b;  // sequence length, micro-batch size
  int tp;
  bool sp;
  int act_bytes;      // bytes of the activation dtype
  bool fp8 = false;   // FP8 training: linear inputs saved as their FP8 (column-wise) cast
  int etp = 1;        // expert tensor-parallel size (MoE layers)
  // The busiest expert rank's routed tokens over the balanced mean
  // (Training::moe_expert_load); 1 = perfectly balanced.
  double expert_load = 1.0;
  int ep = 1;         // expert-parallel size (MoE layers)
  int local_experts = 1;     // routed experts per rank (num_experts / ep)
};

// Bytes sized by the tokens routed to an expert rank, on the busiest one:
// x ActShape::expert_load, rounded to the byte.
inline std::int64_t at_expert_load(std::int64_t bytes, const ActShape& a) {
  return a.expert_load == 1.0 ? bytes : std::int64_t(std::llround(double(bytes) * a.expert_load));
}

// Bytes of one saved tensor for one micro-batch on one tp rank.
std::int64_t tensor_bytes(const SavedTensor& t, const ActShape& a);

// What one transformer layer saves with no recomputation, under a framework's
// variants (fused or unfused SwiGLU, extra QKV copies, norm statistics).
TensorList layer_saved_tensors(const Model& m, bool flash_attention, const ActivationVariant& v = {}, LayerKind kind = LayerKind::kDense);
// Whether a saved tensor exists under this shape (ep_only, strided_only).
inline bool saved_under(const SavedTensor& t, const ActShape& a) {
  return (!t.ep_only || a.ep > 1) && (!t.strided_only || (a.ep > 1 && a.local_experts > 1));
}
// What the first stage saves for the embedding, and the last for the final
// norm, output layer and cross-entropy.
// torchtitan's per-op selective activation checkpointing (ActivationVariant::op_sac)
// of a dense block, tp = 1: what a block keeps between its forward and backward.
TensorList op_sac_saved_tensors(const Model& m, bool flash_attention);
TensorList embedding_saved_tensors(const Model& m);
TensorList output_saved_tensors(const Model& m, const ActivationVariant& v);

// Bytes one layer keeps for backward per micro-batch under a recompute mode:
// none keeps all; selective drops the attention core's tensors (Korthikanti
// §5.1); full keeps only the layer input (Chen et al. 2016).
std::int64_t layer_activation_bytes(const Model& m, bool flash, Recompute r, const ActShape& a,
                                    const ActivationVariant& v = {}, LayerKind kind = LayerKind::kDense);

// The caching allocator's rounding of one layer's saved tensors: a request of
// 10 MiB or more gets a segment rounded up to 2 MiB (CUDACachingAllocator.cpp
// kMinLargeAlloc, kRoundLarge); the remainder is reserved, not allocated.
std::int64_t layer_rounding_slack(const Model& m, bool flash, Recompute r, const ActShape& a,
                                  const ActivationVariant& v = {}, LayerKind kind = LayerKind::kDense);

// Peak of the short-lived buffers around one layer (everything that is not a
// saved activation, a parameter or a communication buffer), and where it
// happens. It walks the same order of allocations and frees as the executor
// (validate/layer.cpp): the forward's row-parallel partial sums, the backward's
// gradient buffers one op at a time, with the incoming residual gradient alive
// throughout, plus whatever the recompute mode re-creates (full: every saved
// tensor but the input; selective: the attention core, during its backward).
struct TransientPeak {
  std::int64_t bytes = 0;
  const char* phase = "";
  const char* source = "";  // where its buffers come from (costmodel/memory.cpp sets it per framework)
};
TransientPeak layer_transient_peak(const Model& m, bool flash, Recompute r, const ActShape& a,
                                   const ActivationVariant& v = {}, LayerKind kind = LayerKind::kDense);
// The same from a layer's saved bytes with no recompute (`none`) and of its
// attention core alone (`core`), for callers that have them.
TransientPeak layer_transient_peak(const Model& m, bool flash, Recompute r, const ActShape& a, std::int64_t none,
                                   std::int64_t core, LayerKind kind, MoeImpl moe = MoeImpl::kMegatron);

// One pass over a layer's saved tensors: its bytes and rounding slack with no
// recompute, with selective recompute (the attention core dropped) and with
// full recompute (the layer input) - what layer_activation_bytes and
// layer_rounding_slack give for each mode.
struct LayerActivationSummary {
  std::int64_t none = 0, selective = 0, input = 0;
  std::int64_t slack_none = 0, slack_selective = 0, slack_input = 0;
  std::int64_t bytes(Recompute r) const { return r == Recompute::kNone ? none : r == Recompute::kSelective ? selective : input; }
  std::int64_t slack(Recompute r) const {
    return r == Recompute::kNone ? slack_none : r == Recompute::kSelective ? slack_selective : slack_input;
  }
};
LayerActivationSummary layer_activation_summary(const Model& m, bool flash, const ActShape& a, const ActivationVariant& v,
                                                LayerKind kind);

}  // namespace paraplan
