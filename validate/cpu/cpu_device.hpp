// The CPU device: the reference implementation of every kernel in
// validate/device.hpp. fp32 products go through Eigen over the caller's memory;
// bf16 operands are converted on the fly through small stack tiles and
// accumulated in fp32, rounding once on store. Nothing here allocates tensor-
// sized memory: all large buffers come from the executor.
//
// Split over two files: cpu_device.cpp (everything but attention) and
// cpu_attention.cpp (materialised and flash attention, attention dropout).
#pragma once

#include <memory>

#include "validate/device.hpp"

namespace paraplan::validate {

class CpuDevice final : public Device {
 public:
  std::string name() const override { return "cpu"; }

  void copy(CRef src, Ref dst, std::int64_t n) override;
  void fill(Ref dst, std::int64_t n, float value) override;
  void to_host(CRef src, float* host, std::int64_t n) override;
  void from_host(const float* host, Ref dst, std::int64_t n) override;
  void copy_2d(CRef src, std::int64_t ld_src, Ref dst, std::int64_t ld_dst, std::int64_t rows,
               std::int64_t cols) override;

  void add(CRef a, CRef b, Ref out, std::int64_t n) override;
  void axpy(float alpha, CRef x, Ref y, std::int64_t n) override;
  void scale(Ref x, std::int64_t n, float alpha) override;
  void add_bias(Ref y, CRef bias, std::int64_t rows, std::int64_t cols) override;
  void bias_backward(CRef dy, Ref dbias, std::int64_t rows, std::int64_t cols) override;

  void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            CRef a, std::int64_t lda, CRef b, std::int64_t ldb, float beta, Ref c,
            std::int64_t ldc) override;

  void norm_forward(NormKind kind, CRef x, CRef gamma, CRef beta, Ref y, std::int64_t rows,
                    std::int64_t cols, float eps) override;
  void norm_backward(NormKind kind, CRef x, CRef gamma, CRef dy, Ref dx, bool accumulate,
                     Ref dgamma, Ref dbeta, std::int64_t rows, std::int64_t cols,
                     float eps) override;

  void rope(Ref x, std::int64_t ld, std::int64_t col0, std::int64_t heads, std::int64_t d,
            std::int64_t s, std::int64_t b, float theta, bool inverse) override;

  // cpu_attention.cpp
  void attention_probs(CRef qkv, const AttnShape& a, Ref probs) override;
  void attention_pv(CRef probs, CRef qkv, const AttnShape& a, Ref out) override;
  void attention_backward(CRef qkv, CRef probs, const std::uint8_t* mask, CRef dropped, float p,
                          CRef dout, const AttnShape& a, Ref dqkv, float* scratch) override;
  void flash_attention_forward(CRef qkv, const AttnShape& a, Ref out, float* lse,
                               float* scratch) override;
  void flash_attention_backward(CRef qkv, CRef out, const float* lse, CRef dout, const AttnShape& a,
                                Ref dqkv, float* scratch) override;
  void attention_dropout_forward(CRef probs, Ref dropped, std::uint8_t* mask, const AttnShape& a,
                                 float p, std::uint64_t seed, std::int64_t seq0, std::int64_t head0,
                                 std::int64_t heads_total) override;

  void dropout_forward(CRef x, Ref y, std::uint8_t* mask, std::int64_t rows, std::int64_t cols,
                       float p, const DropoutKey& key) override;
  void dropout_backward(CRef dy, const std::uint8_t* mask, Ref dx, std::int64_t n,
                        float p) override;

  void act_forward(ActKind kind, CRef u, Ref g, std::int64_t rows, std::int64_t f) override;
  void act_backward(ActKind kind, CRef u, CRef dg, Ref du, std::int64_t rows,
                    std::int64_t f) override;

  void embedding_forward(const std::int32_t* ids, std::int64_t rows, CRef table, std::int64_t v0,
                         std::int64_t vrows, std::int64_t h, Ref out, bool accumulate) override;
  void embedding_backward(const std::int32_t* ids, std::int64_t rows, CRef dout, std::int64_t v0,
                          std::int64_t vrows, std::int64_t h, Ref dtable) override;

  void ce_row_max(CRef logits, std::int64_t rows, std::int64_t vl, std::int64_t v0,
                  std::int64_t vocab, float* row_max) override;
  void ce_exp_sum(CRef logits, const float* row_max, const std::int32_t* targets, std::int64_t rows,
                  std::int64_t vl, std::int64_t v0, std::int64_t vocab, float* softmax,
                  float* row_sum, float* target_logit) override;
  void ce_finish(float* softmax, const float* row_sum, const float* target_logit, std::int64_t rows,
                 std::int64_t vl, float* loss) override;
  void ce_backward(float* softmax, const std::int32_t* targets, std::int64_t rows, std::int64_t vl,
                   std::int64_t v0, float grad_scale) override;

  void adam(float* master, float* m, float* v, CRef grad, Ref param, std::int64_t n, float lr,
            float beta1, float beta2, float eps, int step, float grad_scale) override;

  void checksums(CRef x, std::int64_t n, std::uint64_t seed, std::int64_t i0, double* sum_sq,
                 double* sum_w) override;
};

std::unique_ptr<Device> make_cpu_device();

}  // namespace paraplan::validate
