// Internal state of one executing rank (validate/executor*.cpp only).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "validate/executor.hpp"
#include "validate/params.hpp"
#include "validate/phase_timer.hpp"
#include "validate/timed_comm.hpp"

namespace paraplan::validate::detail {

// What one layer keeps between its forward and its backward for one
// micro-batch (which of these exist depends on the recompute mode).
struct LayerSaved {
  Buffer x;                       // layer input (residual stream)
  Buffer n1, qkv;                 // attention-norm output, packed Q|K|V
  Buffer probs, amask, dropped;   // softmax, dropout mask and output (no flash)
  Buffer lse;                     // log-sum-exp (flash)
  Buffer ctx, mask1, x1, n2, u, g, mask2;
  bool checkpointed = false;      // full recompute: only x kept, the backward re-runs the forward
};

// One model chunk's forward of one micro-batch, kept until its backward.
struct ChunkState {
  Buffer tokens, targets, emb_mask;
  std::vector<LayerSaved> layers;
  Buffer out;          // last layer output: the final norm's input (last virtual stage)
  Buffer nf, softmax;  // final norm output, fp32 softmax of the logit shard
};

class Exec {
 public:
  Exec(const RunConfig& cfg, Device& dev, TrackingAllocator& alloc, Groups& groups);
  RankResult run();

 private:
  // ---- set-up (executor.cpp) ----
  void allocate_state();
  void init_weights();
  // ---- parameters and gradients ----
  Ref W(int p);                      // weights of param p (gathered under ZeRO-3)
  void use_unit(int unit);           // ZeRO-3: gather the unit if not resident
  void grads_for(int p0, int p1);    // make params [p0..p1] gradient targets current
  Ref Gr(int p);                     // gradient target of param p (after grads_for)
  void flush_bucket();
  void reduce_range_into_shard(Ref buf_at_a, std::int64_t a, std::int64_t e);
  bool tied_copy(int p) const;
  std::int64_t largest_grad_group() const;
  // ---- one step (executor.cpp) ----
  double step(int k);
  void reduce_gradients();
  void optimizer_step(int k);
  void grad_checksums();
  // ---- schedule (pipeline.cpp) ----
  void run_schedule();
  void forward(int chunk, int mb);
  void backward(int chunk, int mb);
  // ---- model pieces (layer.cpp, head.cpp) ----
  void layer_forward(int li, int mb, LayerSaved& S, Ref out, Category cat, bool recompute);
  void layer_backward(int li, int mb, LayerSaved& S, Buffer& dres);
  void attention_core(int li, int mb, LayerSaved& S, Category cat, bool want_ctx);
  void embedding_forward(int mb, ChunkState& st, Buffer& x0);
  void embedding_backward(int mb, ChunkState& st, Buffer& dres);
  void head_forward(int mb, ChunkState& st);
  Buffer head_backward(int mb, ChunkState& st);
  // tp reductions of a row-parallel output: all-reduce, or reduce-scatter with SP.
  void tp_reduce(Buffer& partial, Buffer* shard_out, Category cat, const char* what);
  Ref sp_gather(CRef local);  // SP: all-gather into the comm buffer; else local
  void dropout_rows(CRef x, Ref y, std::uint8_t* mask, std::int64_t rows_local, float p,
                    std::uint64_t seed, std::int64_t pos0, std::int64_t seq0);
  std::uint64_t dropout_seed(int layer, int which) const;
  std::int64_t seq0(int mb) const;
  // Token `pos` of global sequence `seq` (synthetic_token). An emulated rank
  // with tp > 1 draws it from its own vocabulary rows: its stand-in for the
  // embedding's tp all-reduce adds no other rank's rows, so a token outside
  // them would enter the layers as an exact zero, and RMSNorm's backward at
  // x = 0 multiplies the gradient by 1/sqrt(eps) per norm (a 32-layer
  // Llama-2-7B rank overflowed fp32 at its 26th layer on the H100).
  std::int32_t token(std::int64_t seq, std::int64_t pos) const;
  void phase(const char* what, int chunk, int mb, int layer = -1);
  Buffer act_buf(std::int64_t n, Category c, const char* what) {
    return Buffer(&A, n, act, c, what);
  }

 public:
  const RunConfig& cfg;
  Device& dev;
  TrackingAllocator& A;
  // Every phase ("forward", "backward", "optimizer", "pp send wait") and, through
  // G, every collective ("tp all_reduce", ...) is timed on the device's clock.
  std::unique_ptr<PhaseClock> clock;
  PhaseTimer timer;
  Groups G;  // timed views of the caller's groups
  const Model& m;
  const Layout& l;
  const Training& t;
  int stage = 0, tp_rank = 0, dp_rank = 0, M = 0, step_no = 0;
  // Layers of each of this rank's model chunks and the index, in P.layers, of
  // each chunk's first layer (uneven pipeline stages: chunks may differ).
  std::vector<int> chunk_len, chunk_first;
  std::int64_t s = 0, b = 0, T = 0, Tl = 0, h = 0, ql = 0, kvl = 0, fl = 0, finl = 0, vrows = 0;
  DType act = DType::kFp32, wdt = DType::kFp32, gdt = DType::kFp32;
  ParamLayout P;
  std::vector<int> param_unit;
  Shards shards;
  bool use_bucket = false, tied_full = false;
  Buffer weights, grads, master, adam_m, adam_v, emb_grad;
  Buffer gather[2];
  int gathered[2] = {-1, -1}, gather_next = 0;
  Buffer bucket;
  std::int64_t bucket_cap = 0, bucket_lo = 0, bucket_hi = 0;
  bool bucket_empty = true;
  std::vector<int> cur_params;  // params whose gradient targets grads_for() set
  std::vector<Ref> cur_grads;
  Buffer sp_buf;
  Buffer send_slot[2];  // forward, backward direction
  std::unique_ptr<Request> send_req[2];
  std::vector<ChunkState> states;  // [chunk * M + mb]
  double loss_sum = 0;
  // The step's loss is summed over the world group in this buffer: a
  // communicator reduces the backend's memory (NCCL: device memory only).
  Scratch loss_scalar{A.backing(), 4};
  std::vector<GradCheck> checks;
};

}  // namespace paraplan::validate::detail
