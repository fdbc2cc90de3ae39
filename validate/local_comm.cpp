// The emulated rank's stand-in collectives: same output sizes, same buffers
// touched, no peers. Values are the local ones (a sum over identical ranks
// would only scale them), so the numbers stay finite and the step runs.
#include <algorithm>

#include "validate/comm.hpp"
#include "validate/device.hpp"

namespace paraplan::validate {

GroupMembers group_members(int rank, int tp, int dp, int pp) {
  const RankCoords c = coords_of(rank, tp, dp);
  GroupMembers g;
  for (int i = 0; i < tp; ++i) g.tp.push_back(rank_of({i, c.dp_rank, c.stage}, tp, dp));
  for (int i = 0; i < dp; ++i) g.dp.push_back(rank_of({c.tp_rank, i, c.stage}, tp, dp));
  for (int i = 0; i < pp; ++i) g.pp.push_back(rank_of({c.tp_rank, c.dp_rank, i}, tp, dp));
  if (pp > 1 && (c.stage == 0 || c.stage == pp - 1)) g.embedding = {g.pp.front(), g.pp.back()};
  return g;
}

namespace {

class NullRequest final : public Request {
 public:
  void wait() override {}
};

class LocalComm final : public Communicator {
 public:
  LocalComm(Device* d, std::string name, int rank, int size)
      : dev_(d), name_(std::move(name)), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_ + " (emulated)"; }

  void all_reduce(Ref buf, std::int64_t n, ReduceOp) override {
    dev_->scale(buf, n, 1.0f);  // touch the buffer as a reduction would
  }
  void all_gather(CRef in, Ref out, std::int64_t n) override {
    for (int r = 0; r < size_; ++r) dev_->copy(in, out.at(r * n), n);
  }
  void reduce_scatter(CRef in, Ref out, std::int64_t n) override {
    dev_->copy(in.at(rank_ * n), out, n);
  }
  void all_gather_v(Ref buf, const std::vector<std::int64_t>& counts,
                    const std::vector<std::int64_t>& displs) override {
    // Other ranks' blocks get a copy of the start of ours (or stay as they are).
    const std::int64_t mine = counts[rank_];
    for (int r = 0; r < size_; ++r)
      if (r != rank_ && mine > 0)
        dev_->copy(buf.at(displs[rank_]), buf.at(displs[r]), std::min(counts[r], mine));
  }
  void reduce_scatter_v(Ref buf, const std::vector<std::int64_t>& counts,
                        const std::vector<std::int64_t>& displs) override {
    dev_->scale(buf.at(displs[rank_]), counts[rank_], 1.0f);
  }
  std::unique_ptr<Request> isend(CRef buf, std::int64_t n, int, int) override {
    dev_->scale(buf, 0, 1.0f);
    (void)n;
    return std::make_unique<NullRequest>();
  }
  void recv(Ref buf, std::int64_t n, int, int) override {
    // A neighbour's activation or gradient: small finite values.
    dev_->fill(buf, n, 1e-3f);
  }
  void barrier() override {}

 private:
  Device* dev_;
  std::string name_;
  int rank_, size_;
};

}  // namespace

std::unique_ptr<Communicator> make_local_comm(Device* device, std::string name, int rank, int size) {
  return std::make_unique<LocalComm>(device, std::move(name), rank, size);
}

Groups make_local_groups(Device* device, int rank, int tp, int dp, int pp, bool embedding_group) {
  const RankCoords c = coords_of(rank, tp, dp);
  Groups g;
  g.world = make_local_comm(device, "world", rank, tp * dp * pp);
  g.tp = make_local_comm(device, "tp", c.tp_rank, tp);
  g.dp = make_local_comm(device, "dp", c.dp_rank, dp);
  g.pp = make_local_comm(device, "pp", c.stage, pp);
  if (embedding_group && pp > 1 && (c.stage == 0 || c.stage == pp - 1))
    g.embedding = make_local_comm(device, "embedding", c.stage == 0 ? 0 : 1, 2);
  return g;
}

}  // namespace paraplan::validate
