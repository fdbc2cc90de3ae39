// Communicator over NCCL: a world communicator bootstrapped through MPI, split
// into the tp, dp, pp and embedding groups (split_plan.hpp). Every operation
// runs on the device's compute stream, so it is ordered with the kernels
// around it and timed by the same CUDA events.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <mutex>

#include "validate/gpu/cuda_context.hpp"
#include "validate/gpu/gpu_backend.hpp"
#include "validate/gpu/split_plan.hpp"

#ifdef PARAPLAN_HAVE_NCCL
#include <nccl.h>
#endif
#ifdef PARAPLAN_HAVE_MPI
#include <mpi.h>
#endif

namespace paraplan::validate {

#ifndef PARAPLAN_HAVE_NCCL

bool have_nccl() { return false; }

Groups make_nccl_groups(int, int, int, int, bool) {
  throw std::runtime_error("this paraplan was built without NCCL (nccl.h or libnccl was not found next to "
                           "the CUDA toolkit): --backend gpu runs only --emulate-rank");
}

#else

bool have_nccl() { return true; }

namespace {

using cuda::check;

void check_nccl(ncclResult_t r, ncclComm_t comm, const char* what) {
  if (r == ncclSuccess) return;
  std::string msg = std::string("NCCL: ") + what + ": " + ncclGetErrorString(r);
  if (comm) {
    const char* last = ncclGetLastError(comm);
    if (last && *last) msg += std::string(" (") + last + ")";
  }
  throw std::runtime_error(msg);
}

ncclDataType_t nccl_type(Ref r) {
  if (r.dtype == DType::kFp32) return ncclFloat32;
  if (r.dtype == DType::kBf16) return ncclBfloat16;
  throw std::invalid_argument("NCCL communicator: tensors are fp32 or bf16");
}

// Shared between a communicator's queue of sends and the Requests it returned.
struct SendState {
  bool launched = false;
};

class NcclComm;

// Every live communicator of this process: before any NCCL operation, the
// sends queued on all of them are launched, so that a rank never blocks in a
// collective (or a stream sync behind one) while a peer waits for a send that
// is still sitting in this process's queue.
std::mutex g_registry_mutex;
std::vector<NcclComm*> g_registry;
void flush_all_sends(const NcclComm* except);

class NcclRequest final : public Request {
 public:
  NcclRequest(NcclComm* comm, std::shared_ptr<SendState> s) : comm_(comm), state_(std::move(s)) {}
  ~NcclRequest() override;
  void wait() override;

 private:
  NcclComm* comm_;
  std::shared_ptr<SendState> state_;
};

class NcclComm final : public Communicator {
 public:
  NcclComm(std::string name, ncclComm_t comm, cudaStream_t stream) : name_(std::move(name)), comm_(comm), st_(stream) {
    check_nccl(ncclCommUserRank(comm_, &rank_), comm_, "ncclCommUserRank");
    check_nccl(ncclCommCount(comm_, &size_), comm_, "ncclCommCount");
    check(cudaMalloc(&one_, sizeof(float)), "barrier buffer");
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    g_registry.push_back(this);
  }
  ~NcclComm() override {
    {
      std::lock_guard<std::mutex> lock(g_registry_mutex);
      g_registry.erase(std::find(g_registry.begin(), g_registry.end(), this));
    }
    try {
      flush_sends();
    } catch (...) {  // a destructor must not throw; the peer will report the failure
    }
    (void)cudaStreamSynchronize(st_);
    (void)cudaFree(one_);
    (void)ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }

