// PhaseClock over CUDA events recorded on the compute stream.
#include <cuda_runtime_api.h>

#include <vector>

#include "validate/gpu/cuda_context.hpp"
#include "validate/gpu/gpu_backend.hpp"

namespace paraplan::validate {
namespace {

using cuda::check;

class CudaEventClock final : public PhaseClock {
 public:
  explicit CudaEventClock(int ordinal) : ctx_(cuda::cuda_context(ordinal)) {}
  ~CudaEventClock() override {
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
  }

  int mark() override {
    if (next_ == events_.size()) {  // events are created once and reused after reset()
      cudaEvent_t e;
      check(cudaEventCreate(&e), "cudaEventCreate");
      events_.push_back(e);
    }
    check(cudaEventRecord(events_[next_], ctx_.stream), "cudaEventRecord");
    return int(next_++);
  }
  void sync() override {
    // One stream: the last mark completes after every earlier one.
    if (next_ > 0) check(cudaEventSynchronize(events_[next_ - 1]), "cudaEventSynchronize");
  }
  double elapsed_ms(int from, int to) override {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, events_.at(size_t(from)), events_.at(size_t(to))), "cudaEventElapsedTime");
    return ms;
  }
  void reset() override { next_ = 0; }

 private:
  cuda::CudaContext& ctx_;
  std::vector<cudaEvent_t> events_;
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<PhaseClock> make_cuda_phase_clock(int local_rank) {
  return std::make_unique<CudaEventClock>(local_rank);
}

}  // namespace paraplan::validate
