// The CUDA Device: argument checks and dispatch to the kernels (kernels.hpp),
// GEMMs through cuBLAS. Everything is queued on the context's stream.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "validate/gpu/cuda_context.hpp"
#include "validate/gpu/gpu_backend.hpp"
#include "validate/gpu/kernels.hpp"

namespace paraplan::validate {
namespace {

using cuda::check;
using cuda::DRef;
using i64 = std::int64_t;

DRef dref(Ref r) {
  if (r.dtype != DType::kFp32 && r.dtype != DType::kBf16)
    throw std::invalid_argument("cuda device: tensors are fp32 or bf16");
  return DRef{r.data, r.dtype == DType::kBf16};
}
// An fp32 buffer the interface passes as float*.
DRef f32(const float* p) { return DRef{const_cast<float*>(p), false}; }

cudaDataType cuda_type(Ref r) { return r.dtype == DType::kBf16 ? CUDA_R_16BF : CUDA_R_32F; }

cuda::Attn attn(const AttnShape& a) {
  return cuda::Attn{a.s, a.b, a.hq, a.hkv, a.d, a.ld, a.q_off, a.k_off, a.v_off, a.scale};
}

bool overlap(const void* a, const void* b, i64 bytes) {
  const char *x = static_cast<const char*>(a), *y = static_cast<const char*>(b);
  return x < y + bytes && y < x + bytes;
}

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal) : ctx_(cuda::cuda_context(ordinal)), st_(ctx_.stream) {}

  std::string name() const override { return "cuda:" + std::to_string(ctx_.ordinal); }
  void synchronize() override { check(cudaStreamSynchronize(st_), "synchronize"); }
  // CUDA events on the compute stream (collectives run on it too).
  std::unique_ptr<PhaseClock> phase_clock() override { return make_cuda_phase_clock(ctx_.ordinal); }

  // ---- data movement ----
  void copy(CRef src, Ref dst, i64 n) override {
    if (n <= 0 || src.data == dst.data) return;
    if (src.dtype == dst.dtype) {
      const i64 bytes = n * storage_bytes(src.dtype);
      if (overlap(src.data, dst.data, bytes))
        throw std::invalid_argument("cuda device: copy between overlapping ranges");
      check(cudaMemcpyAsync(dst.data, src.data, size_t(bytes), cudaMemcpyDeviceToDevice, st_), "copy");
      return;
    }
    cuda::copy(dref(src), dref(dst), n, st_);
  }
  void fill(Ref dst, i64 n, float value) override {
    if (n <= 0) return;
    if (value == 0.0f && !std::signbit(value))  // +0 is all zero bits in both types
      check(cudaMemsetAsync(dst.data, 0, size_t(n * storage_bytes(dst.dtype)), st_), "fill");
    else
      cuda::fill(dref(dst), n, value, st_);
  }
  void to_host(CRef src, float* host, i64 n) override {
    if (n <= 0) return;
    if (src.dtype == DType::kFp32) {
      check(cudaMemcpyAsync(host, src.data, size_t(n) * 4, cudaMemcpyDeviceToHost, st_), "to_host");
      synchronize();
      return;
    }
    std::vector<bf16> staged(static_cast<size_t>(n));
    check(cudaMemcpyAsync(staged.data(), dref(src).p, size_t(n) * 2, cudaMemcpyDeviceToHost, st_), "to_host");
    synchronize();
    for (i64 i = 0; i < n; ++i) host[i] = to_float(staged[size_t(i)]);
  }
  void from_host(const float* host, Ref dst, i64 n) override {
    if (n <= 0) return;
    if (dst.dtype == DType::kFp32) {
      check(cudaMemcpyAsync(dst.data, host, size_t(n) * 4, cudaMemcpyHostToDevice, st_), "from_host");
    } else {
      std::vector<bf16> staged(static_cast<size_t>(n));
      for (i64 i = 0; i < n; ++i) staged[size_t(i)] = to_bf16(host[i]);
      check(cudaMemcpyAsync(dref(dst).p, staged.data(), size_t(n) * 2, cudaMemcpyHostToDevice, st_),
            "from_host");
      synchronize();  // `staged` dies here
    }
  }
  void upload(const void* host, void* dst, i64 bytes) override {
    // From pageable memory the copy is staged before the call returns, so the
    // caller may free `host` at once.
    if (bytes > 0) check(cudaMemcpyAsync(dst, host, size_t(bytes), cudaMemcpyHostToDevice, st_), "upload");
  }
  void copy_2d(CRef src, i64 ld_src, Ref dst, i64 ld_dst, i64 rows, i64 cols) override {
    if (rows <= 0 || cols <= 0) return;
    if (src.dtype == dst.dtype) {
      const size_t es = size_t(storage_bytes(src.dtype));
      check(cudaMemcpy2DAsync(dst.data, size_t(ld_dst) * es, src.data, size_t(ld_src) * es, size_t(cols) * es,
                              size_t(rows), cudaMemcpyDeviceToDevice, st_),
            "copy_2d");
      return;
    }
    cuda::copy_2d(dref(src), ld_src, dref(dst), ld_dst, rows, cols, st_);
  }