  void all_reduce(Ref buf, std::int64_t n, ReduceOp op) override {
    before_op();
    if (n <= 0) return;
    check_nccl(ncclAllReduce(buf.data, buf.data, size_t(n), nccl_type(buf), op == ReduceOp::kSum ? ncclSum : ncclMax,
                             comm_, st_),
               comm_, "ncclAllReduce");
  }
  void all_gather(CRef in, Ref out, std::int64_t n) override {
    before_op();
    if (n <= 0) return;
    same_type(in, out);
    check_nccl(ncclAllGather(in.data, out.data, size_t(n), nccl_type(in), comm_, st_), comm_, "ncclAllGather");
  }
  void reduce_scatter(CRef in, Ref out, std::int64_t n) override {
    before_op();
    if (n <= 0) return;
    same_type(in, out);
    check_nccl(ncclReduceScatter(in.data, out.data, size_t(n), nccl_type(in), ncclSum, comm_, st_), comm_,
               "ncclReduceScatter");
  }
  // Uneven blocks: each rank broadcasts its block in place, all in one group;
  // equal contiguous blocks: one in-place ncclAllGather.
  void all_gather_v(Ref buf, const std::vector<std::int64_t>& counts,
                    const std::vector<std::int64_t>& displs) override {
    before_op();
    const bool even = check_layout(counts, displs);
    const ncclDataType_t type = nccl_type(buf);  // before any group: nothing may throw inside one
    if (even) {
      if (counts[0] > 0) {
        Ref base = buf.at(displs[0]);
        check_nccl(ncclAllGather(base.at(rank_ * counts[0]).data, base.data, size_t(counts[0]), type, comm_, st_),
                   comm_, "ncclAllGather");
      }
      return;
    }
    check_nccl(ncclGroupStart(), comm_, "ncclGroupStart");
    for (int r = 0; r < size_; ++r)
      if (counts[r] > 0) {
        void* block = buf.at(displs[r]).data;
        check_nccl(ncclBroadcast(block, block, size_t(counts[r]), type, r, comm_, st_), comm_, "ncclBroadcast");
      }
    check_nccl(ncclGroupEnd(), comm_, "ncclGroupEnd");
  }
  // In place: this rank's block gets the sum of that block over the ranks.
  // Uneven blocks: one in-place reduce per block to its owner, all in one
  // group; equal contiguous blocks: one in-place ncclReduceScatter.
  void reduce_scatter_v(Ref buf, const std::vector<std::int64_t>& counts,
                        const std::vector<std::int64_t>& displs) override {
    before_op();
    const bool even = check_layout(counts, displs);
    const ncclDataType_t type = nccl_type(buf);
    if (even) {
      if (counts[0] > 0) {
        Ref base = buf.at(displs[0]);
        check_nccl(ncclReduceScatter(base.data, base.at(rank_ * counts[0]).data, size_t(counts[0]), type, ncclSum,
                                     comm_, st_),
                   comm_, "ncclReduceScatter");
      }
      return;
    }
    check_nccl(ncclGroupStart(), comm_, "ncclGroupStart");
    for (int r = 0; r < size_; ++r)
      if (counts[r] > 0) {
        void* block = buf.at(displs[r]).data;  // the receive buffer matters on the root only
        check_nccl(ncclReduce(block, block, size_t(counts[r]), type, ncclSum, r, comm_, st_), comm_, "ncclReduce");
      }
    check_nccl(ncclGroupEnd(), comm_, "ncclGroupEnd");
  }

  std::unique_ptr<Request> isend(CRef buf, std::int64_t n, int peer, int) override {
    check_peer(peer);
    auto state = std::make_shared<SendState>();
    if (n > 0) {
      pending_.push_back(Pending{buf.data, size_t(n), nccl_type(buf), peer, state});
    } else {
      state->launched = true;
    }
    return std::make_unique<NcclRequest>(this, std::move(state));
  }
  void recv(Ref buf, std::int64_t n, int peer, int) override {
    check_peer(peer);
    const ncclDataType_t type = nccl_type(buf);
    flush_all_sends(this);  // this communicator's own sends go in the group with the receive
    check_nccl(ncclGroupStart(), comm_, "ncclGroupStart");
    launch_pending();
    if (n > 0) check_nccl(ncclRecv(buf.data, size_t(n), type, peer, comm_, st_), comm_, "ncclRecv");
    check_nccl(ncclGroupEnd(), comm_, "ncclGroupEnd");
  }
  void barrier() override {
    before_op();
    check_nccl(ncclAllReduce(one_, one_, 1, ncclFloat32, ncclSum, comm_, st_), comm_, "barrier");
    check(cudaStreamSynchronize(st_), "barrier");
  }

  // Launches the queued sends as one group.
  void flush_sends() {
    if (pending_.empty()) return;
    check_nccl(ncclGroupStart(), comm_, "ncclGroupStart");
    launch_pending();
    check_nccl(ncclGroupEnd(), comm_, "ncclGroupEnd");
  }

 private:
  struct Pending {
    const void* buf;
    size_t count;
    ncclDataType_t type;
    int peer;
    std::shared_ptr<SendState> state;
  };

  // Before a collective: every queued send of this process goes out first.
  void before_op() { flush_all_sends(nullptr); }

