// The communication seam: one Communicator per parallel group (tp, dp, pp,
// embedding), with the collectives the executor needs. Implementations: MPI
// (validate/mpi_comm.cpp, CPU backend), NCCL (validate/gpu/, GPU backend), and
// a local stand-in for the emulated rank that moves the same bytes through
// buffers of the same size without any peer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "validate/tensor.hpp"

namespace paraplan::validate {

enum class ReduceOp { kSum, kMax };

// Handle of a non-blocking send; wait() completes it.
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // rank within this group
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "tp", "dp", "pp", "embedding", "world"

  // In place, n elements.
  virtual void all_reduce(Ref buf, std::int64_t n, ReduceOp op) = 0;
  // out = concatenation over ranks of each rank's `in` (n elements each).
  virtual void all_gather(CRef in, Ref out, std::int64_t n) = 0;
  // out (n elements) = this rank's block of the sum over ranks of in (size()*n).
  virtual void reduce_scatter(CRef in, Ref out, std::int64_t n) = 0;
  // Uneven variants over one flat buffer (ZeRO shards): rank i owns
  // [displs[i], displs[i] + counts[i]).
  // In place: buf holds this rank's block at its displacement; afterwards all.
  virtual void all_gather_v(Ref buf, const std::vector<std::int64_t>& counts,
                            const std::vector<std::int64_t>& displs) = 0;
  // In place: afterwards this rank's block [displs[rank], + counts[rank]) of buf
  // holds the sum over ranks of that block; the rest of buf is undefined.
  // Blocks are contiguous and in rank order (ZeRO shards of a flat buffer).
  virtual void reduce_scatter_v(Ref buf, const std::vector<std::int64_t>& counts,
                                const std::vector<std::int64_t>& displs) = 0;

  // Point to point within the group (peer is a group rank). send() may return
  // before the peer receives; the buffer must stay untouched until wait().
  virtual std::unique_ptr<Request> isend(CRef buf, std::int64_t n, int peer, int tag) = 0;
  virtual void recv(Ref buf, std::int64_t n, int peer, int tag) = 0;
  virtual void barrier() = 0;
};

// Global rank order (Megatron-LM): tp innermost, then dp, then pp:
// rank = (stage * dp + dp_rank) * tp + tp_rank.
struct RankCoords {
  int tp_rank = 0, dp_rank = 0, stage = 0;
};
inline RankCoords coords_of(int rank, int tp, int dp) {
  return RankCoords{rank % tp, (rank / tp) % dp, rank / (tp * dp)};
}
inline int rank_of(const RankCoords& c, int tp, int dp) {
  return (c.stage * dp + c.dp_rank) * tp + c.tp_rank;
}

// The world ranks of each group this rank belongs to, in group-rank order.
struct GroupMembers {
  std::vector<int> tp, dp, pp;
  std::vector<int> embedding;  // first and last stage (tied embeddings, pp > 1), else empty
};
GroupMembers group_members(int rank, int tp, int dp, int pp);

struct Groups {
  std::unique_ptr<Communicator> world, tp, dp, pp, embedding;  // embedding may be null
};

// A stand-in group for the emulated rank: a group of `size` ranks in which this
// process plays `rank`. Collectives produce outputs of the right size filled
// from the local input (all-gather replicates the local block, reduce
// leaves the local values); receives fill the buffer with the last sent data of
// that size or zeros. No peer is involved.
// Buffers are touched through `device` (host or GPU memory alike).
class Device;
std::unique_ptr<Communicator> make_local_comm(Device* device, std::string name, int rank, int size);
Groups make_local_groups(Device* device, int rank, int tp, int dp, int pp, bool embedding_group);

}  // namespace paraplan::validate
