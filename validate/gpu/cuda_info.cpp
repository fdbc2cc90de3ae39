// What the GPU is, for the cluster spec `paraplan calibrate --backend gpu` writes.
#include <cuda_runtime_api.h>

#include "validate/gpu/cuda_context.hpp"
#include "validate/gpu/gpu_backend.hpp"

namespace paraplan::validate {

using cuda::check;

GpuInfo cuda_device_info(int local_rank) {
  cuda::cuda_context(local_rank);
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, local_rank), "cudaGetDeviceProperties");
  GpuInfo g;
  g.name = p.name;
  g.memory_bytes = std::int64_t(p.totalGlobalMem);
  g.sm_count = p.multiProcessorCount;
  g.cc_major = p.major;
  g.cc_minor = p.minor;
  int clock_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, local_rank) == cudaSuccess &&
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, local_rank) == cudaSuccess)
    g.hbm_bytes_per_s = 2.0 * clock_khz * 1e3 * bus_bits / 8.0;  // double data rate
  (void)cudaGetLastError();
  return g;
}

}  // namespace paraplan::validate