  // ---- elementwise ----
  void add(CRef a, CRef b, Ref out, i64 n) override { cuda::add(dref(a), dref(b), dref(out), n, st_); }
  void axpy(float alpha, CRef x, Ref y, i64 n) override { cuda::axpy(alpha, dref(x), dref(y), n, st_); }
  void scale(Ref x, i64 n, float alpha) override { cuda::scale(dref(x), n, alpha, st_); }
  void add_bias(Ref y, CRef bias, i64 rows, i64 cols) override {
    cuda::add_bias(dref(y), dref(bias), rows, cols, st_);
  }
  void bias_backward(CRef dy, Ref dbias, i64 rows, i64 cols) override {
    cuda::bias_backward(dref(dy), dref(dbias), rows, cols, st_);
  }

  // ---- GEMM ----
  void gemm(bool ta, bool tb, i64 m, i64 n, i64 k, float alpha, CRef a, i64 lda, CRef b, i64 ldb,
            float beta, Ref c, i64 ldc) override;

  // ---- normalisation, RoPE ----
  void norm_forward(NormKind kind, CRef x, CRef gamma, CRef beta, Ref y, i64 rows, i64 cols,
                    float eps) override {
    cuda::norm_forward(kind == NormKind::kRmsNorm, dref(x), dref(gamma), beta ? dref(beta) : DRef{},
                       dref(y), rows, cols, eps, st_);
  }
  void norm_backward(NormKind kind, CRef x, CRef gamma, CRef dy, Ref dx, bool accumulate, Ref dgamma,
                     Ref dbeta, i64 rows, i64 cols, float eps) override;
  void rope(Ref x, i64 ld, i64 col0, i64 heads, i64 d, i64 s, i64 b, float theta, bool inverse) override {
    if (d % 2 != 0) throw std::invalid_argument("cuda device: rope needs an even head width");
    cuda::rope(dref(x), ld, col0, heads, d, s, b, theta, inverse, st_);
  }

  // ---- attention ----
  void attention_probs(CRef qkv, const AttnShape& a, Ref probs) override {
    cuda::attention_probs(dref(qkv), attn(a), dref(probs), st_);
  }
  void attention_pv(CRef probs, CRef qkv, const AttnShape& a, Ref out) override {
    cuda::attention_pv(dref(probs), dref(qkv), attn(a), dref(out), st_);
  }
  void attention_backward(CRef qkv, CRef probs, const std::uint8_t* mask, CRef dropped, float p,
                          CRef dout, const AttnShape& a, Ref dqkv, float*) override {
    if (!mask) p = 0.0f;
    cuda::attention_backward(dref(qkv), dref(probs), mask, mask ? dref(dropped) : DRef{}, p, dref(dout),
                             attn(a), dref(dqkv), st_);
  }
  void flash_attention_forward(CRef qkv, const AttnShape& a, Ref out, float* lse, float*) override {
    cuda::flash_attention_forward(dref(qkv), attn(a), dref(out), lse, st_);
  }
  void flash_attention_backward(CRef qkv, CRef out, const float* lse, CRef dout, const AttnShape& a,
                                Ref dqkv, float*) override {
    cuda::flash_attention_backward(dref(qkv), dref(out), lse, dref(dout), attn(a), dref(dqkv), st_);
  }

  // ---- dropout ----
  void dropout_forward(CRef x, Ref y, std::uint8_t* mask, i64 rows, i64 cols, float p,
                       const DropoutKey& key) override {
    cuda::dropout_forward(dref(x), dref(y), mask, rows, cols, p, key.seed, key.row_key0, key.col0, st_);
  }
  void dropout_backward(CRef dy, const std::uint8_t* mask, Ref dx, i64 n, float p) override {
    cuda::dropout_backward(dref(dy), mask, dref(dx), n, p, st_);
  }
  void attention_dropout_forward(CRef probs, Ref dropped, std::uint8_t* mask, const AttnShape& a, float p,
                                 std::uint64_t seed, i64 seq0, i64 head0, i64 heads_total) override {
    cuda::attention_dropout_forward(dref(probs), dref(dropped), mask, attn(a), p, seed, seq0, head0,
                                    heads_total, st_);
  }

