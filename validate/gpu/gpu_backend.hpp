// The GPU backend (issue 6): CUDA kernels + cuBLAS behind Device, a caching
// pool over cudaMalloc behind MemoryResource, NCCL behind Communicator, CUDA
// events behind PhaseClock, and what `calibrate` needs to know about the GPU.
// Plain C++ header (no CUDA includes), for validate/backend.cpp (under
// #ifdef PARAPLAN_HAVE_CUDA) and the GPU check programs (tests/gpu).
// docs/gpu.md says what has been verified.
//
// Order of use in one process (one process per GPU):
//   1. make_cuda_memory(local_rank) and make_cuda_device(local_rank) — the first
//      of them creates the CUDA context; the free memory is read before that
//      (NVML) so that `runtime` can be measured;
//   2. make_nccl_groups(...) — after MPI_Init, on the device chosen in 1;
//   3. the step; then cuda_memory_report(memory) for runtime and fragmentation.
// Every CUDA/cuBLAS/NCCL failure is thrown as std::runtime_error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "validate/allocator.hpp"
#include "validate/comm.hpp"
#include "validate/device.hpp"
#include "validate/phase_timer.hpp"
#include "validate/gpu/pool_core.hpp"

namespace paraplan::validate {

// Whether a usable CUDA device is present; if not, `why` (if non-null) says why
// (no driver, driver older than the runtime, no device, ...).
bool cuda_device_present(std::string* why);
// Number of CUDA devices this process sees (0 when none or no driver).
int cuda_device_count();

// ---- compute ----
// Kernels on device `local_rank` (a CUDA device ordinal: pin ranks to GPUs with
// the launcher or CUDA_VISIBLE_DEVICES). All work is queued on one stream;
// synchronize() waits for it. Pointer arguments of Device (ids, masks, scratch,
// softmax, master weights, ...) are device memory from the pool; `host`
// arguments and checksums' results are host memory.
// Differences from the CPU reference, all within the tolerances:
//  * GEMMs run in cuBLAS (CUBLAS_COMPUTE_32F). A product of an fp32 and a bf16
//    operand (the fp32 logit gradient times bf16 weights) rounds the fp32
//    operand to bf16, chunk by chunk through the device scratch, as Megatron
//    casts logit gradients before the output-layer GEMMs; fp32 x fp32 into a
//    bf16 C uses a plain CUDA kernel.
//  * Summation orders inside attention rows and GEMMs differ from Eigen's.
//  * Attention head width is limited to kMaxAttnHeadDim (256).
std::unique_ptr<Device> make_cuda_device(int local_rank);

// ---- memory ----
// The caching pool (PoolCore over cudaMalloc) of device `local_rank`, as a
// MemoryResource for TrackingAllocator. New blocks are zero-filled (as
// HostMemory's). reserved_slack() = reserved - requested bytes right now.
std::unique_ptr<MemoryResource> make_cuda_memory(int local_rank);

// What the GPU holds beyond the tracked tensors (the memory model's `runtime`
// and `fragmentation`), read now. Call it after the measured steps: NCCL and
// lazily loaded kernels add memory at their first use.
struct CudaMemoryReport {
  std::int64_t device_total = 0;      // cudaMemGetInfo
  std::int64_t device_free = 0;       // cudaMemGetInfo, now
  std::int64_t free_before_init = 0;  // before this process's CUDA context (NVML), or device_total
  bool baseline_measured = false;     // false: NVML unavailable, GPU assumed empty before init
  std::int64_t free_after_context = 0;  // cudaMemGetInfo right after the context was created
  PoolStats pool;                     // reserved, requested, peaks, slack at the peak
  // (free_before_init - device_free) - pool.reserved: CUDA context, module
  // images, cuBLAS workspace, device scratch, NCCL buffers, local memory.
  std::int64_t runtime = 0;
  // The same without the context itself: (free_after_context - device_free) - pool.reserved.
  std::int64_t runtime_after_context = 0;
  std::int64_t fragmentation = 0;  // pool.slack_at_peak
  std::string note;                // how the baseline was obtained
};
// `memory` must come from make_cuda_memory (std::invalid_argument otherwise).
CudaMemoryReport cuda_memory_report(const MemoryResource& memory);
// Forget the pool's peaks (e.g. after initialisation, with TrackingAllocator::reset_peaks).
void cuda_memory_reset_peaks(MemoryResource& memory);

// Copies raw bytes from device memory to the host after the queued work of
// device `local_rank` (masks, ids: Device has upload() but no raw download).
void cuda_download(int local_rank, const void* device_src, void* host, std::int64_t bytes);

// ---- communication ----
// The tp, dp, pp (and embedding) groups of world rank `rank` over NCCL: a world
// communicator from ncclGetUniqueId broadcast with MPI_Bcast (MPI must be
// initialised; world size tp*dp*pp), then one ncclCommSplit per group kind
// (colours from nccl_split_plan, split_plan.hpp). Uses the current CUDA
// device, which make_cuda_device/make_cuda_memory selected (std::logic_error
// if neither was called). Collectives run on the device's compute stream.
// Point to point: isend() is queued and launched together with the next
// recv() on the same communicator as one NCCL group (Megatron's batched
// isend/irecv), so the pipeline's "send one way, receive from the other"
// cannot deadlock; wait(), or any NCCL operation of this process, launches
// the sends still queued. Tags are ignored: NCCL matches the sends and
// receives of two ranks in issue order. Requests must not outlive their
// communicator.
Groups make_nccl_groups(int rank, int tp, int dp, int pp, bool embedding_group);
// Whether this binary was built with NCCL (it is whenever the CUDA toolkit has it).
bool have_nccl();

// ---- timing ----
// Phase marks as CUDA events on the compute stream of device `local_rank`:
// PhaseTimer t(clock.get()); t.begin("forward"); ... t.end("forward"); t.collect().
// Time collectives per group with time_groups() (timed_comm.hpp).
std::unique_ptr<PhaseClock> make_cuda_phase_clock(int local_rank);

// ---- calibration ----
// `paraplan calibrate --backend gpu` measures GEMMs and collectives through
// validate/calibrate.hpp, which is backend-agnostic (Device::synchronize
// around host-timed runs, the pool, the NCCL groups): nothing GPU-specific is
// needed for that. What the cluster spec also wants to know about the GPU:
struct GpuInfo {
  std::string name;
  std::int64_t memory_bytes = 0;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  double hbm_bytes_per_s = 0;  // 2 x memory clock x bus width, when the driver reports them
};
GpuInfo cuda_device_info(int local_rank);

}  // namespace paraplan::validate
