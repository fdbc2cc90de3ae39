#include "validate/gpu/cuda_context.hpp"

#include <dlfcn.h>

#include <map>
#include <mutex>

namespace paraplan::validate::cuda {

void throw_cuda(cudaError_t e, const char* what) {
  throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

void throw_cublas(cublasStatus_t s, const char* what) {
  throw std::runtime_error(std::string("cuBLAS: ") + what + ": " + cublasGetStatusString(s));
}

namespace {

// Free memory of device `ordinal` from NVML, read before this process creates a
// CUDA context there. NVML ships with the driver; it is loaded at run time so
// that nothing links against it. Returns -1 (and why) when it cannot be read.
std::int64_t nvml_free_bytes(int ordinal, std::string* note) {
  struct NvmlMemory {
    unsigned long long total, free, used;  // nvmlMemory_t
  };
  using InitFn = int (*)();
  using ByPciFn = int (*)(const char*, void**);
  using MemFn = int (*)(void*, NvmlMemory*);
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *note = "NVML (libnvidia-ml.so.1) not loadable; the GPU is assumed empty before init";
    return -1;
  }
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto by_pci = reinterpret_cast<ByPciFn>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
  auto mem = reinterpret_cast<MemFn>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  auto shutdown = reinterpret_cast<InitFn>(dlsym(lib, "nvmlShutdown"));
  char pci[64] = {};
  void* dev = nullptr;
  NvmlMemory m{};
  std::int64_t free_bytes = -1;
  // The PCI bus id identifies the same GPU whatever CUDA_VISIBLE_DEVICES says;
  // querying it initialises the driver but creates no context.
  if (init && by_pci && mem && shutdown && cudaDeviceGetPCIBusId(pci, sizeof pci, ordinal) == cudaSuccess &&
      init() == 0) {
    if (by_pci(pci, &dev) == 0 && mem(dev, &m) == 0) free_bytes = std::int64_t(m.free);
    shutdown();
  }
  dlclose(lib);
  *note = free_bytes >= 0 ? "NVML free memory before the CUDA context"
                          : "NVML could not read the device; the GPU is assumed empty before init";
  return free_bytes;
}

CudaContext* create(int ordinal) {
  auto* c = new CudaContext;  // never deleted: see the header
  c->ordinal = ordinal;
  c->free_before_init = nvml_free_bytes(ordinal, &c->baseline_note);
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  check(cudaFree(nullptr), "creating the CUDA context");
  size_t free_now = 0, total = 0;
  check(cudaMemGetInfo(&free_now, &total), "cudaMemGetInfo");
  c->free_after_context = std::int64_t(free_now);
  // A blocking stream: it also orders against the legacy default stream, so a
  // plain cudaMemcpy elsewhere cannot race with queued kernels.
  check(cudaStreamCreate(&c->stream), "cudaStreamCreate");
  check(cublasCreate(&c->cublas), "cublasCreate");
  check(cublasSetStream(c->cublas, c->stream), "cublasSetStream");
  check(cudaMalloc(&c->cublas_workspace, kCublasWorkspaceBytes), "cuBLAS workspace");
  check(cublasSetWorkspace(c->cublas, c->cublas_workspace, kCublasWorkspaceBytes), "cublasSetWorkspace");
  // fp32 GEMMs stay fp32 (no TF32) with CUBLAS_COMPUTE_32F under the default
  // math mode, unless NVIDIA_TF32_OVERRIDE=1 is set in the environment.
  check(cublasSetMathMode(c->cublas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  check(cudaMalloc(&c->scratch, kScratchBytes), "device scratch");
  check(cudaStreamSynchronize(c->stream), "context set-up");
  return c;
}

std::mutex g_mutex;
std::map<int, CudaContext*> g_contexts;

}  // namespace

CudaContext& cuda_context(int ordinal) {
  std::lock_guard<std::mutex> lock(g_mutex);
  CudaContext*& c = g_contexts[ordinal];
  if (!c) c = create(ordinal);
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  return *c;
}

CudaContext* existing_cuda_context(int ordinal) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_contexts.find(ordinal);
  return it == g_contexts.end() ? nullptr : it->second;
}

}  // namespace paraplan::validate::cuda
