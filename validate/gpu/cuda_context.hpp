// Per-GPU state shared by the CUDA device, the pool, the NCCL communicators,
// the phase clock and the device info (internal to validate/gpu): one compute
// stream (everything, NCCL included, is queued on it, so stream order is the
// program order), one cuBLAS handle with a fixed workspace, a fixed device
// scratch for the kernels that need a little (norm backward statistics,
// embedding-gradient links, checksum partials, bf16 staging of mixed GEMMs),
// and the free device memory seen before this process created its context.
// Created on first use and never destroyed (CUDA objects must not be torn
// down during static destruction); all of it counts as `runtime` memory.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace paraplan::validate::cuda {

inline constexpr std::int64_t kCublasWorkspaceBytes = 32 << 20;  // PyTorch's on sm90 (FACTS.md)
inline constexpr std::int64_t kScratchBytes = 16 << 20;

struct CudaContext {
  int ordinal = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  void* cublas_workspace = nullptr;
  void* scratch = nullptr;
  // Free bytes on the device before this process's context existed (NVML),
  // or -1 when NVML could not be read (then the GPU is assumed to have been empty).
  std::int64_t free_before_init = -1;
  std::string baseline_note;  // how free_before_init was obtained
  // cudaMemGetInfo right after the context was created (before cuBLAS, the
  // workspaces, NCCL and the pool).
  std::int64_t free_after_context = 0;
};

// The context of device `ordinal`, created on first use.
CudaContext& cuda_context(int ordinal);
// The context of device `ordinal` if one was created, else nullptr.
CudaContext* existing_cuda_context(int ordinal);

[[noreturn]] void throw_cuda(cudaError_t e, const char* what);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* what);

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw_cuda(e, what);
}
inline void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw_cublas(s, what);
}

}  // namespace paraplan::validate::cuda
