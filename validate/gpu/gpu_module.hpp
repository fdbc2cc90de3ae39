// What the GPU module (libparaplan_gpu_module.so, gpu_module.cpp) hands the
// loader in validate/backend.cpp: the three entry points of the GPU backend.
// Plain C++, no CUDA: the loader includes it without the toolkit.
#pragma once

#include <memory>

#include "validate/allocator.hpp"
#include "validate/comm.hpp"
#include "validate/device.hpp"

namespace paraplan::validate {

// Bumped whenever GpuModuleEntry or the classes it passes change.
inline constexpr int kGpuModuleAbi = 2;  // 2: MemoryResource::outside()

struct GpuModuleEntry {
  int abi;
  std::unique_ptr<Device> (*make_device)(int local_rank);
  std::unique_ptr<MemoryResource> (*make_memory)(int local_rank);
  Groups (*make_groups)(int rank, int tp, int dp, int pp, bool embedding_group);
};

}  // namespace paraplan::validate

// The one symbol the module exports for the loader.
extern "C" const paraplan::validate::GpuModuleEntry* paraplan_gpu_module_entry();
