// The GPU's MemoryResource: PoolCore (pool_core.hpp) over cudaMalloc, and the
// runtime/fragmentation report.
#include <cuda_runtime_api.h>

#include "validate/gpu/cuda_context.hpp"
#include "validate/gpu/gpu_backend.hpp"

namespace paraplan::validate {
namespace {

using cuda::check;

class CudaSegments final : public SegmentSource {
 public:
  void* map(std::int64_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, size_t(bytes));
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear it: running out is an answer, not a failure
      return nullptr;
    }
    check(e, "cudaMalloc");
    return p;
  }
  void unmap(void* p, std::int64_t) override { (void)cudaFree(p); }  // no throw: called from destructors
};

class CudaPool final : public MemoryResource {
 public:
  explicit CudaPool(int ordinal) : ctx_(cuda::cuda_context(ordinal)), core_(&segments_) {}
  ~CudaPool() override { (void)cudaStreamSynchronize(ctx_.stream); }  // queued work may still use the blocks

  void* allocate(std::int64_t bytes) override {
    void* p = core_.allocate(bytes);
    // Zero-filled like HostMemory. Stream-ordered, so work queued earlier on
    // a block this one reuses has finished before the fill.
    if (p && bytes > 0) check(cudaMemsetAsync(p, 0, size_t(bytes), ctx_.stream), "zero-filling a new block");
    return p;
  }
  void deallocate(void* p, std::int64_t) override { core_.deallocate(p); }
  std::int64_t reserved_slack() const override { return core_.slack(); }
  Outside outside() const override {
    const CudaMemoryReport r = cuda_memory_report(*this);
    return {r.runtime > 0 ? r.runtime : 0, r.fragmentation};
  }

  const PoolCore& core() const { return core_; }
  PoolCore& core() { return core_; }
  const cuda::CudaContext& context() const { return ctx_; }

 private:
  cuda::CudaContext& ctx_;
  CudaSegments segments_;  // declared before core_: core_ unmaps through it when destroyed
  PoolCore core_;
};

}  // namespace

std::unique_ptr<MemoryResource> make_cuda_memory(int local_rank) { return std::make_unique<CudaPool>(local_rank); }

CudaMemoryReport cuda_memory_report(const MemoryResource& memory) {
  const auto* pool = dynamic_cast<const CudaPool*>(&memory);
  if (!pool) throw std::invalid_argument("cuda_memory_report: not a pool from make_cuda_memory");
  const cuda::CudaContext& c = pool->context();
  check(cudaSetDevice(c.ordinal), "cudaSetDevice");
  check(cudaStreamSynchronize(c.stream), "cuda_memory_report");
  size_t free_now = 0, total = 0;
  check(cudaMemGetInfo(&free_now, &total), "cudaMemGetInfo");
  CudaMemoryReport r;
  r.device_total = std::int64_t(total);
  r.device_free = std::int64_t(free_now);
  r.baseline_measured = c.free_before_init >= 0;
  r.free_before_init = r.baseline_measured ? c.free_before_init : r.device_total;
  r.pool = pool->core().stats();
  r.free_after_context = c.free_after_context;
  r.runtime = (r.free_before_init - r.device_free) - r.pool.reserved;
  r.runtime_after_context = (r.free_after_context - r.device_free) - r.pool.reserved;
  r.fragmentation = r.pool.slack_at_peak;
  r.note = c.baseline_note;
  return r;
}

void cuda_memory_reset_peaks(MemoryResource& memory) {
  auto* pool = dynamic_cast<CudaPool*>(&memory);
  if (!pool) throw std::invalid_argument("cuda_memory_reset_peaks: not a pool from make_cuda_memory");
  pool->core().reset_peaks();
}

}  // namespace paraplan::validate
