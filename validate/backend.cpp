// The backend registry: the only file with #ifdef for optional backends.
#include "validate/backend.hpp"

#include <cstdlib>
#include <stdexcept>

#include "validate/cpu/cpu_device.hpp"
#ifdef PARAPLAN_HAVE_CUDA
#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>

#include "validate/gpu/gpu_module.hpp"
#endif

namespace paraplan::validate {

#ifdef PARAPLAN_HAVE_CUDA
namespace {

// The GPU backend module, loaded at its first use: from the build tree it was
// built in (PARAPLAN_GPU_MODULE), else next to this executable, else from
// PARAPLAN_GPU_MODULE_PATH. Throws with dlerror's words when it cannot load.
const GpuModuleEntry& gpu_module() {
  static const GpuModuleEntry* entry = [] {
    std::string tried, err;
    std::vector<std::string> paths;
    if (const char* env = std::getenv("PARAPLAN_GPU_MODULE_PATH"); env && *env) paths.emplace_back(env);
    paths.emplace_back(PARAPLAN_GPU_MODULE);
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) paths.push_back((self.parent_path() / std::filesystem::path(PARAPLAN_GPU_MODULE).filename()).string());
    for (const std::string& p : paths) {
      void* h = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        const char* e = ::dlerror();
        err += (err.empty() ? "" : "; ") + p + ": " + (e ? e : "cannot load");
        continue;
      }
      using EntryFn = const GpuModuleEntry* (*)();
      auto fn = reinterpret_cast<EntryFn>(::dlsym(h, "paraplan_gpu_module_entry"));
      if (!fn) throw std::runtime_error("the GPU backend module " + p + " has no paraplan_gpu_module_entry");
      const GpuModuleEntry* e = fn();
      if (e->abi != kGpuModuleAbi)
        throw std::runtime_error("the GPU backend module " + p + " is from another paraplan build (ABI " +
                                 std::to_string(e->abi) + ", expected " + std::to_string(kGpuModuleAbi) + ")");
      return e;
    }
    throw std::runtime_error("cannot load the GPU backend module (" + err + ")");
  }();
  return *entry;
}

}  // namespace

bool gpu_module_loadable(std::string* why) {
  try {
    (void)gpu_module();
    return true;
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return false;
  }
}
#else
bool gpu_module_loadable(std::string* why) {
  if (why) *why = "this paraplan was built without CUDA";
  return false;
}
#endif

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
  if (b == Backend::kGpu) return gpu_module().make_device(local_rank);
#endif
  if (b == Backend::kCpu) return make_cpu_device();
  throw std::runtime_error("this paraplan was built without CUDA: --backend gpu is unavailable");
}

std::unique_ptr<MemoryResource> make_memory(Backend b, int local_rank) {
  (void)local_rank;
#ifdef PARAPLAN_HAVE_CUDA
  if (b == Backend::kGpu) return gpu_module().make_memory(local_rank);
#endif
  if (b == Backend::kCpu) return std::make_unique<HostMemory>();
  throw std::runtime_error("this paraplan was built without CUDA: --backend gpu is unavailable");
}

Groups make_groups(Backend b, int rank, int tp, int dp, int pp, bool embedding_group) {
#ifdef PARAPLAN_HAVE_CUDA
  if (b == Backend::kGpu) return gpu_module().make_groups(rank, tp, dp, pp, embedding_group);
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
