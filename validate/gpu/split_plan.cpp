#include "validate/gpu/split_plan.hpp"

#include <algorithm>
#include <stdexcept>

#include "validate/comm.hpp"

namespace paraplan::validate {

static SplitSpec spec_of(std::string name, int rank, std::vector<int> members) {
  SplitSpec s;
  s.name = std::move(name);
  auto it = std::find(members.begin(), members.end(), rank);
  if (it == members.end()) return s;  // not a member: no colour
  s.key = int(it - members.begin());
  s.color = *std::min_element(members.begin(), members.end());
  s.members = std::move(members);
  return s;
}

std::vector<SplitSpec> nccl_split_plan(int rank, int tp, int dp, int pp, bool embedding_group) {
  if (tp < 1 || dp < 1 || pp < 1 || rank < 0 || rank >= tp * dp * pp)
    throw std::invalid_argument("nccl_split_plan: rank " + std::to_string(rank) + " outside tp=" +
                                std::to_string(tp) + " x dp=" + std::to_string(dp) +
                                " x pp=" + std::to_string(pp));
  GroupMembers g = group_members(rank, tp, dp, pp);
  std::vector<SplitSpec> plan;
  plan.push_back(spec_of("tp", rank, std::move(g.tp)));
  plan.push_back(spec_of("dp", rank, std::move(g.dp)));
  plan.push_back(spec_of("pp", rank, std::move(g.pp)));
  if (embedding_group && pp > 1) plan.push_back(spec_of("embedding", rank, std::move(g.embedding)));
  return plan;
}

}  // namespace paraplan::validate
