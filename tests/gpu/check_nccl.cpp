// The NCCL communicators of make_nccl_groups on real GPUs, one MPI rank per
// GPU (mpirun -np 2, 4 or 8 on one node): for each layout of the world size,
// every group's membership (against group_members) and every collective's
// result (against values computed on the host) in fp32 and bf16, uneven
// ZeRO-style blocks, point-to-point rings in both directions, and the barrier.
// Exits 77 with the reason (on every rank) when there is no GPU per rank or no
// NCCL (ctest: label gpu, SKIP_RETURN_CODE 77); 1 if a check fails.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "validate/gpu/gpu_backend.hpp"

using namespace paraplan;
using namespace paraplan::validate;

namespace {

using i64 = std::int64_t;
using Vec = std::vector<float>;
std::size_t sz(i64 x) { return static_cast<std::size_t>(x); }

struct Ctx {
  int world_rank = 0;
  Device* dev = nullptr;
  TrackingAllocator* alloc = nullptr;
  int failures = 0, checks = 0;
};

void check(Ctx& c, bool ok, const std::string& what) {
  ++c.checks;
  if (!ok) {
    ++c.failures;
    std::printf("rank %d: FAILED %s\n", c.world_rank, what.c_str());
  }
}

Buffer put(Ctx& c, const Vec& v, DType t) {
  Buffer b(c.alloc, i64(v.size()), t, Category::kComm, "check");
  c.dev->from_host(v.data(), b.ref(), i64(v.size()));
  return b;
}
Vec get(Ctx& c, const Buffer& b, i64 n) {
  Vec v(static_cast<std::size_t>(n));
  c.dev->to_host(b.ref(), v.data(), n);
  return v;
}

// Small integers: exact in bf16 and in any summation order.
float value(int group_rank, i64 i) { return float((group_rank + 1) * 3 + i % 7); }

void check_comm(Ctx& c, Communicator& comm, const std::vector<int>& members, const std::string& label) {
  const int n = comm.size(), r = comm.rank();
  check(c, n == int(members.size()) && members.at(sz(r)) == c.world_rank, label + " size and rank");
  {  // membership: gather every rank's world rank
    Buffer in = put(c, {float(c.world_rank)}, DType::kFp32), out = put(c, Vec(n), DType::kFp32);
    comm.all_gather(in.ref(), out.ref(), 1);
    const Vec got = get(c, out, n);
    bool same = true;
    for (int k = 0; k < n; ++k) same = same && int(got[sz(k)]) == members[sz(k)];
    check(c, same, label + " all_gather of world ranks equals group_members()");
  }
  for (DType t : {DType::kFp32, DType::kBf16}) {
    const std::string tl = label + " [" + dtype_name(t) + "] ";
    const i64 m = 1000;
    Vec mine(m), sum(m, 0.0f), mx(m, -1e30f);
    for (i64 i = 0; i < m; ++i) {
      mine[sz(i)] = value(r, i);
      for (int k = 0; k < n; ++k) {
        sum[sz(i)] += value(k, i);
        mx[sz(i)] = std::max(mx[sz(i)], value(k, i));
      }
    }
    Buffer b = put(c, mine, t);
    comm.all_reduce(b.ref(), m, ReduceOp::kSum);
    check(c, get(c, b, m) == sum, tl + "all_reduce sum");
    Buffer bm = put(c, mine, t);
    comm.all_reduce(bm.ref(), m, ReduceOp::kMax);
    check(c, get(c, bm, m) == mx, tl + "all_reduce max");
    // all_gather / reduce_scatter of m elements per rank
    Vec full(sz(m * n)), block(m);
    for (int k = 0; k < n; ++k)
      for (i64 i = 0; i < m; ++i) full[sz(k * m + i)] = value(k, i);
    Buffer gin = put(c, mine, t), out = put(c, Vec(sz(m * n)), t);
    comm.all_gather(gin.ref(), out.ref(), m);
    check(c, get(c, out, m * n) == full, tl + "all_gather");
    Vec contrib(sz(m * n));  // every rank contributes value(r, j) at position j
    for (i64 j = 0; j < m * n; ++j) contrib[sz(j)] = value(r, j);
    Buffer in = put(c, contrib, t), rs = put(c, Vec(m), t);
    comm.reduce_scatter(in.ref(), rs.ref(), m);
    for (i64 i = 0; i < m; ++i) {
      block[sz(i)] = 0;
      for (int k = 0; k < n; ++k) block[sz(i)] += value(k, r * m + i);
    }
    check(c, get(c, rs, m) == block, tl + "reduce_scatter");
    // Uneven and even blocks of one flat buffer, offset by 5 elements.
    for (bool even : {false, true}) {
      std::vector<i64> counts(sz(n)), displs(sz(n));
      i64 total = 5;
      for (int k = 0; k < n; ++k) {
        counts[sz(k)] = even ? 64 : 3 + 11 * k;
        displs[sz(k)] = total;
        total += counts[sz(k)];
      }
      Vec buf(sz(total), -1.0f), want(sz(total));
      for (int k = 0; k < n; ++k)
        for (i64 i = 0; i < counts[sz(k)]; ++i) {
          const i64 at = displs[sz(k)] + i;
          want[sz(at)] = value(k, at);
          if (k == r) buf[sz(at)] = value(r, at);
        }
      Buffer gv = put(c, buf, t);
      comm.all_gather_v(gv.ref(), counts, displs);
      const Vec got = get(c, gv, total);
      check(c, Vec(got.begin() + 5, got.end()) == Vec(want.begin() + 5, want.end()),
            tl + (even ? "all_gather_v (even)" : "all_gather_v (uneven)"));
      Vec all(sz(total));
      for (i64 j = 0; j < total; ++j) all[sz(j)] = value(r, j);
      Buffer sv = put(c, all, t);
      comm.reduce_scatter_v(sv.ref(), counts, displs);
      const Vec red = get(c, sv, total);
      bool ok = true;
      for (i64 i = 0; i < counts[sz(r)]; ++i) {
        const i64 at = displs[sz(r)] + i;
        float s = 0;
        for (int k = 0; k < n; ++k) s += value(k, at);
        ok = ok && red[sz(at)] == s;
      }
      check(c, ok, tl + (even ? "reduce_scatter_v (even)" : "reduce_scatter_v (uneven)"));
    }
    if (n > 1) {  // the pipeline's pattern: isend, then the receive from the other side, then wait
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      const i64 len = i64(1) << 20;  // 2-4 MiB: more than one NCCL buffer chunk
      Buffer s1 = put(c, Vec(sz(len), float(r)), t), s2 = put(c, Vec(sz(len), float(r + 100)), t);
      Buffer r1 = put(c, Vec(sz(len)), t), r2 = put(c, Vec(sz(len)), t);
      auto q1 = comm.isend(s1.ref(), len, next, 1);  // activations forward
      comm.recv(r1.ref(), len, prev, 1);
      q1->wait();
      auto q2 = comm.isend(s2.ref(), len, prev, 2);  // gradients backward
      comm.recv(r2.ref(), len, next, 2);
      q2->wait();
      check(c, get(c, r1, len) == Vec(sz(len), float(prev)), tl + "isend/recv forward ring");
      check(c, get(c, r2, len) == Vec(sz(len), float(next + 100)), tl + "isend/recv backward ring");
    }
  }
  comm.barrier();
}

std::vector<int> world_members(int size) {
  std::vector<int> w(static_cast<std::size_t>(size));
  for (int k = 0; k < size; ++k) w[sz(k)] = k;
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, local = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local);
  std::string why;
  int usable = cuda_device_present(&why) ? 1 : 0;
  if (usable && local >= cuda_device_count()) usable = 0, why = "fewer GPUs than ranks on this node";
  if (usable && !have_nccl()) usable = 0, why = "built without NCCL";
  int all = 0;
  MPI_Allreduce(&usable, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    if (rank == 0)
      std::printf("SKIP: %s; the NCCL checks did not run\n", why.empty() ? "no GPU on some rank" : why.c_str());
    MPI_Finalize();
    return 77;
  }
  Ctx c;
  c.world_rank = rank;
  int failures = 0;
  {
    auto mem = make_cuda_memory(local);
    auto dev = make_cuda_device(local);
    TrackingAllocator alloc(mem.get());
    c.dev = dev.get();
    c.alloc = &alloc;
    struct L {
      int tp, dp, pp;
    };
    std::vector<L> layouts;
    if (size == 2) layouts = {{2, 1, 1}, {1, 2, 1}, {1, 1, 2}};
    else if (size == 4) layouts = {{2, 2, 1}, {2, 1, 2}, {1, 2, 2}, {1, 1, 4}};
    else if (size == 8) layouts = {{2, 2, 2}, {1, 2, 4}, {8, 1, 1}};
    else layouts = {{size, 1, 1}};
    for (const L& l : layouts) {
      const std::string label =
          "tp=" + std::to_string(l.tp) + " dp=" + std::to_string(l.dp) + " pp=" + std::to_string(l.pp);
      try {
        Groups g = make_nccl_groups(rank, l.tp, l.dp, l.pp, true);
        const GroupMembers want = group_members(rank, l.tp, l.dp, l.pp);
        check_comm(c, *g.world, world_members(size), label + " world");
        check_comm(c, *g.tp, want.tp, label + " tp");
        check_comm(c, *g.dp, want.dp, label + " dp");
        check_comm(c, *g.pp, want.pp, label + " pp");
        check(c, bool(g.embedding) == !want.embedding.empty(), label + " embedding group exactly on first/last stages");
        if (g.embedding) check_comm(c, *g.embedding, want.embedding, label + " embedding");
      } catch (const std::exception& e) {
        std::printf("rank %d: ERROR %s: %s\n", rank, label.c_str(), e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    }
    const CudaMemoryReport mr = cuda_memory_report(*mem);
    if (rank == 0)
      std::printf("rank 0 runtime memory after the NCCL groups: %.1f MiB (%s)\n", double(mr.runtime) / (1 << 20),
                  mr.note.c_str());
  }
  MPI_Allreduce(&c.failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%d ranks, %d checks each, %d FAILED\n", size, c.checks, failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
