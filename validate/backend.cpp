// The backend registry: the only file with #ifdef for optional backends.
#include "validate/backend.hpp"

#include <cstdlib>
#include <stdexcept>

#include "validate/cpu/cpu_device.hpp"
#ifdef PARAPLAN_HAVE_CUDA
#include "validate/gpu/gpu_backend.hpp"
#endif

namespace paraplan::validate {

#ifdef PARAPLAN_HAVE_MPI
Groups make_mpi_groups(int rank, int tp, int dp, int pp, bool embedding_group);  // mpi_comm.cpp
#else
bool have_mpi() { return false; }
void mpi_init(int* rank, int* size) { *rank = 0, *size = 1; }
void mpi_finalize() {}
void mpi_abort(int code) { std::exit(code); }
std::vector<std::string> mpi_gather_strings(const std::string& mine) { return {mine}; }
#endif

const char* backend_name(Backend b) { return b == Backend::kCpu ? "cpu" : "gpu"; }

bool parse_backend(const std::string& s, Backend* out) {
  if (s == "cpu") return *out = Backend::kCpu, true;
  if (s == "gpu") return *out = Backend::kGpu, true;
  return false;
}

bool backend_available(Backend b) {
#ifdef PARAPLAN_HAVE_CUDA
  (void)b;
  return true;
#else
  return b == Backend::kCpu;
#endif
}

std::vector<std::string> available_backends() {
  std::vector<std::string> v{"cpu"};
  if (backend_available(Backend::kGpu)) v.push_back("gpu");
  return v;
}

std::unique_ptr<Device> make_device(Backend b, int local_rank) {
  (void)local_rank;
#ifdef PARAPLAN_HAVE_CUDA
  if (b == Backend::kGpu) return make_cuda_device(local_rank);
#endif
  if (b == Backend::kCpu) return make_cpu_device();
  throw std::runtime_error("this paraplan was built without CUDA: --backend gpu is unavailable");
}

std::unique_ptr<MemoryResource> make_memory(Backend b, int local_rank) {
  (void)local_rank;
#ifdef PARAPLAN_HAVE_CUDA
  if (b == Backend::kGpu) return make_cuda_memory(local_rank);
#endif
  if (b == Backend::kCpu) return std::make_unique<HostMemory>();
  throw std::runtime_error("this paraplan was built without CUDA: --backend gpu is unavailable");
}

Groups make_groups(Backend b, int rank, int tp, int dp, int pp, bool embedding_group) {
#ifdef PARAPLAN_HAVE_CUDA
  if (b == Backend::kGpu) return make_nccl_groups(rank, tp, dp, pp, embedding_group);
#endif
#ifdef PARAPLAN_HAVE_MPI
  if (b == Backend::kCpu) return make_mpi_groups(rank, tp, dp, pp, embedding_group);
  throw std::runtime_error("this paraplan was built without CUDA: --backend gpu is unavailable");
#else
  (void)b, (void)rank, (void)tp, (void)dp, (void)pp, (void)embedding_group;
  throw std::runtime_error("this paraplan was built without MPI: multi-rank runs are unavailable "
                           "(install libopenmpi-dev and rebuild); --emulate-rank still works");
#endif
}

}  // namespace paraplan::validate
