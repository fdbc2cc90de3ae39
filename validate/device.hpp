// The compute seam: every numeric kernel the executor runs, behind one small
// interface (ggml-backend style). The CPU implementation (validate/cpu/) is the
// reference every other backend (validate/gpu/, CUDA) is checked against.
//
// Conventions, for every kernel:
//  * Tensors are row-major. Activations are [tokens, features] with tokens in
//    Megatron's [s, b] order: token row r = i * b + batch, i the position in
//    the sequence. So a sequence-parallel shard is a contiguous block of rows.
//  * A Ref is fp32 or bf16; kernels read either, compute in fp32 and round once
//    when they store. Outputs may be any storage type independently of inputs.
//  * Kernels allocate nothing: workspaces are passed in (allocated by the
//    executor through the tracking allocator, so nothing escapes the count).
//  * "+=" outputs accumulate into what is there (gradients); "=" overwrite.
//  * Linear layers store W as [out, in] (PyTorch); y = x W^T.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "validate/phase_timer.hpp"
#include "validate/tensor.hpp"

namespace paraplan::validate {

enum class NormKind { kLayerNorm, kRmsNorm };
enum class ActKind { kGelu, kSwiglu };

// Attention geometry of one tp rank. Q, K and V are column blocks of one packed
// [tokens, ld] buffer (ld = row stride in elements): head h of Q at columns
// q_off + h*d, kv head g of K at k_off + g*d, of V at v_off + g*d. Query head h
// uses kv head h / (hq / hkv) (GQA). Causal: query position i sees keys j <= i.
struct AttnShape {
  std::int64_t s = 0, b = 0;  // sequence length, micro-batch size
  std::int64_t hq = 0, hkv = 0, d = 0;
  std::int64_t ld = 0;          // row stride of the packed QKV buffer
  std::int64_t q_off = 0, k_off = 0, v_off = 0;
  float scale = 1.0f;           // 1/sqrt(d)
};

// Dropout masks are a pure function of (seed, key of the row, global column),
// so every layout draws the same mask for the same logical element and a
// sharded run can reproduce a single-rank run. keep = hash(...) >= p.
struct DropoutKey {
  std::uint64_t seed = 0;
  // Row r of the local tensor has the global row key row_key0 + r (hidden
  // states: the token's global index; see the executor for attention rows).
  std::int64_t row_key0 = 0;
  std::int64_t col0 = 0;  // global index of local column 0
};

// 64-bit mix (splitmix64 finaliser) of the seed, row key and column: the
// dropout mask and deterministic initialisation are both built on it.
std::uint64_t hash_mix(std::uint64_t seed, std::int64_t row, std::int64_t col);
// Uniform in [0, 1) from hash_mix.
double hash_uniform(std::uint64_t seed, std::int64_t row, std::int64_t col);

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  // Waits for queued work (phase timing). CPU: nothing.
  virtual void synchronize() {}
  // A clock that stamps this device's work queue, for PhaseTimer: the host's
  // steady clock where kernels finish before they return (CPU); CUDA events
  // on the compute stream for the GPU.
  virtual std::unique_ptr<PhaseClock> phase_clock() { return std::make_unique<SteadyPhaseClock>(); }

  // ---- data movement ----
  // dst[i] = src[i], converting between storage types.
  virtual void copy(CRef src, Ref dst, std::int64_t n) = 0;
  virtual void fill(Ref dst, std::int64_t n, float value) = 0;
  // Copies n elements to/from host fp32 (reports, checks, initialisation).
  virtual void to_host(CRef src, float* host, std::int64_t n) = 0;
  virtual void from_host(const float* host, Ref dst, std::int64_t n) = 0;
  // Copies raw bytes from the host (token ids, labels). Default: host memory.
  virtual void upload(const void* host, void* dst, std::int64_t bytes) {
    std::memcpy(dst, host, std::size_t(bytes));
  }
  // Copies `rows` rows of `cols` elements between strided 2-D blocks.
  virtual void copy_2d(CRef src, std::int64_t ld_src, Ref dst, std::int64_t ld_dst,
                       std::int64_t rows, std::int64_t cols) = 0;