  // ---- activations ----
  void act_forward(ActKind kind, CRef u, Ref g, i64 rows, i64 f) override {
    cuda::act_forward(kind == ActKind::kSwiglu, dref(u), dref(g), rows, f, st_);
  }
  void act_backward(ActKind kind, CRef u, CRef dg, Ref du, i64 rows, i64 f) override {
    cuda::act_backward(kind == ActKind::kSwiglu, dref(u), dref(dg), dref(du), rows, f, st_);
  }

  // ---- embedding ----
  void embedding_forward(const std::int32_t* ids, i64 rows, CRef table, i64 v0, i64 vrows, i64 h, Ref out,
                         bool accumulate) override {
    cuda::embedding_forward(ids, rows, dref(table), v0, vrows, h, dref(out), accumulate, st_);
  }
  void embedding_backward(const std::int32_t* ids, i64 rows, CRef dout, i64 v0, i64 vrows, i64 h,
                          Ref dtable) override {
    if (rows * 8 > cuda::kScratchBytes)
      throw std::invalid_argument("cuda device: embedding_backward supports up to " +
                                  std::to_string(cuda::kScratchBytes / 8) + " rows per call");
    cuda::embedding_backward(ids, rows, dref(dout), v0, vrows, h, dref(dtable),
                             static_cast<std::int32_t*>(ctx_.scratch), st_);
  }

  // ---- cross-entropy ----
  void ce_row_max(CRef logits, i64 rows, i64 vl, i64 v0, i64 vocab, float* row_max) override {
    cuda::ce_row_max(dref(logits), rows, vl, v0, vocab, row_max, st_);
  }
  void ce_exp_sum(CRef logits, const float* row_max, const std::int32_t* targets, i64 rows, i64 vl,
                  i64 v0, i64 vocab, float* softmax, float* row_sum, float* target_logit) override {
    cuda::ce_exp_sum(dref(logits), row_max, targets, rows, vl, v0, vocab, softmax, row_sum, target_logit, st_);
  }
  void ce_finish(float* softmax, const float* row_sum, const float* target_logit, i64 rows, i64 vl,
                 float* loss) override {
    cuda::ce_finish(softmax, row_sum, target_logit, rows, vl, loss, st_);
  }
  void ce_backward(float* softmax, const std::int32_t* targets, i64 rows, i64 vl, i64 v0,
                   float grad_scale) override {
    cuda::ce_backward(softmax, targets, rows, vl, v0, grad_scale, st_);
  }

  // ---- optimizer ----
  void adam(float* master, float* m, float* v, CRef grad, Ref param, i64 n, float lr, float beta1,
            float beta2, float eps, int step, float grad_scale) override {
    // Bias corrections as the CPU: in double, rounded to fp32 once.
    const float bc1 = float(1.0 - std::pow(double(beta1), step));
    const float bc2 = float(1.0 - std::pow(double(beta2), step));
    cuda::adam(master, m, v, dref(grad), param ? dref(param) : DRef{}, n, lr, beta1, beta2, eps, bc1, bc2,
               grad_scale, st_);
  }

  // ---- checks ----
  void checksums(CRef x, i64 n, std::uint64_t seed, i64 i0, double* sum_sq, double* sum_w) override {
    auto* partials = static_cast<double*>(ctx_.scratch);
    cuda::checksums(dref(x), n, seed, i0, partials, st_);
    double out[2];
    check(cudaMemcpyAsync(out, partials + 2 * cuda::kChecksumParts, sizeof out, cudaMemcpyDeviceToHost, st_),
          "checksums");
    synchronize();
    *sum_sq = out[0];
    *sum_w = out[1];
  }

 private:
  void cublas_gemm(bool ta, bool tb, i64 m, i64 n, i64 k, float alpha, CRef a, i64 lda, CRef b, i64 ldb,
                   float beta, Ref c, i64 ldc);

