// How make_nccl_groups carves the world communicator into the tp, dp, pp and
// embedding groups: one ncclCommSplit per group kind, called by every rank in
// the same order (a split is collective over the world communicator).
// Membership comes from group_members() (comm.hpp, Megatron order
// rank = (stage * dp + dp_rank) * tp + tp_rank); the colour of a group is its
// lowest world rank, which is unique among the groups of one split, and the key
// is the rank's position in the group, so NCCL's group ranks equal
// GroupMembers' order. Ranks outside every group of a split (the embedding
// group on middle stages) pass no colour and get no communicator.
#pragma once

#include <string>
#include <vector>

namespace paraplan::validate {

inline constexpr int kNoColor = -1;  // NCCL_SPLIT_NOCOLOR in the CUDA code

struct SplitSpec {
  std::string name;          // "tp", "dp", "pp", "embedding"
  int color = kNoColor;      // ncclCommSplit colour, or kNoColor
  int key = 0;               // position of this rank in the group
  std::vector<int> members;  // world ranks in group-rank order (empty with kNoColor)
};

// The splits of world rank `rank`, in the order every rank performs them:
// tp, dp, pp, then embedding when embedding_group && pp > 1.
std::vector<SplitSpec> nccl_split_plan(int rank, int tp, int dp, int pp, bool embedding_group);

}  // namespace paraplan::validate