  // ---- elementwise ----
  // out = a + b (out may alias a or b).
  virtual void add(CRef a, CRef b, Ref out, std::int64_t n) = 0;
  // y += alpha * x.
  virtual void axpy(float alpha, CRef x, Ref y, std::int64_t n) = 0;
  // x *= alpha.
  virtual void scale(Ref x, std::int64_t n, float alpha) = 0;
  // y[r, c] += bias[c] for rows x cols.
  virtual void add_bias(Ref y, CRef bias, std::int64_t rows, std::int64_t cols) = 0;
  // dbias[c] += sum_r dy[r, c].
  virtual void bias_backward(CRef dy, Ref dbias, std::int64_t rows, std::int64_t cols) = 0;

  // ---- GEMM ----
  // C = alpha * op(A) * op(B) + beta * C, row-major, op(X) = X or X^T;
  // op(A) is m x k, op(B) is k x n; lda/ldb/ldc are row strides of the stored
  // matrices. beta is 0 or 1 (1: accumulate into a gradient). fp32 accumulation.
  virtual void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    float alpha, CRef a, std::int64_t lda, CRef b, std::int64_t ldb, float beta,
                    Ref c, std::int64_t ldc) = 0;

  // ---- normalisation (LayerNorm: gamma, beta; RMSNorm: gamma only) ----
  // y = norm(x) * gamma (+ beta) over each row of `cols`.
  virtual void norm_forward(NormKind kind, CRef x, CRef gamma, CRef beta, Ref y, std::int64_t rows,
                            std::int64_t cols, float eps) = 0;
  // Recomputes the row statistics from x (nothing else is saved).
  // dx = (accumulate ? dx : 0) + dnorm/dx; dgamma += ..., dbeta += ... (dbeta
  // ignored for RMSNorm).
  virtual void norm_backward(NormKind kind, CRef x, CRef gamma, CRef dy, Ref dx, bool accumulate,
                             Ref dgamma, Ref dbeta, std::int64_t rows, std::int64_t cols,
                             float eps) = 0;

  // ---- rotary position embedding (GPT-NeoX / Llama half-split form) ----
  // For `heads` heads of width d at columns col0 + h*d of the [tokens, ld]
  // buffer x: rotates pairs (e, e + d/2) by angle pos * theta^(-2e/d), with
  // pos = row / b (token order [s, b]). inverse: rotate by -angle (backward).
  virtual void rope(Ref x, std::int64_t ld, std::int64_t col0, std::int64_t heads, std::int64_t d,
                    std::int64_t s, std::int64_t b, float theta, bool inverse) = 0;

  // ---- attention, materialised scores (no flash) ----
  // P[b, hq, s, s] = causal softmax(scale * Q K^T); entries j > i are 0.
  virtual void attention_probs(CRef qkv, const AttnShape& a, Ref probs) = 0;
  // O[tokens, hq*d] = P V (P may be the dropped-out probabilities).
  virtual void attention_pv(CRef probs, CRef qkv, const AttnShape& a, Ref out) = 0;
  // Backward of softmax(scale Q K^T) [dropout] V. probs: the softmax output;
  // mask/dropped: the dropout mask (1 byte per element, 1 = kept) and the
  // dropped-out probabilities, or null without attention dropout (p = 0).
  // Writes dQ, dK, dV (overwritten) into the packed [tokens, ld] dqkv buffer.
  // scratch: 2 * s fp32.
  virtual void attention_backward(CRef qkv, CRef probs, const std::uint8_t* mask, CRef dropped,
                                  float p, CRef dout, const AttnShape& a, Ref dqkv,
                                  float* scratch) = 0;

  // ---- attention, flash style (Dao et al. 2022): saves O and log-sum-exp ----
  // out[tokens, hq*d]; lse[b, hq, s] fp32. scratch: s fp32.
  virtual void flash_attention_forward(CRef qkv, const AttnShape& a, Ref out, float* lse,
                                       float* scratch) = 0;
  // Recomputes the probabilities row by row from Q, K and lse. scratch: 2 * s fp32.
  virtual void flash_attention_backward(CRef qkv, CRef out, const float* lse, CRef dout,
                                        const AttnShape& a, Ref dqkv, float* scratch) = 0;

  // ---- dropout ----
  // mask[i] = keep(key, row, col); y = x * mask / (1 - p). x and y may alias.
  virtual void dropout_forward(CRef x, Ref y, std::uint8_t* mask, std::int64_t rows,
                               std::int64_t cols, float p, const DropoutKey& key) = 0;
  // dx = dy * mask / (1 - p) (dx may alias dy).
  virtual void dropout_backward(CRef dy, const std::uint8_t* mask, Ref dx, std::int64_t n,
                                float p) = 0;
  // Attention dropout on P[b, hq, s, s] (only the causal j <= i part): the row
  // key of element (batch, head, i) is ((seq0 + batch) * heads_total + head0 +
  // head) * s + i and its column is j, seq0 = global index of this micro-batch's
  // first sequence. y and mask as dropout_forward.
  virtual void attention_dropout_forward(CRef probs, Ref dropped, std::uint8_t* mask,
                                         const AttnShape& a, float p, std::uint64_t seed,
                                         std::int64_t seq0, std::int64_t head0,
                                         std::int64_t heads_total) = 0;

  // ---- MLP activations ----
  // GeLU (tanh approximation, as Megatron/GPT-2): g = gelu(u), n elements.
  // SwiGLU: u is [rows, 2f] = [gate | up] (per tp rank), g[rows, f] = silu(gate) * up.
  virtual void act_forward(ActKind kind, CRef u, Ref g, std::int64_t rows, std::int64_t f) = 0;
  // du (overwritten, shaped like u) from dg and the saved u.
  virtual void act_backward(ActKind kind, CRef u, CRef dg, Ref du, std::int64_t rows,
                            std::int64_t f) = 0;

  // ---- embedding (vocab-parallel: this rank holds rows [v0, v0 + vrows)) ----
  // out[r, :] = (accumulate ? out[r, :] : 0) + table[ids[r] - v0, :] when the id
  // is in this rank's range, else + 0.
  virtual void embedding_forward(const std::int32_t* ids, std::int64_t rows, CRef table,
                                 std::int64_t v0, std::int64_t vrows, std::int64_t h, Ref out,
                                 bool accumulate) = 0;
  // dtable[ids[r] - v0, :] += dout[r, :] for ids in range.
  virtual void embedding_backward(const std::int32_t* ids, std::int64_t rows, CRef dout,
                                  std::int64_t v0, std::int64_t vrows, std::int64_t h,
                                  Ref dtable) = 0;

  // ---- vocab-parallel cross-entropy (Megatron-LM) ----
  // logits[rows, vl] for global vocab ids [v0, v0 + vl); columns with global id
  // >= vocab (padding) are ignored. Step 1: row_max[r] = max over valid columns.
  virtual void ce_row_max(CRef logits, std::int64_t rows, std::int64_t vl, std::int64_t v0,
                          std::int64_t vocab, float* row_max) = 0;
  // Step 2 (row_max already all-reduced with MAX over tp): softmax[r, c] =
  // exp(logit - row_max) (fp32; 0 for padding), row_sum[r] = sum_c, and
  // target_logit[r] = logit of targets[r] - row_max if the target is in this
  // shard, else 0.
  virtual void ce_exp_sum(CRef logits, const float* row_max, const std::int32_t* targets,
                          std::int64_t rows, std::int64_t vl, std::int64_t v0, std::int64_t vocab,
                          float* softmax, float* row_sum, float* target_logit) = 0;
  // Step 3 (row_sum and target_logit all-reduced with SUM over tp):
  // loss[r] = log(row_sum[r]) - target_logit[r]; softmax /= row_sum (in place).
  virtual void ce_finish(float* softmax, const float* row_sum, const float* target_logit,
                         std::int64_t rows, std::int64_t vl, float* loss) = 0;
  // Backward, in place: softmax becomes (softmax - onehot(target)) * grad_scale.
  virtual void ce_backward(float* softmax, const std::int32_t* targets, std::int64_t rows,
                           std::int64_t vl, std::int64_t v0, float grad_scale) = 0;

  // ---- optimizer ----
  // Adam (Kingma & Ba 2015, bias-corrected; no weight decay) on n elements:
  // g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  // master -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
  // master, m, v are fp32. If `param` is non-null it receives the updated
  // master in its storage type (bf16 weights under mixed precision).
  virtual void adam(float* master, float* m, float* v, CRef grad, Ref param, std::int64_t n,
                    float lr, float beta1, float beta2, float eps, int step,
                    float grad_scale) = 0;

  // ---- reductions for checks ----
  // sum x^2 and sum x * w(i), w(i) = hash_uniform(seed, 0, i0 + i) - 0.5, in double.
  virtual void checksums(CRef x, std::int64_t n, std::uint64_t seed, std::int64_t i0,
                         double* sum_sq, double* sum_w) = 0;
};

}  // namespace paraplan::validate