  cuda::CudaContext& ctx_;
  cudaStream_t st_;
};

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS gets
// B first, with the same transposition flags, and m and n swapped.
void CudaDevice::cublas_gemm(bool ta, bool tb, i64 m, i64 n, i64 k, float alpha, CRef a, i64 lda, CRef b,
                             i64 ldb, float beta, Ref c, i64 ldc) {
  check(cublasGemmEx_64(ctx_.cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                        &alpha, b.data, cuda_type(b), ldb, a.data, cuda_type(a), lda, &beta, c.data,
                        cuda_type(c), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

void CudaDevice::gemm(bool ta, bool tb, i64 m, i64 n, i64 k, float alpha, CRef a, i64 lda, CRef b, i64 ldb,
                      float beta, Ref c, i64 ldc) {
  if (m <= 0 || n <= 0) return;
  const bool a16 = a.dtype == DType::kBf16, b16 = b.dtype == DType::kBf16, c16 = c.dtype == DType::kBf16;
  // cuBLAS with fp32 compute takes bf16 x bf16 into bf16 or fp32, and fp32 x fp32 into fp32.
  if (k > 0 && a16 == b16 && (a16 || !c16)) return cublas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (k <= 0 || a16 == b16) {  // fp32 x fp32 into bf16 (or nothing to multiply)
    cuda::gemm_fallback(ta, tb, m, n, k, alpha, dref(a), lda, dref(b), ldb, beta, dref(c), ldc, st_);
    return;
  }
  // One operand fp32, the other bf16: the fp32 one is rounded to bf16 through
  // the scratch, a block of whole rows of op(A) (or columns of op(B)) at a time,
  // so each C element is still computed in one pass over k (rounded once).
  const i64 per = cuda::kScratchBytes / (2 * k);
  if (per < 1) throw std::invalid_argument("cuda device: gemm with k too large for the mixed-type path");
  const Ref tmp(ctx_.scratch, DType::kBf16);
  if (!a16) {
    for (i64 m0 = 0; m0 < m; m0 += per) {
      const i64 mc = std::min(per, m - m0);
      if (!ta) copy_2d(a.at(m0 * lda), lda, tmp, k, mc, k);  // op(A) rows = stored rows
      else copy_2d(a.at(m0), lda, tmp, mc, k, mc);            // op(A) rows = stored columns
      cublas_gemm(ta, tb, mc, n, k, alpha, tmp, ta ? mc : k, b, ldb, beta, c.at(m0 * ldc), ldc);
    }
  } else {
    for (i64 n0 = 0; n0 < n; n0 += per) {
      const i64 nc = std::min(per, n - n0);
      if (!tb) copy_2d(b.at(n0), ldb, tmp, nc, k, nc);  // op(B) columns = stored columns
      else copy_2d(b.at(n0 * ldb), ldb, tmp, k, nc, k);  // op(B) columns = stored rows
      cublas_gemm(ta, tb, m, nc, k, alpha, a, lda, tmp, tb ? k : nc, beta, c.at(n0), ldc);
    }
  }
}

void CudaDevice::norm_backward(NormKind kind, CRef x, CRef gamma, CRef dy, Ref dx, bool accumulate, Ref dgamma,
                               Ref dbeta, i64 rows, i64 cols, float eps) {
  const bool rms = kind == NormKind::kRmsNorm;
  // Rows in blocks whose statistics fit the scratch (2 floats per row); dgamma
  // and dbeta are rounded once per block (once in practice: 2M rows per block).
  const i64 per = cuda::kScratchBytes / 8;
  for (i64 r0 = 0; r0 < rows; r0 += per) {
    const i64 rc = std::min(per, rows - r0);
    cuda::norm_backward(rms, dref(x.at(r0 * cols)), dref(gamma), dref(dy.at(r0 * cols)), dref(dx.at(r0 * cols)),
                        accumulate, dref(dgamma), (!rms && dbeta) ? dref(dbeta) : DRef{}, rc, cols, eps,
                        static_cast<float*>(ctx_.scratch), st_);
  }
}

}  // namespace

bool cuda_device_present(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device";
    return false;
  }
  return true;
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

std::unique_ptr<Device> make_cuda_device(int local_rank) { return std::make_unique<CudaDevice>(local_rank); }

void cuda_download(int local_rank, const void* device_src, void* host, std::int64_t bytes) {
  cuda::CudaContext& c = cuda::cuda_context(local_rank);
  if (bytes <= 0) return;
  check(cudaMemcpyAsync(host, device_src, size_t(bytes), cudaMemcpyDeviceToHost, c.stream), "cuda_download");
  check(cudaStreamSynchronize(c.stream), "cuda_download");
}

}  // namespace paraplan::validate
