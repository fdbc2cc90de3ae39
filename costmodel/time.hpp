// Step time of a layout (DESIGN.md "Time model"):
//   step = compute + TP comm + PP comm + exposed DP comm + pipeline bubble + optimizer.
// Every term is the critical path of one optimizer step on one GPU, in seconds.
// Pure arithmetic on the spec: nothing here allocates (the search calls
// estimate_time once per candidate).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "costmodel/comm.hpp"
#include "costmodel/flops.hpp"
#include "costmodel/spec.hpp"

namespace paraplan {

struct StepTime {
  // step_s = compute_s + tp_comm_s + pp_comm_s + cp_comm_s + ep_comm_s + dp_comm_s + bubble_s + optimizer_s
  //          + host_wait_s.
  double step_s = 0;
  double compute_s = 0;    // m × (forward + backward + recompute) of the slowest stage
  double tp_comm_s = 0;    // m × TP/SP collectives of that stage (critical path)
  double pp_comm_s = 0;    // m × pipeline sends of that stage
  double cp_comm_s = 0;    // m × context-parallel ring exchange left exposed beside attention
  double ep_comm_s = 0;    // m × expert-parallel all-to-alls (and etp collectives) of that stage
  double dp_comm_s = 0;    // DP/ZeRO communication left exposed after overlap
  double bubble_s = 0;     // pipeline fill and drain
  double optimizer_s = 0;  // optimizer step on this rank's (sharded) parameters
  double host_wait_s = 0;  // m × the slowest stage's wait for the host's dispatch (StageMicrobatch::host_wait_s)
  // The step the ranking uses: step_s, raised where the predicted hardware FLOP utilization is above the
  // GPU's best published (kWarnMfuAboveBest) to the time that utilization allows,
  // step_s × hfu / best_published_mfu (docs/model.md "Decision rule"). The raw step_s is kept beside it.
  double clamped_step_s = 0;
  double dp_comm_total_s = 0;  // DP/ZeRO communication before overlap
  double microbatch_s = 0;     // one micro-batch, forward + backward, on the slowest stage
  int microbatches = 0;
  int critical_stage = 0;      // the pipeline stage with the slowest micro-batch

  double model_flops_per_step = 0;     // no recomputation (for MFU)
  double hardware_flops_per_step = 0;  // with recomputation (for HFU)
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;  // model FLOPs / step / GPUs, in TFLOP/s
  double mfu = 0;             // model FLOPs / (step × GPUs × peak)
  double hfu = 0;             // hardware FLOPs / (step × GPUs × peak)

  // Pipeline bubble as a fraction of the pipeline time (bubble + ideal, i.e.
  // the step less the DP tail and optimizer): (p−1)/(v·m + p−1).
  double bubble_fraction = 0;
  // The same bubble relative to the ideal (bubble-free) pipeline time: (p−1)/(v·m).
  double bubble_fraction_of_ideal = 0;
  static constexpr const char* kBubbleDefinition =
      "bubble_fraction = (p-1)/(v*m+p-1) of the pipeline time (Narayanan et al. 2021 eq. 1); "
      "bubble_fraction_of_ideal = (p-1)/(v*m)";
  // (tp_comm_s + pp_comm_s + cp_comm_s + ep_comm_s + dp_comm_s) / step_s.
  double exposed_comm_fraction = 0;

