#include "validate/timed_comm.hpp"

#include <array>
#include <string>
#include <vector>

namespace paraplan::validate {
namespace {

// "tp (emulated)" -> "tp": phases are named by the group, whatever the backend.
std::string group_of(const std::string& name) { return name.substr(0, name.find(' ')); }

class TimedComm final : public Communicator {
 public:
  TimedComm(std::unique_ptr<Communicator> owned, Communicator* inner, PhaseTimer* timer)
      : owned_(std::move(owned)), inner_(inner), timer_(timer) {
    // Named once: the executor makes thousands of collectives per step.
    const std::string g = group_of(inner_->name());
    for (int op = 0; op < kOps; ++op) names_[op] = g + " " + kOpNames[op];
  }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }

  void all_reduce(Ref buf, std::int64_t n, ReduceOp op) override {
    ScopedPhase p(timer_, names_[kAllReduce]);
    inner_->all_reduce(buf, n, op);
  }
  void all_gather(CRef in, Ref out, std::int64_t n) override {
    ScopedPhase p(timer_, names_[kAllGather]);
    inner_->all_gather(in, out, n);
  }
  void reduce_scatter(CRef in, Ref out, std::int64_t n) override {
    ScopedPhase p(timer_, names_[kReduceScatter]);
    inner_->reduce_scatter(in, out, n);
  }
  void all_gather_v(Ref buf, const std::vector<std::int64_t>& counts,
                    const std::vector<std::int64_t>& displs) override {
    ScopedPhase p(timer_, names_[kAllGatherV]);
    inner_->all_gather_v(buf, counts, displs);
  }
  void reduce_scatter_v(Ref buf, const std::vector<std::int64_t>& counts,
                        const std::vector<std::int64_t>& displs) override {
    ScopedPhase p(timer_, names_[kReduceScatterV]);
    inner_->reduce_scatter_v(buf, counts, displs);
  }
  std::unique_ptr<Request> isend(CRef buf, std::int64_t n, int peer, int tag) override {
    return inner_->isend(buf, n, peer, tag);
  }
  void recv(Ref buf, std::int64_t n, int peer, int tag) override {
    ScopedPhase p(timer_, names_[kRecv]);
    inner_->recv(buf, n, peer, tag);
  }
  void barrier() override {
    ScopedPhase p(timer_, names_[kBarrier]);
    inner_->barrier();
  }

 private:
  std::unique_ptr<Communicator> owned_;  // null for a view
  Communicator* inner_;
  PhaseTimer* timer_;
  enum Op { kAllReduce, kAllGather, kReduceScatter, kAllGatherV, kReduceScatterV, kRecv, kBarrier, kOps };
  static constexpr const char* kOpNames[kOps] = {"all_reduce",       "all_gather", "reduce_scatter", "all_gather_v",
                                                 "reduce_scatter_v", "recv",       "barrier"};
  std::array<std::string, kOps> names_;  // "<group> <op>" by Op
};

}  // namespace

std::unique_ptr<Communicator> timed_comm(std::unique_ptr<Communicator> inner, PhaseTimer* timer) {
  if (!inner) return inner;
  Communicator* raw = inner.get();
  return std::make_unique<TimedComm>(std::move(inner), raw, timer);
}

std::unique_ptr<Communicator> timed_view(Communicator* inner, PhaseTimer* timer) {
  if (!inner) return nullptr;
  return std::make_unique<TimedComm>(nullptr, inner, timer);
}

Groups timed_views(const Groups& g, PhaseTimer* timer) {
  return Groups{timed_view(g.world.get(), timer), timed_view(g.tp.get(), timer),
                timed_view(g.dp.get(), timer), timed_view(g.pp.get(), timer),
                timed_view(g.embedding.get(), timer)};
}

void time_groups(Groups& g, PhaseTimer* timer) {
  for (auto* c : {&g.world, &g.tp, &g.dp, &g.pp, &g.embedding}) *c = timed_comm(std::move(*c), timer);
}

}  // namespace paraplan::validate