  // Inside an open group.
  void launch_pending() {
    for (Pending& p : pending_) {
      check_nccl(ncclSend(p.buf, p.count, p.type, p.peer, comm_, st_), comm_, "ncclSend");
      p.state->launched = true;
    }
    pending_.clear();
  }
  void check_peer(int peer) const {
    if (peer < 0 || peer >= size_ || peer == rank_)
      throw std::invalid_argument(name_ + ": peer " + std::to_string(peer) + " is not another rank of the group");
  }
  // Whether the blocks are equal and back to back in rank order.
  bool check_layout(const std::vector<std::int64_t>& counts, const std::vector<std::int64_t>& displs) const {
    if (int(counts.size()) != size_ || int(displs.size()) != size_)
      throw std::invalid_argument(name_ + ": counts/displs need one entry per rank");
    for (int r = 0; r < size_; ++r)
      if (counts[r] != counts[0] || displs[r] != displs[0] + r * counts[0]) return false;
    return true;
  }
  static void same_type(CRef in, Ref out) {
    if (in.dtype != out.dtype) throw std::invalid_argument("NCCL communicator: input and output types differ");
  }

  std::string name_;
  ncclComm_t comm_;
  cudaStream_t st_;
  int rank_ = 0, size_ = 1;
  float* one_ = nullptr;
  std::vector<Pending> pending_;
};

void flush_all_sends(const NcclComm* except) {
  std::vector<NcclComm*> comms;
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    comms = g_registry;
  }
  for (NcclComm* c : comms)
    if (c != except) c->flush_sends();
}

NcclRequest::~NcclRequest() {
  try {
    wait();  // a send must not be dropped: the peer is waiting for it
  } catch (...) {
  }
}

void NcclRequest::wait() {
  if (!state_->launched) comm_->flush_sends();
  // Stream order does the rest: later work on the buffer runs after the send.
}

// The world communicator of `size` ranks: rank 0's unique id reaches the
// others through MPI.
ncclComm_t init_world(int rank, int size) {
  ncclUniqueId id;
#ifdef PARAPLAN_HAVE_MPI
  int mpi_up = 0;
  MPI_Initialized(&mpi_up);
  if (mpi_up) {
    int mpi_rank = 0, mpi_size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    if (mpi_size != size || mpi_rank != rank)
      throw std::invalid_argument("make_nccl_groups: MPI has " + std::to_string(mpi_size) + " ranks (this is " +
                                  std::to_string(mpi_rank) + "), the layout needs " + std::to_string(size) +
                                  " (this is " + std::to_string(rank) + ")");
    if (rank == 0) check_nccl(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId");
    MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD);
  } else
#endif
  {
    if (size != 1)
      throw std::logic_error("make_nccl_groups: " + std::to_string(size) +
                             " ranks need MPI (initialised, e.g. by mpi_init) to share the NCCL id");
    check_nccl(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId");
  }
  ncclComm_t world = nullptr;
  check_nccl(ncclCommInitRank(&world, size, id, rank), nullptr, "ncclCommInitRank");
  return world;
}

}  // namespace

Groups make_nccl_groups(int rank, int tp, int dp, int pp, bool embedding_group) {
  const std::vector<SplitSpec> plan = nccl_split_plan(rank, tp, dp, pp, embedding_group);  // checks the sizes
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  cuda::CudaContext* ctx = cuda::existing_cuda_context(dev);
  if (!ctx)
    throw std::logic_error("make_nccl_groups: call make_cuda_device(local_rank) first, so that each rank's "
                           "communicators live on its own GPU");
  ncclComm_t world = init_world(rank, tp * dp * pp);
  Groups g;
  g.world = std::make_unique<NcclComm>("world", world, ctx->stream);
  for (const SplitSpec& s : plan) {
    // Collective over the world communicator: every rank splits, in plan order.
    ncclComm_t c = nullptr;
    check_nccl(ncclCommSplit(world, s.color == kNoColor ? NCCL_SPLIT_NOCOLOR : s.color, s.key, &c, nullptr), world,
               "ncclCommSplit");
    if (s.color == kNoColor) continue;
    auto comm = std::make_unique<NcclComm>(s.name, c, ctx->stream);
    if (comm->size() != int(s.members.size()) || comm->rank() != s.key)
      throw std::logic_error("make_nccl_groups: NCCL's " + s.name + " group disagrees with group_members()");
    if (s.name == "tp") g.tp = std::move(comm);
    else if (s.name == "dp") g.dp = std::move(comm);
    else if (s.name == "pp") g.pp = std::move(comm);
    else g.embedding = std::move(comm);
  }
  return g;
}

#endif  // PARAPLAN_HAVE_NCCL

}  // namespace paraplan::validate
