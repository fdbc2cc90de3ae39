// The GPU backend as a module that paraplan loads (dlopen) only when a run asks
// for --backend gpu, so that plan, explain, check and the CPU backend never load
// CUDA, cuBLAS (cuBLASLt alone is 540 MB) or NCCL: each paraplan process then
// holds ~20 MB instead of ~225 MB (400 concurrent plans no longer exhaust 24 GB).
// The module's references to paraplan_validate resolve against the executable
// (built with ENABLE_EXPORTS); validate/backend.cpp is the loader.
#include "validate/gpu/gpu_module.hpp"

#include "validate/gpu/gpu_backend.hpp"

extern "C" const paraplan::validate::GpuModuleEntry* paraplan_gpu_module_entry() {
  using namespace paraplan::validate;
  static const GpuModuleEntry entry{kGpuModuleAbi, &make_cuda_device, &make_cuda_memory, &make_nccl_groups};
  return &entry;
}
