// Backend registry: the one place that knows which backends were built.
// `#ifdef PARAPLAN_HAVE_CUDA` appears in validate/backend.cpp only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "validate/allocator.hpp"
#include "validate/comm.hpp"
#include "validate/device.hpp"

namespace paraplan::validate {

enum class Backend { kCpu, kGpu };
const char* backend_name(Backend b);
// "cpu" | "gpu"; false for anything else.
bool parse_backend(const std::string& s, Backend* out);
// Backends compiled into this binary, e.g. {"cpu"} or {"cpu", "gpu"}.
std::vector<std::string> available_backends();
bool backend_available(Backend b);
// The GPU backend is a module loaded at its first use (validate/gpu/gpu_module.cpp):
// whether it loads here, and if not why (built without CUDA, library missing, ...).
bool gpu_module_loadable(std::string* why);

// Kernels and raw memory of a backend. For the GPU backend `local_rank`
// picks the device (rank within the node).
std::unique_ptr<Device> make_device(Backend b, int local_rank = 0);
std::unique_ptr<MemoryResource> make_memory(Backend b, int local_rank = 0);

// Whether this binary has MPI (multi-rank runs and calibration of collectives).
bool have_mpi();
// MPI_Init (idempotent) / MPI_Finalize. world rank and size after init.
void mpi_init(int* rank, int* size);
void mpi_finalize();
// Rank 0 receives every rank's string (in rank order); others get {}.
std::vector<std::string> mpi_gather_strings(const std::string& mine);
// Aborts every rank (a rank that cannot go on must not leave the others hanging).
[[noreturn]] void mpi_abort(int code);

// The tp, dp, pp (and embedding) groups of world rank `rank` over MPI (CPU
// backend) or NCCL bootstrapped through MPI (GPU backend).
Groups make_groups(Backend b, int rank, int tp, int dp, int pp, bool embedding_group);

}  // namespace paraplan::validate
