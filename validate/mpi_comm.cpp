// Communicator over MPI (CPU backend). bf16 reductions use a user-defined op
// that adds in fp32 and rounds once per pairwise step, as NCCL does.
// The C API only: Open MPI's deprecated C++ bindings do not compile warning-free.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <fmt/format.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "validate/backend.hpp"
#include "validate/comm.hpp"

namespace paraplan::validate {

namespace {

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(fmt::format("MPI error {} in {}", rc, what));
}

int icount(std::int64_t n) {
  if (n > INT_MAX) throw std::runtime_error("MPI message larger than 2^31 elements");
  return int(n);
}

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<bf16*>(in);
  auto* b = static_cast<bf16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = to_bf16(to_float(a[i]) + to_float(b[i]));
}
void bf16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<bf16*>(in);
  auto* b = static_cast<bf16*>(inout);
  for (int i = 0; i < *len; ++i)
    if (to_float(a[i]) > to_float(b[i])) b[i] = a[i];
}

MPI_Op op_of(DType t, ReduceOp op) {
  if (t == DType::kFp32) return op == ReduceOp::kSum ? MPI_SUM : MPI_MAX;
  static MPI_Op sum = MPI_OP_NULL, max = MPI_OP_NULL;
  if (sum == MPI_OP_NULL) {
    MPI_Op_create(&bf16_sum, 1, &sum);
    MPI_Op_create(&bf16_max, 1, &max);
  }
  return op == ReduceOp::kSum ? sum : max;
}
MPI_Datatype type_of(DType t) { return t == DType::kFp32 ? MPI_FLOAT : MPI_UINT16_T; }

class MpiRequest final : public Request {
 public:
  explicit MpiRequest(MPI_Request r) : r_(r) {}
  ~MpiRequest() override {
    if (r_ != MPI_REQUEST_NULL) MPI_Wait(&r_, MPI_STATUS_IGNORE);
  }
  void wait() override { check(MPI_Wait(&r_, MPI_STATUS_IGNORE), "MPI_Wait"); }

 private:
  MPI_Request r_;
};

class MpiComm final : public Communicator {
 public:
  MpiComm(MPI_Comm c, std::string name) : comm_(c), name_(std::move(name)) {
    MPI_Comm_rank(c, &rank_);
    MPI_Comm_size(c, &size_);
  }
  ~MpiComm() override {
    if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }

  void all_reduce(Ref buf, std::int64_t n, ReduceOp op) override {
    if (size_ == 1) return;
    check(MPI_Allreduce(MPI_IN_PLACE, buf.data, icount(n), type_of(buf.dtype), op_of(buf.dtype, op),
                        comm_),
          "MPI_Allreduce");
  }
  void all_gather(CRef in, Ref out, std::int64_t n) override {
    check(MPI_Allgather(in.data, icount(n), type_of(in.dtype), out.data, icount(n),
                        type_of(out.dtype), comm_),
          "MPI_Allgather");
  }
  void reduce_scatter(CRef in, Ref out, std::int64_t n) override {
    check(MPI_Reduce_scatter_block(in.data, out.data, icount(n), type_of(in.dtype),
                                   op_of(in.dtype, ReduceOp::kSum), comm_),
          "MPI_Reduce_scatter_block");
  }
  void all_gather_v(Ref buf, const std::vector<std::int64_t>& counts,
                    const std::vector<std::int64_t>& displs) override {
    std::vector<int> c(size_), d(size_);
    for (int i = 0; i < size_; ++i) c[i] = icount(counts[i]), d[i] = icount(displs[i]);
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf.data, c.data(), d.data(),
                         type_of(buf.dtype), comm_),
          "MPI_Allgatherv");
  }
  void reduce_scatter_v(Ref buf, const std::vector<std::int64_t>& counts,
                        const std::vector<std::int64_t>& displs) override {
    // MPI_Reduce_scatter in place takes the blocks back to back from the start
    // of buf and leaves this rank's result at the start; move it to its block.
    std::vector<int> c(size_);
    std::int64_t expect = displs[0];
    for (int i = 0; i < size_; ++i) {
      if (displs[i] != expect) throw std::logic_error("reduce_scatter_v: blocks not contiguous");
      c[i] = icount(counts[i]);
      expect += counts[i];
    }
    Ref base = buf.at(displs[0]);
    if (size_ > 1)
      check(MPI_Reduce_scatter(MPI_IN_PLACE, base.data, c.data(), type_of(buf.dtype),
                               op_of(buf.dtype, ReduceOp::kSum), comm_),
            "MPI_Reduce_scatter");
    const std::int64_t off = displs[rank_] - displs[0];
    if (off > 0 && counts[rank_] > 0)
      std::memmove(base.at(off).data, base.data, std::size_t(counts[rank_] * storage_bytes(buf.dtype)));
  }
  std::unique_ptr<Request> isend(CRef buf, std::int64_t n, int peer, int tag) override {
    MPI_Request r;
    check(MPI_Isend(buf.data, icount(n), type_of(buf.dtype), peer, tag, comm_, &r), "MPI_Isend");
    return std::make_unique<MpiRequest>(r);
  }
  void recv(Ref buf, std::int64_t n, int peer, int tag) override {
    check(MPI_Recv(buf.data, icount(n), type_of(buf.dtype), peer, tag, comm_, MPI_STATUS_IGNORE),
          "MPI_Recv");
  }
  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }

 private:
  MPI_Comm comm_;
  std::string name_;
  int rank_ = 0, size_ = 1;
};

std::unique_ptr<Communicator> split(int color, int key, const char* name) {
  MPI_Comm c;
  check(MPI_Comm_split(MPI_COMM_WORLD, color, key, &c), "MPI_Comm_split");
  if (c == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiComm>(c, name);
}

}  // namespace

bool have_mpi() { return true; }

void mpi_init(int* rank, int* size) {
  int init = 0;
  MPI_Initialized(&init);
  if (!init) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
}

void mpi_finalize() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Finalize();
}

void mpi_abort(int code) {
  int init = 0;
  MPI_Initialized(&init);
  if (init) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

std::vector<std::string> mpi_gather_strings(const std::string& mine) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int len = icount(std::int64_t(mine.size()));
  std::vector<int> lens(size), displs(size);
  check(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
  std::int64_t total = 0;
  for (int i = 0; i < size; ++i) displs[i] = icount(total), total += lens[i];
  std::string all(rank == 0 ? std::size_t(total) : 0, '\0');
  check(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0,
                    MPI_COMM_WORLD),
        "MPI_Gatherv");
  std::vector<std::string> out;
  if (rank == 0)
    for (int i = 0; i < size; ++i) out.push_back(all.substr(std::size_t(displs[i]), std::size_t(lens[i])));
  return out;
}

Groups make_mpi_groups(int rank, int tp, int dp, int pp, bool embedding_group) {
  const RankCoords c = coords_of(rank, tp, dp);
  Groups g;
  g.world = std::make_unique<MpiComm>(MPI_COMM_WORLD, "world");
  g.tp = split(c.stage * dp + c.dp_rank, c.tp_rank, "tp");
  g.dp = split(c.stage * tp + c.tp_rank, c.dp_rank, "dp");
  g.pp = split(c.dp_rank * tp + c.tp_rank, c.stage, "pp");
  const bool member = embedding_group && pp > 1 && (c.stage == 0 || c.stage == pp - 1);
  g.embedding = split(member ? c.dp_rank * tp + c.tp_rank : MPI_UNDEFINED, c.stage, "embedding");
  return g;
}

}  // namespace paraplan::validate
