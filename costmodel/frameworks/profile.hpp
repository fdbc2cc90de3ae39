// A framework profile: how one training stack (Megatron-LM, DeepSpeed, PyTorch
// FSDP2/torchtitan, nanotron, or paraplan's own executor) allocates memory for
// the same model and layout. Profiles are data: every entry carries the source
// it was read from (repository@commit path:lines). costmodel/memory.cpp reads a
// profile and has no framework `if`s of its own. docs/frameworks.md lists every
// entry with its source.
#pragma once

#include <array>
#include <cstdint>

#include "costmodel/fixed_list.hpp"
#include "costmodel/layout.hpp"
#include "costmodel/model.hpp"

namespace paraplan {

enum class Category;

// Where an entry comes from: "owner/repo@commit path:lines" (or a paper).
using Source = const char*;

// A per-parameter buffer of model state: bytes per parameter of this rank's
// stage, whole or sharded over the data-parallel group (ceil(params / dp)).
struct StateBuffer {
  Category category;
  const char* name;
  double bytes_per_param;
  bool sharded;
  Source source;
  // Allocated only at the optimizer step, when the activations and the
  // backward's short-lived buffers are gone: it raises the stage's peak only
  // by what it exceeds them by (memory.cpp "optimizer step beyond the
  // backward's peak").
  bool step_only = false;
};

using StateBuffers = FixedList<StateBuffer, 8>;

enum class BucketRule {
  kNone,          // buckets are views of the gradient buffer, or counted as model state
  kShardedGrads,  // ZeRO >= 2: one bucket of gradients in the gradient dtype (paraplan's executor)
  kFixedIpg,      // ZeRO 1-2: a fixed-size bucket in the parameter dtype, whatever the model (DeepSpeed IPG)
};

// Which framework's mixture-of-experts layer a profile runs: the tensors its
// routing, token dispatch, grouped experts and combine save differ
// (costmodel/activations.cpp add_moe_mlp).
enum class MoeImpl {
  kMegatron,    // Megatron-core: all-to-all dispatcher, fused weighted SwiGLU (the default)
  kTorchtitan,  // torchtitan: fp32 router, argsort reorder, torch._grouped_mm experts, fp32 score multiply
  kDeepSpeed,   // DeepSpeed-MoE: fp32 gate, capacity slots (every expert padded to C), index_select dispatch
};

// What one layer's ops save beyond the op list every stack shares
// (costmodel/activations.cpp), per variant the framework runs.
struct ActivationVariant {
  // Unfused SwiGLU: the SiLU output is saved by the multiply, besides the
  // fc1 output that the split views keep alive (+ s·b·ffn/tp elements).
  bool swiglu_saves_silu_output = false;
  Source swiglu;
  // MHA only: the fused QKV output is copied to a contiguous [3, b, s, a, d]
  // tensor that Q (a view of it) keeps alive, and K, V are concatenated into
  // a second copy (+ 2·kv_width elements per token).
  bool mha_keeps_qkv_copy = false;
  Source mha_copy;
  // Each norm saves its fp32 statistics (rstd; + mean for LayerNorm) per token.
  bool norm_saves_stats = false;
  Source norm_stats;
  // Where the layer's op list (which module saves what) is read.
  Source layer_spec;
  // RMSNorm written in eager PyTorch (HF LlamaRMSNorm): it keeps an fp32
  // upcast of its input and the normalized activation-dtype tensor the weight
  // multiplies, not the input itself.
  bool rmsnorm_eager_upcast = false;
  Source rmsnorm_eager;
  // A mixture-of-experts layer's MLP, as this framework runs it.
  MoeImpl moe = MoeImpl::kMegatron;
  Source moe_source = "NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/moe/ (router.py:106-111, "
                      "token_dispatcher.py:660-751, experts.py:928-985)";
  // recompute=selective is the framework's per-op selective checkpointing
  // (torchtitan's "op" policy), not Megatron's attention-core recompute: inside
  // each block's checkpoint the outputs of every odd aten.mm and of SDPA are
  // saved, everything else is recomputed (op_sac_saved_tensors).
  bool op_sac = false;
  Source op_sac_source = "";
  // With sequence parallelism the column-parallel linears (QKV, fc1, the
  // output layer) save the all-gathered [s, b, h] input they multiply, not the
  // rank's sequence shard that Megatron keeps and gathers again in backward
  // (DTensor's ColwiseParallel behind an all-gather to Replicate: torchtitan).
  // Not applied to a mixture-of-experts layer's router and expert inputs or
  // multi-latent attention's projections (their DTensor plans not traced).
  bool sp_saves_gathered_linear_inputs = false;
  Source sp_gathered = "";
};

// The output layer and cross-entropy, as three tensors per logit: the
// lm-head output L (activation dtype), its fp32 upcast F (the same tensor as L
// when the activations are fp32) and the fp32 softmax S saved for backward
// (4 B, held by every stack; the same tensor as F when computed in place).
// What else is live at the loss's forward peak is what differs.
struct LossVariant {
  bool logits_live = true;        // L is still referenced at the peak
  bool upcast_live = false;       // F is referenced at the peak besides S
  bool softmax_in_place = false;  // S is computed in place in F (no tensor of its own)
  // fp32 or int64 per-token tensors live at the peak (row max, sum, target
  // logit, loss, masks), bytes per token.
  int row_bytes_per_token = 0;
  Source source;
  // L is freed before S, a larger request, is made: its block stays reserved.
  bool logits_block_stranded = false;
  Source stranded;
  // With the framework's fused cross-entropy (Training::cross_entropy_fusion),
  // fp32 copies of the logit shard live at the loss's peak beyond the above.
  int fused_extra_fp32 = 0;
  Source fused;
  // The loss's backward, where autograd runs PyTorch's own cross-entropy
  // (F.cross_entropy on fp32 logits): nll_loss_backward writes a dense fp32
  // gradient G and log_softmax_backward its output dX while S is still saved,
  // so fp32 logit-sized tensors live besides S at that moment (2: G and dX);
  // 0 where the framework's backward works in place in S (Megatron, nanotron).
  int backward_fp32_extra = 0;
  Source backward;
  // L (the activation-dtype logits) is freed before the backward and its
  // block is too small for dX, a new fp32 request: stranded (reserved only)
  // while the loss backward is the step's transient peak.
  bool backward_logits_stranded = false;
  // fp32 logit-sized tensors live at the forward peak beyond L, F and S: a
  // cross-entropy written out of separate PyTorch ops keeps its shifted logits
  // beside their exp or beside the log-probabilities it subtracts them into.
  int forward_fp32_extra = 0;
  // What the backward_fp32_extra tensors are (explain --formulas).
  const char* backward_tensors = "nll_loss_backward's gradient, log_softmax_backward's output";
};

// Bytes per logit live at the loss's forward peak besides the saved softmax S,
// for activations of `act_bytes` (aliasing as described above).
int loss_transient_bytes_per_logit(const LossVariant& v, int act_bytes);
// Every byte the loss holds at its forward peak for s·b tokens and `vocab_rows`
// logits per token: the saved fp32 softmax, the transient logits above and the
// per-token row tensors (what tests/oracle measures with PyTorch's profiler).
std::int64_t loss_forward_peak_bytes(const LossVariant& v, std::int64_t tokens, std::int64_t vocab_rows, int act_bytes);
// Every logit-sized byte live at the loss's backward peak (S, G, dX), 0 where
// the profile does not model a backward beyond the forward's tensors.
std::int64_t loss_backward_peak_bytes(const LossVariant& v, std::int64_t tokens, std::int64_t vocab_rows);

// Runtime memory outside the caching allocator, when the cluster spec does not
// give runtime_overhead_gib, and the allocator's own behaviour.
struct RuntimeVariant {
  bool cuda = true;  // false: paraplan's CPU executor (no context, no NCCL)
};

// The data-parallel gradient reduction's bucket size, as the framework sets it.
enum class ReduceBuckets {
  kTrainingDefault,  // Training::grad_bucket_params (paraplan's executor)
  kFixed,            // Profile::default_bucket_params parameters (DeepSpeed reduce_bucket_size)
  kMegatronDdp,      // max(40M, 1M x dp·cp) parameters with --overlap-grad-reduce, else the whole buffer
  kTorchDdp25MiB,    // torch DDP bucket_cap_mb 25: 25 MiB of gradients in the parameter dtype
  kPerLayer,         // one collective per transformer block (FSDP's fully_shard units)
};

// What the framework's own code costs in time beyond the GEMMs and the
// layer's elementwise ops every stack shares (costmodel/time.cpp).
struct TimeVariant {
  // Cross-entropy over the vocab-parallel logits: full passes over the fp32
  // logits (4 B per logit each, read or write) in forward and backward, beside
  // the cast of the activation-dtype logits to fp32 and of the gradient back.
  int ce_fp32_passes_forward = 0;
  int ce_fp32_passes_backward = 0;
  Source ce = "paraplan's executor: the cast of the logits to fp32 and back only";
  // Gradient accumulation as a separate pass after every micro-batch's
  // backward, bytes per parameter of the stage (0: fused into the weight-
  // gradient GEMM, or gradients reduced per micro-batch).
  double grad_accum_bytes_per_param = 0;
  Source grad_accum = "";
  // The same pass where the framework's fusion is switched off
  // (Training::gradient_accumulation_fusion false), bytes per parameter for
  // the training's dtypes; nullptr: none.
  double (*unfused_grad_accum_bytes_per_param)(const Training&) = nullptr;
  Source unfused_grad_accum = "";
  // Tensor parallelism in the backward of a column-parallel linear: with SP the
  // saved input shard is all-gathered again for the weight gradient, that
  // gather overlapping the input-gradient GEMM, and the input gradient's
  // reduce-scatter (all-reduce without SP) overlapping the weight-gradient
  // GEMM. false: neither the re-gather nor any overlap (paraplan's executor
  // keeps the gathered input and runs its collectives in line).
  bool tp_backward_overlap = false;
  Source tp_backward = "";
  // The forward all-gather before a column-parallel linear overlaps the GEMM
  // of the rank's own input shard (1/tp of it).
  bool tp_forward_shard_overlap = false;
  Source tp_forward = "";
  // Copies and unfused elementwise passes a layer's forward makes beyond the
  // shared list (costmodel/time.cpp layer_memory_bound_bytes), in elements of
  // the activation dtype read plus written per token on one tp rank, per unit
  // of the Q width, the K|V width and (gated MLPs) the ffn width; the backward
  // moves twice as much, as for every memory-bound op.
  double layer_copies_q = 0, layer_copies_kv = 0, layer_copies_ffn = 0;
  Source layer_copies = "";
  // The cross-entropy's passes where the framework fuses it
  // (Training::cross_entropy_fusion; -1: no fused variant, the passes above).
  int fused_ce_fp32_passes_forward = -1;
  int fused_ce_fp32_passes_backward = -1;
  Source fused_ce = "";
  // ZeRO-1/2: the all-gather of the updated parameters after the optimizer
  // step can run beside the next step's forward (Megatron with
  // --overlap-param-gather, Training::overlap_param_gather); false: it runs
  // whole, before the next forward (DeepSpeed, nanotron), on the step's path.
  bool param_gather_overlaps_forward = true;
  Source param_gather = "";
  // Mixtures of experts: passes the framework's own MoE code makes beyond the
  // shared list (costmodel/time.cpp), each a read or a write of one tensor, in
  // the activation dtype or in fp32: over the rank's k routed copies of h (the
  // combine) and over each token's h (the router's input).
  int moe_combine_act_passes = 0, moe_combine_fp32_passes = 0;
  int moe_router_act_passes = 0, moe_router_fp32_passes = 0;
  Source moe_passes = "";
  // Where the expert all-to-alls are read, and that they are exposed.
  Source moe_alltoall = "NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/moe/token_dispatcher.py:682-900; "
                        "model_parallel_config.py:343 (no overlap by default)";
  // How many parameters one collective of the data-parallel gradient reduction
  // carries where the spec gives no training.grad_bucket_params (the time
  // model's buckets; ReduceBuckets), and why.
  ReduceBuckets reduce_buckets = ReduceBuckets::kTrainingDefault;
  Source reduce_bucket = "Training::grad_bucket_params (40M parameters)";
  // ZeRO-1/2's parameter all-gather after the step is one collective of the
  // whole shard, not the reduction's buckets (nanotron).
  bool param_gather_one_collective = false;
  // The framework's layer copies and its unfused gated MLP run on strided
  // operands (permuted views copied .contiguous(), the activation and product
  // on the halves of a split gate|up output): PyTorch's elementwise kernels
  // take their unvectorized path there (Cluster::strided_hbm_efficiency). A
  // copy's backward moves the gradient once (the backward of a permute or a
  // view is a view, materialized by its consumer); the unfused GLU's backward
  // makes glu_backward_passes passes per ffn element and token. false: every
  // memory-bound op at hbm_efficiency, the backward twice the forward.
  bool strided_layer_ops = false;
  int glu_backward_passes = 0;
  Source strided_layer = "";
  // Gradient clipping over the whole fp32 gradient buffer of the stage, not
  // the optimizer's ZeRO shard: bytes per parameter (the norm's read, the
  // in-place scale's read + write). 0: the norm reads the shard's gradient
  // once more beside the update (costmodel/time.cpp optimizer_step_time).
  double clip_full_grad_bytes_per_param = 0;
  Source clip = "";
  // The host's time to dispatch one layer's forward and backward for one
  // micro-batch (the framework's Python, autograd, kernel and collective
  // launches) where tp > 1, measured: a micro-batch of a stage lasts at least
  // its layers times this, however little the GPU has to do (0: not measured,
  // no floor). A recomputed forward dispatches a third of it again (JUDGEMENT:
  // a backward launches about two ops per forward op).
  double host_layer_tp_s = 0;
  Source host_layer = "";
  // With interleaving (vpp > 1) and Training::overlap_p2p_comm, the pipeline
  // sends of the steady phase run beside the other direction's next chunk
  // (costmodel/time.cpp pipeline_send_overlap). false: every send in line.
  bool p2p_overlaps_interleaved = false;
  Source p2p_overlap = "";
  // Whether the collectives the framework launches asynchronously really run
  // beside compute on the measured runs: its data-parallel buckets beside the
  // backward that readies them, its TP all-gathers and reduce-scatters beside
  // the GEMM they were launched before (tp_forward_shard_overlap,
  // tp_backward_overlap). false: MEASURED in line with compute, whatever the
  // code intends (each collective's whole time on the step's path). Megatron's
  // --tp-comm-overlap (userbuffers) is not an NCCL collective and keeps its
  // overlap.
  bool collectives_overlap_compute = true;
  Source collectives_overlap = "";
  // The pipeline's receives poll their metadata exchange with sleeps of this
  // period (the host sleeps whenever the transfer is not complete at a poll);
  // 0: no such polling. Where a pipeline link crosses nodes, tp > 1 and a
  // micro-batch of the slowest stage is shorter than one sleep, the time
  // model cannot vouch for the layout (StepTime::kWarnPipelinePoll).
  double p2p_poll_sleep_s = 0;
  Source p2p_poll = "";
  // That time for a layout of `tp`: 0 where it is not measured (tp 1, or none given).
  double host_layer_s(int tp) const { return tp > 1 ? host_layer_tp_s : 0.0; }
  // The loss over vocab-parallel logits (tp > 1) where the framework runs
  // other ops there (torchtitan's loss-parallel cross-entropy): its fp32
  // passes; -1: the same as at tp = 1.
  int ce_vocab_parallel_passes_forward = -1;
  int ce_vocab_parallel_passes_backward = -1;
  Source ce_vocab_parallel = "";
  // The passes and their source for a run: the fused ones when asked for and the framework has them, else the
  // vocab-parallel ones at tp > 1 where it has them.
  bool ce_fused(bool fusion) const { return fusion && fused_ce_fp32_passes_forward >= 0; }
  bool ce_parallel(bool fusion, int tp) const {
    return !ce_fused(fusion) && tp > 1 && ce_vocab_parallel_passes_forward >= 0;
  }
  int ce_forward(bool fusion, int tp) const {
    return ce_fused(fusion)           ? fused_ce_fp32_passes_forward
           : ce_parallel(fusion, tp) ? ce_vocab_parallel_passes_forward
                                     : ce_fp32_passes_forward;
  }
  int ce_backward(bool fusion, int tp) const {
    return ce_fused(fusion)           ? fused_ce_fp32_passes_backward
           : ce_parallel(fusion, tp) ? ce_vocab_parallel_passes_backward
                                     : ce_fp32_passes_backward;
  }
  Source ce_source(bool fusion, int tp) const {
    return ce_fused(fusion) ? fused_ce : ce_parallel(fusion, tp) ? ce_vocab_parallel : ce;
  }
};

// Where the terms every profile shares come from (costmodel/memory.cpp): the
// batch a micro-batch keeps while in flight (token ids on the first stage, for
// the embedding's backward; labels on the last, for the loss's), the bytes of
// one token id or label, the final norm's and output layer's saved inputs, a
// stage output or input gradient while the pipeline sends it, the tied
// embedding's whole gradient (ZeRO >= 2, pp > 1), the embedding's own tensors
// (its dropout mask; with sequence parallelism its partial sum before the
// reduce-scatter).
struct TermSources {
  int token_bytes = 4;
  Source batch = "";
  Source output_input = "";
  Source pipeline_send = "";
  Source tied_grad = "";
  Source embedding = "";
};

struct Profile {
  Framework id;
  const char* name;
  const char* description;
  // ZeRO stages (0-3) the framework has, and what a layout asking for another is told.
  std::array<bool, 4> zero_supported;
  const char* zero_note;
  // Recompute policies it has (none, selective, full).
  std::array<bool, 3> recompute_supported;
  const char* recompute_note;
  // Model-state buffers (weights, gradient buffers, optimizer state) for a layout.
  void (*state_buffers)(const Training&, const Layout&, StateBuffers*);
  ActivationVariant act;
  LossVariant loss;
  // The sequence-parallel all-gather target is a persistent buffer (never freed).
  bool sp_gather_buffer_persistent;
  Source sp_gather;
  // With sequence parallelism each layer's row-parallel outputs (attention-out
  // and fc2, full [s, b, h]) are reduce-scattered through torch.distributed:
  // ProcessGroupNCCL records the NCCL stream on the input, so the caching
  // allocator keeps each block allocated until the collective has finished on
  // the GPU; with the host a forward ahead of the device (no sync inside the
  // forward), a micro-batch's worth of them are still held at its end.
  int held_reduce_scatter_inputs_per_layer;
  Source held_reduce_scatter;
  // Gradient reduce buckets that are memory of their own (not views of a
  // gradient buffer), and their default size in parameters when the spec gives none.
  BucketRule bucket_rule;
  std::int64_t default_bucket_params;
  Source bucket;
  // Sharded parameters (ZeRO-3, and FSDP's ZeRO-2): unsharded copies live at
  // once (current + prefetched), and per unsharded group in backward the
  // extra bytes per parameter (unsharded gradients + reduce-scatter input).
  int gathered_groups;
  double group_grad_bytes_per_param;
  // ZeRO-2 keeps the whole stage unsharded from forward to the end of backward
  // (FSDP2 reshard_after_forward=False).
  bool zero2_keeps_params_unsharded;
  Source gathered;
  // Why recompute_method / recompute_layers (Megatron-LM's --recompute-method,
  // --recompute-num-layers) do not apply; nullptr: the framework has them.
  const char* partial_recompute_note = nullptr;
  // Why context parallelism (cp > 1) is not this framework's; nullptr: it has
  // ring-attention context parallelism.
  const char* cp_note = nullptr;
  // Bytes per parameter the data-parallel gradient reduction (and the
  // optimizer's read of the gradients) moves; nullptr: training.grad_dtype.
  double (*grad_reduce_bytes)(const Training&) = nullptr;
  Source grad_reduce = "";
  TimeVariant time{};
  // The framework splits its pipeline by compute cost (layout balance=cost,
  // CostSplit) rather than by layer counts; every pp > 1 layout of it does.
  bool cost_balanced_pipeline = false;
  Source cost_balance = "";
  // Where the cuBLAS workspace comes from: PyTorch's caching allocator (it
  // shows in allocated and reserved) or a cudaMalloc of the framework's own.
  bool cublas_workspace_in_allocator = true;
  // The framework's launcher turns on the caching allocator's expandable
  // segments: blocks are split from one growing segment at 512 B, so an
  // activation of 10 MiB or more is not rounded up to a 2 MiB segment (no
  // segment rounding slack; a block is left whole only when the free tail it
  // comes from exceeds it by 1 MiB or less, not modelled); what is freed stays
  // where it is, so a freed block too small for the next request still strands.
  bool expandable_segments = false;
  Source expandable = "";
  // Device memory the framework's process takes outside any allocator
  // besides the CUDA context, cuBLAS workspace and NCCL buffers, in MiB.
  double runtime_extra_mib = 0;
  Source runtime_extra = "";
  // Why a mixture-of-experts model cannot be planned under this framework;
  // nullptr: it has MoE layers, modelled as ActivationVariant::moe says.
  const char* moe_note = nullptr;
  // What MoE under this framework needs of a layout, or why not; nullptr: any
  // layout the expert grid allows (costmodel/spec.cpp checks ep, etp, sp).
  const char* (*moe_layout_unsupported)(const Model&, const Layout&) = nullptr;
  // Every expert's input is a buffer of capacity C slots, whatever the routing
  // (DeepSpeed-MoE): the rows a rank computes are the capacity factor x the
  // mean (the busiest expert's load when dropless), at any ep.
  bool moe_padded_to_capacity = false;
  Source moe_capacity = "";
  // The framework's GEMMs run in Transformer Engine, which keeps its own
  // cuBLAS workspaces (Cluster::te_cublas_workspace_mib each) inside the
  // caching allocator: one for its GEMMs, one per compute stream (4) once a
  // grouped GEMM runs (the experts'), three more for userbuffers
  // (--tp-comm-overlap); where it says so.
  Source te_workspaces = nullptr;
  // Where the framework trains a model's multi-token-prediction modules
  // (Training::mtp); nullptr: it has none to train.
  Source mtp = nullptr;
  // Why recompute=selective (the framework's own, ActivationVariant::op_sac)
  // is not modelled for this model, layout and training; nullptr when it is.
  const char* (*selective_unsupported)(const Model&, const Layout&, const Training&) = nullptr;
  // With pp > 1 and tp > 1 the pipeline engine keeps each in-flight
  // micro-batch's stage output, until its backward, as this rank's 1/tp
  // partition of it (DeepSpeed's pipe_partitioned); nullptr: it keeps none
  // beyond the layers' saved tensors.
  Source pipe_output_partition = nullptr;
  // Whether the blocks held for the reduce-scatter (held_reduce_scatter_
  // inputs_per_layer) count in max_memory_allocated as well as in reserved.
  // Where ProcessGroupNCCL records the NCCL stream on the input (PyTorch's
  // default), the framework's free lowers allocated at once and only the
  // segments wait for the stream (MemoryBreakdown::held_for_streams).
  // The reason goes in held_reduce_scatter.
  bool held_in_allocated = false;
  // The loss when the logits are vocab-parallel (tp > 1), where the framework
  // computes it another way (torchtitan's loss-parallel cross-entropy);
  // has_loss_vocab_parallel false: `loss` at every tp.
  bool has_loss_vocab_parallel = false;
  LossVariant loss_vocab_parallel{};
  const LossVariant& loss_for(int tp) const { return tp > 1 && has_loss_vocab_parallel ? loss_vocab_parallel : loss; }
  TermSources terms{};
  // Why a GPipe (all forwards, then all backwards) pipeline is not this
  // framework's; nullptr: it has one.
  const char* gpipe_note = nullptr;
  // DeepSpeed ZeRO-3 gathers module by module (its largest weight: largest_grad_group), prefetches up to
  // training.zero3_prefetch_bucket_size more within training.zero3_max_live_parameters, and keeps what is reused
  // within training.zero3_max_reuse_distance (Source: its coordinator); nullptr: gathered_groups x the largest layer.
  Source gathered_by_prefetch_bucket = nullptr;
};

// A profile whose ZeRO-1/2 parameter all-gather runs whole after the
// optimizer step (TimeVariant::param_gather_overlaps_forward false), for `src`.
inline Profile with_post_step_param_gather(Profile p, Source src) {
  p.time.param_gather_overlaps_forward = false;
  p.time.param_gather = src;
  return p;
}

// A profile whose gradient reduction runs in `rule`'s buckets (TimeVariant::reduce_buckets), for `src`.
inline Profile with_reduce_buckets(Profile p, ReduceBuckets rule, Source src) {
  p.time.reduce_buckets = rule;
  p.time.reduce_bucket = src;
  return p;
}

// A profile whose GEMMs run in Transformer Engine, as `src` says (Profile::te_workspaces).
inline Profile with_te_workspaces(Profile p, Source src) {
  p.te_workspaces = src;
  return p;
}

// A profile that trains multi-token-prediction modules, as `src` says (Profile::mtp).
inline Profile with_mtp(Profile p, Source src) {
  p.mtp = src;
  return p;
}

// A profile with no mixture-of-experts layers modelled, and why (Profile::moe_note).
inline Profile without_moe(Profile p, const char* why) {
  p.moe_note = why;
  return p;
}

// Why a mixture-of-experts model cannot run under the framework with this
// layout; nullptr if it can (or the model is dense).
const char* moe_unsupported(const Profile& p, const Model& m, const Layout& l);

// The rows an expert rank computes over the balanced mean k x tokens, under a
// framework (Training::moe_expert_load, or always padded: Profile::moe_padded_to_capacity).
double moe_expert_load(const Profile& p, const Training& t, int ep);

// What a framework's gradient reduction moves per parameter, in bytes.
double grad_reduce_bytes(const Profile& p, const Training& t);

const Profile& profile(Framework f);

// Per-framework tables (costmodel/frameworks/<name>.cpp).
const Profile& megatron_profile();
const Profile& deepspeed_profile();
const Profile& fsdp_profile();
const Profile& nanotron_profile();
const Profile& paraplan_profile();

// The reduce-bucket size a layout uses: the spec's, else the framework's default.
std::int64_t bucket_params(const Profile& p, const Training& t);

// Why a layout asks for something the framework does not have; nullptr if it does not.
const char* framework_unsupported(const Profile& p, const Layout& l, const Model* m = nullptr,
                                  const Training* t = nullptr);

}  // namespace paraplan
