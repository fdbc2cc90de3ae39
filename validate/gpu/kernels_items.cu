// Launchers of every kernel whose body is an item functor: each runs the
// plan of kernel_items.hpp on a grid (the host tests run the same plans).
#include "validate/gpu/kernels_launch.cuh"

namespace paraplan::validate::cuda {
namespace {

struct GpuRun {
  cudaStream_t st;
  template <class F>
  void operator()(const F& f, i64 n, const char* what) const {
    for_each(f, n, st, what);
  }
};

}  // namespace

void copy(DRef src, DRef dst, i64 n, cudaStream_t st) { plan::copy(GpuRun{st}, src, dst, n); }
void fill(DRef dst, i64 n, float value, cudaStream_t st) { plan::fill(GpuRun{st}, dst, n, value); }
void copy_2d(DRef src, i64 ld_src, DRef dst, i64 ld_dst, i64 rows, i64 cols, cudaStream_t st) {
  plan::copy_2d(GpuRun{st}, src, ld_src, dst, ld_dst, rows, cols);
}
void add(DRef a, DRef b, DRef out, i64 n, cudaStream_t st) { plan::add(GpuRun{st}, a, b, out, n); }
void axpy(float alpha, DRef x, DRef y, i64 n, cudaStream_t st) { plan::axpy(GpuRun{st}, alpha, x, y, n); }
void scale(DRef x, i64 n, float alpha, cudaStream_t st) { plan::scale(GpuRun{st}, x, n, alpha); }
void add_bias(DRef y, DRef bias, i64 rows, i64 cols, cudaStream_t st) {
  plan::add_bias(GpuRun{st}, y, bias, rows, cols);
}
void bias_backward(DRef dy, DRef dbias, i64 rows, i64 cols, cudaStream_t st) {
  plan::bias_backward(GpuRun{st}, dy, dbias, rows, cols);
}
void gemm_fallback(bool ta, bool tb, i64 m, i64 n, i64 k, float alpha, DRef a, i64 lda, DRef b, i64 ldb, float beta,
                   DRef c, i64 ldc, cudaStream_t st) {
  plan::gemm_fallback(GpuRun{st}, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void rope(DRef x, i64 ld, i64 col0, i64 heads, i64 d, i64 s, i64 b, float theta, bool inverse, cudaStream_t st) {
  plan::rope(GpuRun{st}, x, ld, col0, heads, d, s, b, theta, inverse);
}
void dropout_forward(DRef x, DRef y, std::uint8_t* mask, i64 rows, i64 cols, float p, std::uint64_t seed,
                     i64 row_key0, i64 col0, cudaStream_t st) {
  plan::dropout_forward(GpuRun{st}, x, y, mask, rows, cols, p, seed, row_key0, col0);
}
void dropout_backward(DRef dy, const std::uint8_t* mask, DRef dx, i64 n, float p, cudaStream_t st) {
  plan::dropout_backward(GpuRun{st}, dy, mask, dx, n, p);
}
void attention_dropout_forward(DRef probs, DRef dropped, std::uint8_t* mask, const Attn& a, float p,
                               std::uint64_t seed, i64 seq0, i64 head0, i64 heads_total, cudaStream_t st) {
  plan::attention_dropout_forward(GpuRun{st}, probs, dropped, mask, a, p, seed, seq0, head0, heads_total);
}
void act_forward(bool swiglu, DRef u, DRef g, i64 rows, i64 f, cudaStream_t st) {
  plan::act_forward(GpuRun{st}, swiglu, u, g, rows, f);
}
void act_backward(bool swiglu, DRef u, DRef dg, DRef du, i64 rows, i64 f, cudaStream_t st) {
  plan::act_backward(GpuRun{st}, swiglu, u, dg, du, rows, f);
}
void adam(float* master, float* m, float* v, DRef grad, DRef param, i64 n, float lr, float beta1, float beta2,
          float eps, float bc1, float bc2, float grad_scale, cudaStream_t st) {
  plan::adam(GpuRun{st}, master, m, v, grad, param, n, lr, beta1, beta2, eps, bc1, bc2, grad_scale);
}
void checksums(DRef x, i64 n, std::uint64_t seed, i64 i0, double* partials, cudaStream_t st) {
  plan::checksums(GpuRun{st}, x, n, seed, i0, partials);
}
void embedding_forward(const std::int32_t* ids, i64 rows, DRef table, i64 v0, i64 vrows, i64 h, DRef out,
                       bool accumulate, cudaStream_t st) {
  plan::embedding_forward(GpuRun{st}, ids, rows, table, v0, vrows, h, out, accumulate);
}
void embedding_backward(const std::int32_t* ids, i64 rows, DRef dout, i64 v0, i64 vrows, i64 h, DRef dtable,
                        std::int32_t* link, cudaStream_t st) {
  plan::embedding_backward(GpuRun{st}, ids, rows, dout, v0, vrows, h, dtable, link);
}
void norm_forward(bool rms, DRef x, DRef gamma, DRef beta, DRef y, i64 rows, i64 cols, float eps, cudaStream_t st) {
  plan::norm_forward(GpuRun{st}, rms, x, gamma, beta, y, rows, cols, eps);
}
void norm_backward(bool rms, DRef x, DRef gamma, DRef dy, DRef dx, bool accumulate, DRef dgamma, DRef dbeta,
                   i64 rows, i64 cols, float eps, float* stats, cudaStream_t st) {
  plan::norm_backward(GpuRun{st}, rms, x, gamma, dy, dx, accumulate, dgamma, dbeta, rows, cols, eps, stats);
}
void ce_row_max(DRef logits, i64 rows, i64 vl, i64 v0, i64 vocab, float* row_max, cudaStream_t st) {
  plan::ce_row_max(GpuRun{st}, logits, rows, vl, v0, vocab, row_max);
}
void ce_exp_sum(DRef logits, const float* row_max, const std::int32_t* targets, i64 rows, i64 vl, i64 v0, i64 vocab,
                float* softmax, float* row_sum, float* target_logit, cudaStream_t st) {
  plan::ce_exp_sum(GpuRun{st}, logits, row_max, targets, rows, vl, v0, vocab, softmax, row_sum, target_logit);
}
void ce_finish(float* softmax, const float* row_sum, const float* target_logit, i64 rows, i64 vl, float* loss,
               cudaStream_t st) {
  plan::ce_finish(GpuRun{st}, softmax, row_sum, target_logit, rows, vl, loss);
}
void ce_backward(float* softmax, const std::int32_t* targets, i64 rows, i64 vl, i64 v0, float grad_scale,
                 cudaStream_t st) {
  plan::ce_backward(GpuRun{st}, softmax, targets, rows, vl, v0, grad_scale);
}

}  // namespace paraplan::validate::cuda
