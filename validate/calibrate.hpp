// Calibration (`paraplan calibrate`): measures, on the backend at hand and
// through the same Device and Communicator the executor uses, what the time
// model (costmodel/time.cpp, comm.cpp) needs, and fits its parameters:
//
//   GEMMs           time of Device::gemm by shape        -> peak FLOP/s, gemm_efficiency
//   copies          Device::copy of large buffers        -> hbm_bandwidth
//   non-GEMM work   the executor's kernels of a layer,   -> hbm_efficiency
//                   of the embedding/output and of Adam
//   training steps  the executor's whole steps on one    -> gemm_efficiency and
//                   rank (every rank at once)               hbm_efficiency, refitted
//   collectives     all-reduce, all-gather, reduce-      -> α (latency per step) and β
//                   scatter by size and group size          (bandwidth) of the link
//
// Every fit is a least-squares problem on the relative error (each sample
// weighs the same whatever its size), solved with Eigen, and evaluates the
// time model's own functions (gemm_time, stage_microbatch_time, estimate_time,
// ring_allreduce_time, allgather_time, reducescatter_time): the fitted numbers
// are the ones that make the model's predictions of the measured samples best. Each sample keeps its
// fitted time, so the report shows measured against fitted, sample by sample.
// Bus bandwidth follows nccl-tests (docs/calibration.md; costmodel/comm.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "costmodel/comm.hpp"
#include "costmodel/layout.hpp"
#include "costmodel/model.hpp"
#include "validate/allocator.hpp"
#include "validate/comm.hpp"
#include "validate/device.hpp"