  // Where the model cannot vouch for this layout's time (StepTime::kWarn*
  // bits; warning_messages says why), with the figures the reasons quote.
  static constexpr unsigned kWarnTpAcrossNodes = 1u;  // the tp group spans nodes
  static constexpr unsigned kWarnSmallWork = 2u;      // per-layer work where fixed costs dominate
  static constexpr unsigned kWarnMfuAboveBest = 4u;   // MFU above the best published for the GPU
  static constexpr unsigned kWarnPipelinePoll = 8u;   // pipeline receives over the network polled with sleeps
  unsigned warnings = 0;
  int tp_nodes = 1;              // nodes one tp group spans
  double layer_forward_s = 0;    // one layer's forward per micro-batch on one GPU
  double best_published_mfu = 0; // the cluster's for the run's precision, 0 = not given
  bool fp8 = false;              // FP8 training: best_published_mfu is the cluster's best_published_mfu_fp8
  bool clamped() const { return clamped_step_s > step_s; }
  int tp = 1;                    // tensor-parallel ranks per stage (kWarnPipelinePoll's message)
  double p2p_poll_sleep_s = 0;   // the framework's poll period (TimeVariant::p2p_poll_sleep_s)
};

// The time model's stated uncertainty between two layouts of one plan, as a
// fraction of step time, from its measured errors (docs/verification.md: the
// Playbook's nanotron runs, median |error| 5.9 %; Megatron-LM's and NeMo's
// published FP8 rows, mean 5.9 %): the decision rule's tie band
// (planner/search.hpp) and the band validate reports time against.
inline constexpr double kTieBand = 0.05;

// A layer forward per micro-batch shorter than this is dominated by what the
// model does not price: a transformer layer's forward launches some 30
// kernels (norms, GEMMs, attention, rotary, activations, residuals) and each
// costs a few microseconds of launch and framework dispatch (JUDGEMENT:
// ~5 us per kernel, so 150 us of fixed cost matches the modelled work).
inline constexpr double kSmallLayerForwardS = 150e-6;

// One line per warning bit of `t`, saying why paraplan cannot vouch for it.
std::vector<std::string> warning_messages(const StepTime& t);

// One micro-batch on one pipeline rank (all its model chunks), in seconds.
struct StageMicrobatch {
  double forward_s = 0;   // GEMMs and memory-bound ops of the forward
  double backward_s = 0;  // backward, plus recomputation
  double tp_comm_s = 0;   // TP/SP collectives, forward and backward
  double pp_comm_s = 0;   // point-to-point sends and receives
  double cp_comm_s = 0;   // context-parallel K|V ring, exposed part
  double ep_comm_s = 0;   // expert-parallel all-to-alls and etp collectives of the MoE layers
  double zero3_s = 0;     // ZeRO-3 parameter gathers not hidden behind compute
  // The GPU waiting for the host: the framework's measured dispatch time of the
  // stage's layers (TimeVariant::host_layer_tp_s) less everything above, when it is more.
  double host_wait_s = 0;
  double params = 0;      // parameters one rank of the stage holds (before ZeRO sharding)
  // The same as the data-parallel collectives and the optimizer see them: the
  // routed experts' share reduces and shards over the expert data-parallel
  // group edp, not dp x cp, so it counts scaled by the ring volume
  // ((edp-1)/edp against (dp-1)/dp) and by the shard (dp x cp / edp).
  double dp_params = 0, optimizer_params = 0;
  double gpu() const { return forward_s + backward_s + tp_comm_s + pp_comm_s + cp_comm_s + ep_comm_s + zero3_s; }
  double total() const { return gpu() + host_wait_s; }
};

// Share of the launched tensor-core work that is useful: the GEMM's m×n
// output in tiles over `sms` SMs, the last wave part-empty and the edge
// tiles part-filled (tile and wave quantization; NVIDIA, Matrix
// Multiplication Background User's Guide, DU-09799-001, §3.1-3.2), for the
// best of cuBLAS's 128×256, 256×128 and 128×128 tiles. 1 when sms is 0.
double gemm_tile_utilization(const Gemm& g, int sms);
// Roofline time of one GEMM (Williams et al. 2009): the larger of its FLOPs at
// peak × gemm_efficiency × tile utilization and its operand bytes at HBM
// bandwidth × hbm_efficiency.
double gemm_time(const Gemm& g, const Cluster& c, int elem_bytes);
// The backward GEMMs of a forward m×k by k×n product: the input gradient
// (m×n by n×k) and the weight gradient (k×m by m×n).
Gemm gemm_input_gradient(const Gemm& g);
Gemm gemm_weight_gradient(const Gemm& g);
// FlashAttention-2's causal kernels as the SMs run them: `seq_heads` (sequence,
// head) pairs of `blocks` 128-row blocks each, one CTA per block, block i of a
// pair visiting i + 1 blocks of the other side under the mask; the SMs take the
// CTAs in launch order, each the next as it frees (list scheduling). The time
// of that schedule over the time of the same work spread evenly over `sms`
// (>= 1; 1 when sms is 0): with fewer CTAs than SMs the last block of a pair
// sets the pace, about twice the mean.
double causal_attention_waves(double seq_heads, int blocks, int sms);
// A memory-bound kernel: bytes / (HBM bandwidth × hbm_efficiency).
double memory_bound_time(double bytes, const Cluster& c);
// The same over strided operands (PyTorch's unvectorized elementwise path):
// bytes / (HBM bandwidth × strided_hbm_efficiency).
double strided_memory_time(double bytes, const Cluster& c);
// Bytes of one layer's memory-bound ops on one tp rank that run on strided
// operands (TimeVariant::strided_layer_ops), forward and backward.
struct StridedBytes {
  double forward = 0, backward = 0;
};
// The same GEMM in FP8 (Transformer Engine): peak_tflops_fp8, 1-byte operands.
double fp8_gemm_time(const Gemm& g, const Cluster& c);
// An attention-core GEMM (QK^T, PV): gemm_time at Cluster::attention_eff().
double attention_gemm_time(const Gemm& g, const Cluster& c, int elem_bytes);

// Transformer Engine's FP8 casts around one linear layer of a layout (the
// layer's GEMM `x`, forward shape), bytes of memory-bound traffic on one tp
// rank in its forward and in its backward (costmodel/time.cpp for the sources).
struct Fp8Casts {
  double forward = 0, backward = 0;
};
Fp8Casts fp8_cast_bytes(const Gemm& x, const Layout& l);

// Bytes one rank sends per pipeline boundary per micro-batch and direction:
// s·b·h activations, / tp with SP or Megatron's scatter-gather
// (Training::pipeline_scatter_gather), whole otherwise.
double pipeline_send_bytes(const Model& m, const Training& t, const Layout& l);
// The link between pipeline ranks (stages) a and b as a two-member group: on
// one node when every rank of stage a shares a node with its peer in stage b
// (Megatron order, the pipeline's ranks tp·cp·dp apart), else across nodes.
GroupPlacement pp_link(const Cluster& c, const Layout& l, int a, int b);
// Whether some link between neighbouring pipeline ranks crosses nodes.
bool pipeline_crosses_nodes(const Cluster& c, const Layout& l);
// Bytes one rank sends to other ranks in one expert-parallel all-to-all
// (dispatch, or combine the other way) per MoE layer and micro-batch: its
// s/cp·b/tp tokens x top-k x hidden x bytes x (ep−1)/ep (1/ep stays local).
double moe_alltoall_bytes(const Model& m, const Training& t, const Layout& l);

// One micro-batch on pipeline rank `stage` of a resolved layout.
StageMicrobatch stage_microbatch_time(const Spec& spec, const Layout& layout, int stage);

// The same micro-batch term by term, with its formula and numbers (explain
// --formulas): its terms add up to StageMicrobatch::total().
struct TimeTerm {
  std::string name, formula;
  double seconds = 0;
  std::string source;
};
std::vector<TimeTerm> stage_time_terms(const Spec& spec, const Layout& layout, int stage);
// The stage's data-parallel collectives over one step (dp·cp > 1): the gradient
// reduction in the framework's buckets, ZeRO's parameter all-gathers, and what
// of them the step waits for; empty without data parallelism.
std::vector<TimeTerm> stage_dp_terms(const Spec& spec, const Layout& layout, int stage);

// Per-search memo of what every layer costs per micro-batch (its GEMMs,
// attention, memory-bound ops and exposed TP collectives), which ZeRO and
// recomputation do not change: a search passes one to every estimate_time
// call on its Spec; the results equal those without it (tested).
class TimeCache {
 public:
  TimeCache();
  ~TimeCache();
  TimeCache(const TimeCache&) = delete;
  TimeCache& operator=(const TimeCache&) = delete;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Step time of a resolved layout (dp set: resolve_layout).
StepTime estimate_time(const Spec& spec, const Layout& layout, TimeCache* cache = nullptr);

// The time model's terms for the ranks of one pipeline stage over one step,
// in seconds: what `validate` compares with the phases a rank measured.
struct StageStepTerms {
  double forward_s = 0;    // m × forward compute
  double backward_s = 0;   // m × (backward + recomputation)
  double optimizer_s = 0;  // this stage's optimizer step
  double tp_comm_s = 0;    // m × TP/SP collectives
  double pp_comm_s = 0;    // m × pipeline sends and receives
  double cp_comm_s = 0;    // m × context-parallel ring exchange, exposed
  double ep_comm_s = 0;    // m × expert-parallel all-to-alls
  double bubble_s = 0;     // pipeline fill and drain (StepTime::bubble_s)
  double dp_comm_s = 0;    // every DP/ZeRO collective of the stage, overlapped or not
  double host_wait_s = 0;  // m × the GPU's wait for the host's dispatch
};
StageStepTerms stage_step_terms(const Spec& spec, const Layout& layout, int stage);

}  // namespace paraplan