namespace paraplan::validate {

// How each sample is timed: `warmup` untimed calls, then `repetitions` timed
// runs of as many calls as fill `min_seconds`; the median run counts (as
// validate's step time is the median step).
struct TimingOptions {
  int warmup = 2;
  int repetitions = 5;
  double min_seconds = 0.02;
};

// ---- GEMMs ----

// One Device::gemm call as the executor makes it: y = x W^T (forward),
// dx = dy W (input gradient), dW += dy^T x (weight gradient, accumulating).
struct GemmCase {
  std::string name;  // e.g. "gpt-small t64 tp1 fc1 fwd", "square 1024"
  std::int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  bool accumulate = false;  // beta = 1
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

struct GemmSample {
  GemmCase shape;
  DType dtype = DType::kBf16;  // of A, B and C (fp32 accumulation)
  double seconds = 0;          // one call
  double fitted_s = 0;         // the time model's gemm_time with the fitted cluster
  double flops_per_s() const { return seconds > 0 ? shape.flops() / seconds : 0; }
};

// The GEMMs of one transformer layer of the validator's test models
// (tests/data/validate: gpt-small, llama-small) at the micro-batch sizes of the
// timing specs, tp 1 and 2, and of larger layers, plus square n^3 GEMMs.
// quick: fewer of them (for tests). training_shapes (a GPU): also Llama-2-7B's
// layer at a 4096-token micro-batch (tp 1, 2, 8) and squares up to 8192, where
// a GPU's GEMMs leave the launch-bound regime the small shapes measure.
std::vector<GemmCase> gemm_cases(bool quick, bool training_shapes = false);

// Times each case on `dev` with buffers from `mem` (every rank of a run calls it
// at once, as ranks compute at once in a training step).
std::vector<GemmSample> measure_gemms(Device& dev, MemoryResource& mem,
                                      const std::vector<GemmCase>& cases, DType dtype,
                                      const TimingOptions& opt);

// ---- memory bandwidth and the work outside the GEMMs ----

// Device::copy of `elements` elements: bytes = read + written.
struct CopySample {
  std::int64_t elements = 0;
  DType dtype = DType::kBf16;
  double seconds = 0;
  double bytes() const { return 2.0 * double(elements) * storage_bytes(dtype); }
  double bytes_per_s() const { return seconds > 0 ? bytes() / seconds : 0; }
};
// Large copies (beyond the last-level cache): the sustained memory bandwidth.
std::vector<std::int64_t> copy_sizes(bool quick);
std::vector<CopySample> measure_copies(Device& dev, MemoryResource& mem, const std::vector<std::int64_t>& elements,
                                       DType dtype, const TimingOptions& opt);

// What the executor does outside its linear-layer GEMMs, which the time model
// charges as memory-bound work (plus the attention core):
//   kLayer    one transformer layer, forward + backward: norms, bias adds, RoPE,
//             the attention core, dropout, activation, residual adds;
//   kEnds     the embedding (lookup, positions, dropout) and the output layer
//             (final norm, vocab-parallel cross-entropy), forward + backward;
//   kAdam     one Adam step over every parameter of the model.
enum class WorkKind { kLayer, kEnds, kAdam };
const char* work_kind_name(WorkKind k);

struct WorkCase {
  WorkKind kind = WorkKind::kLayer;
  std::string model;  // a name from work_models(): "gpt-small", "llama-small", ...
  int seq = 0;        // sequence length (micro-batch size 1, tp 1)
};

struct WorkSample {
  WorkCase what;
  DType dtype = DType::kBf16;
  double seconds = 0;   // measured: the sum of its kernels' times
  double fitted_s = 0;  // the time model's time for the same work (model_work_time)
  std::vector<std::pair<std::string, double>> parts;  // kernel name, seconds (for the report)
};

// The models the work samples use, the validator's test models among them
// (tests/data/validate/gpt-small.yaml, llama-small.yaml), with the training
// set-up of their specs (flash attention for llama only).
std::vector<std::string> work_models();
std::vector<WorkCase> work_cases(bool quick);
std::vector<WorkSample> measure_work(Device& dev, MemoryResource& mem, const std::vector<WorkCase>& cases,
                                     DType dtype, const TimingOptions& opt);

// The time model's seconds for a work sample on cluster `c`, through the
// model's public functions (nothing re-derived here): a layer is the step of
// stage_microbatch_time from one layer to two, less its linear GEMMs
// (3 × gemm_time: forward, input and weight gradient); the ends are the one-
// layer stage less a layer and the logits GEMMs; Adam is estimate_time's
// optimizer_s of a one-GPU layout.
double model_work_time(const WorkSample& s, const Cluster& c);

// ---- whole training steps ----

// Kernels timed one by one run on warm caches and skip what a step also does
// (allocating and zeroing activations, copies between kernels, the next
// kernel finding its inputs evicted). So the last measurement is the real
// thing: the executor's training steps of a work model, every rank at once.
// Most cases are data-parallel over all the ranks (ZeRO 0: one gradient
// all-reduce per step); the others split the model (tp, sp) or shard the
// gradients (ZeRO 2) so that a step makes hundreds of collectives, each
// waiting for the slower rank: they price what a collective costs inside a
// step, which back-to-back timings miss.
struct StepCase {
  std::string model;  // a name from work_models()
  int seq = 0;        // sequence length
  int batch = 0;      // sequences per step per data-parallel rank (= micro-batches)
  int tp = 1;         // tensor-parallel ranks; dp = ranks / tp
  bool sp = false;    // sequence parallelism (with tp > 1)
  int zero = 0;       // ZeRO stage
};
// "dp", "tp2 sp", "zero2", ...: the layout of a case, for reports.
std::string step_layout_label(const StepCase& c);
// The layout a case runs on `ranks` ranks (dp = ranks / tp, micro-batch 1).
Layout step_layout(const StepCase& c, int ranks);
// Whether a case can run on `ranks` ranks (tp divides them; ZeRO needs dp ≥ 2).
bool step_case_fits(const StepCase& c, int ranks);
struct StepSample {
  StepCase what;
  DType dtype = DType::kBf16;
  // Ranks of the step (each data-parallel rank runs `what.batch` sequences
  // and the gradient collectives join them); 1: one rank alone.
  int ranks = 1;
  // Median step after the warm-up steps, over runs of steps that add up to
  // 50 × TimingOptions::min_seconds of measured time.
  double seconds = 0;
  double fitted_s = 0;  // estimate_time(...).step_s with the fitted cluster
};
// The work models at sequence lengths 32 and 128 (gpt-h256, llama-h256: 128),
// data-parallel; then gpt-small and llama-small with tp 2 + sp and with ZeRO 2
// (measured only where step_case_fits). Length 64, which the time check
// (bench/calibration_check.py) validates, is left out of the fit on purpose.
// quick: gpt-small and llama-small at 32, data-parallel.
std::vector<StepCase> step_cases(bool quick);
// `world` (may be null): every rank's communicator; the ranks start each case
// together after a barrier, so that they run their steps at the same time as
// the ranks of a training step do (run alone, a rank gets the machine's caches
// and memory bandwidth to itself and measures steps up to 30% faster here).
// `groups` (optional, with `world`): the groups of a layout over all ranks
// (tp, dp = world size / tp, pp = 1); then every step is a real step of that
// layout, its collectives included. Without them, or on one rank, only the
// cases that fit one rank are measured, alone.
std::vector<StepSample> measure_steps(Device& dev, MemoryResource& mem, const std::vector<StepCase>& cases,
                                      DType dtype, const TimingOptions& opt, Communicator* world = nullptr,
                                      const std::function<Groups(int tp, int dp)>& groups = {});
// The time model's step for a step sample on cluster `c` (its layout on
// `ranks` ranks, no DP overlap: the executor overlaps none; the link is `c`'s
// intra-node one).
double model_step_time(const StepSample& s, const Cluster& c);

// ---- collectives ----

struct CollectiveSample {
  Collective kind = Collective::kAllReduce;  // kAllReduce, kAllGather or kReduceScatter
  int group_size = 0;
  DType dtype = DType::kBf16;
  std::int64_t bytes = 0;  // S, the whole array (nccl-tests convention)
  double seconds = 0;      // one operation, mean over the group's ranks
  double fitted_s = 0;
  // Timed as in a training step: each operation right after a GEMM (64 x 256 x 64)
  // and a kernel that writes its input, timed alone, so it includes the wait for the slower
  // rank and the cold caches. Otherwise back to back (nccl-tests).
  bool in_step = false;
  // algBw = S / t; busBw = algBw × bus_bandwidth_factor (costmodel/comm.hpp).
  double alg_bw() const { return seconds > 0 ? double(bytes) / seconds : 0; }
  double bus_bw() const { return bus_bandwidth(kind, group_size, double(bytes), seconds); }
};

const char* collective_label(Collective c);  // "all_reduce", "all_gather", "reduce_scatter"

// Message sizes min, 4·min, ... ≤ max bytes (nccl-tests -b -e -f 4).
std::vector<std::int64_t> message_sizes(std::int64_t min_bytes, std::int64_t max_bytes, int factor);

// nccl-tests style on `comm` (every rank of the group calls it with the same
// arguments): per size, the iteration count is agreed over the group, then
// `repetitions` timed runs; the time per operation is averaged over the group's
// ranks and the median run kept. Buffers from `mem`, touched by `dev`.
// in_step: as CollectiveSample::in_step says.
std::vector<CollectiveSample> measure_collectives(Communicator& comm, Device& dev,
                                                  MemoryResource& mem,
                                                  const std::vector<Collective>& kinds,
                                                  const std::vector<std::int64_t>& sizes,
                                                  DType dtype, const TimingOptions& opt,
                                                  bool in_step = false);

// ---- fits ----

struct GemmFit {
  double peak_flops = 0;   // the best rate measured (FLOP/s): peak_tflops_bf16
  double efficiency = 0;   // gemm_efficiency: the rate the model's GEMMs get, / peak
  double fixed_s = 0;      // gemm_fixed_us / 1e6: the fixed time per GEMM kernel (≥ 0)
  double rms_rel_error = 0;
  int samples = 0;
};
// Least squares of the model's gemm_time (roofline: FLOPs at peak × efficiency,
// or operand bytes at hbm_bytes_per_s, plus a fixed time per GEMM) against the
// measured times, for the efficiency and the fixed time (none when negative); the peak is given (peak_flops ≤ 0: the best measured rate), and
// so is the model's memory-bound rate hbm_bandwidth × hbm_efficiency
// (memory_bytes_per_s ≤ 0: no memory bound). Fills each sample's fitted_s.
GemmFit fit_gemm(std::vector<GemmSample>& samples, double peak_flops, double memory_bytes_per_s);

struct MemoryFit {
  double bandwidth = 0;    // bytes/s: hbm_bandwidth_gbs (the best copy rate)
  double efficiency = 0;   // hbm_efficiency
  double rms_rel_error = 0;
  int samples = 0;
  // optimizer_efficiency: the Adam step's own rate, fitted to the Adam samples
  // alone (0 when there are none: the cluster then uses hbm_efficiency).
  double optimizer_efficiency = 0;
  double optimizer_rms_rel_error = 0;
  int optimizer_samples = 0;
};
// The efficiency by least squares (Gauss-Newton on the relative error) of the
// model against the measured non-GEMM work of whole micro-batches: for each
// model and sequence length, its layers (the model's layer count) plus its
// embedding and output, as a training step is made of them (Adam apart,
// below). On `base` (its GEMM numbers price the
// attention core) with hbm_bandwidth = the best copy rate (bandwidth ≤ 0) or
// `bandwidth`. Fills every sample's fitted_s; the RMS error is over the
// micro-batches fitted. The Adam samples (once a step, one streaming pass)
// fit optimizer_efficiency on their own: the least-squares y = 1/efficiency of
// the relative error, closed form y = Σa/Σa² with a = model at efficiency 1 /
// measured (at most 1).
MemoryFit fit_memory(const std::vector<CopySample>& copies, std::vector<WorkSample>& work, const Cluster& base,
                     double bandwidth = 0);

struct StepFit {
  double gemm_efficiency = 0, hbm_efficiency = 0, attention_efficiency = 0;
  double rms_rel_error_before = 0;  // of the model with `base`'s efficiencies (the kernel fits)
  double rms_rel_error = 0;         // after the fit
  int samples = 0;
  // The link's latency per algorithm step as the steps see it (seconds):
  // fitted when the samples include steps with many collectives (tp, ZeRO 2),
  // else `base`'s (the collective fit's).
  double latency_s = 0;
  bool latency_fitted = false;
};
// gemm_efficiency, hbm_efficiency and attention_efficiency by Gauss-Newton on
// the relative error of model_step_time against the measured steps (an Eigen
// least-squares solve per iteration, the Jacobian by finite differences in
// 1/efficiency), starting from `base`'s (the kernel-level fits); each stays
// ≤ 1. The step cases vary the attention share (sequence 32 and 128, flash
// for llama, not for gpt), which separates its rate from the GEMMs'. With at
// least five samples of which two have more than one collective per micro-
// batch (tp, ZeRO 2), the link latency α is fitted with them (≥ 0; the
// bandwidth stays `base`'s): inside a step each collective also waits for the
// slower rank, which the back-to-back collective timings do not see. Fills
// every sample's fitted_s. Two samples: the attention rate stays the GEMM
// rate; fewer: `base`'s efficiencies, unchanged.
StepFit fit_steps(std::vector<StepSample>& samples, const Cluster& base);

struct LinkFit {
  double alpha_s = 0;        // latency per algorithm step: latency_us
  double bytes_per_s = 0;    // bandwidth per rank per direction: bandwidth_gbs
  double rms_rel_error = 0;
  int samples = 0;
};
// Joint fit over the samples (the in-step ones when there are any: they are
// what a training step sees) of the ring formulas of costmodel/comm.cpp:
// t = steps(kind, n)·α + bytes_moved(kind, n, S)/β (all-reduce 2(n−1) steps and
// 2(n−1)/n·S, all-gather and reduce-scatter n−1 steps and (n−1)/n·S). α < 0 is
// refitted as 0. Throws std::invalid_argument on fewer than two distinct sizes.
LinkFit fit_link(std::vector<CollectiveSample>& samples);

// The collective as the time model predicts it on one link level.
double model_collective_time(Collective kind, int n, double bytes, const LinkCost& link);

// Everything one rank measured.
struct Samples {
  std::vector<GemmSample> gemm;
  std::vector<CopySample> copies;
  std::vector<WorkSample> work;
  std::vector<StepSample> steps;
  std::vector<CollectiveSample> collectives;
};

}  // namespace paraplan::validate
