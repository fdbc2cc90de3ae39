// Collective communication costs with an α–β model (Hockney): a collective of
// `steps` sequential steps moving `bytes` per rank takes steps·α + bytes/β.
// Volumes are those of NCCL's ring algorithms (Patarasuk & Yuan 2009; nccl-tests
// doc/PERFORMANCE.md), latencies per step from NCCL's own tuning model
// (src/graph/tuning.cc, ncclTopoTuneModel). Groups of ranks are mapped onto the
// cluster in Megatron-LM's order (tp innermost on consecutive GPUs of a node,
// then dp, then pp); a group spanning nodes runs hierarchically.
//
// S is always the whole array: the all-reduced tensor, the gathered result of
// an all-gather, the input of a reduce-scatter (the nccl-tests convention).
#pragma once

#include "costmodel/model.hpp"

namespace paraplan {

// One link level as the α–β model sees it.
struct LinkCost {
  double alpha_s = 0;        // per-step latency, seconds
  double bytes_per_s = 0;    // achievable bandwidth per GPU per direction
};

// NVLink/NVSwitch inside a node: latency, bandwidth × intra_comm_efficiency.
LinkCost intra_node_link(const Cluster& c);
// The NIC per GPU across nodes: latency, bandwidth × inter_comm_efficiency.
LinkCost inter_node_link(const Cluster& c);

// ---- bytes each rank sends (nccl-tests doc/PERFORMANCE.md) ----

// Ring all-reduce: reduce-scatter then all-gather, 2(n−1)/n · S.
double ring_allreduce_bytes(int n, double s);
// All-gather: (n−1)/n · S.
double allgather_bytes(int n, double s);
// Reduce-scatter: (n−1)/n · S.
double reducescatter_bytes(int n, double s);
// Point-to-point: S.
double p2p_bytes(double s);

// ---- time on one link level ----

// Ring all-reduce: 2(n−1) steps, 2(n−1)/n · S bytes (NCCL tuning.cc: nsteps = 2(nRanks−1)).
double ring_allreduce_time(int n, double s, const LinkCost& l);
// Double binary tree all-reduce (Sanders et al. 2009; NCCL ≥ 2.4): reduce up and
// broadcast down, 2·log2(n) latency steps; NCCL converts its bus bandwidth to
// algorithm bandwidth with ratio 0.5 for trees, i.e. time = 2·S/β (tuning.cc).
double tree_allreduce_time(int n, double s, const LinkCost& l);
// The faster of ring and tree, as NCCL's tuner picks per message size.
double best_allreduce_time(int n, double s, const LinkCost& l);
// Ring all-gather: n−1 steps, (n−1)/n · S bytes.
double allgather_time(int n, double s, const LinkCost& l);
// Ring reduce-scatter: n−1 steps, (n−1)/n · S bytes.
double reducescatter_time(int n, double s, const LinkCost& l);
// Send/recv: one step, S bytes.
double p2p_time(double s, const LinkCost& l);

// ---- bus bandwidth (nccl-tests doc/PERFORMANCE.md) ----

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv };
// busBw / algBw: 2(n−1)/n all-reduce; (n−1)/n all-gather, reduce-scatter,
// all-to-all; 1 send/recv (and broadcast, reduce).
double bus_bandwidth_factor(Collective c, int n);
// algBw = S / time; busBw = algBw × factor. Bytes per second.
double bus_bandwidth(Collective c, int n, double s, double time_s);

// ---- groups on the topology ----

// Where a group of ranks lands: ranks r0 + i·stride (i < size), with global
// ranks filling nodes in order (rank / gpus_per_node = node).
struct GroupPlacement {
  int size = 1;
  int nodes = 1;           // nodes the group spans
  int ranks_per_node = 1;  // members per node (ceil when uneven)
  bool intra_node() const { return nodes == 1; }
};
// A group whose members are `stride` ranks apart spans ceil(size·stride /
// gpus_per_node) nodes while stride < gpus_per_node, else one node per member.
// Megatron order: tp group stride 1, dp group stride tp, pp group stride tp·dp.
GroupPlacement place_group(const Cluster& c, int group_size, int stride);

// All-reduce of S over a placed group. Inside a node: ring over NVLink. Across
// nodes with k ranks per node: hierarchical (intra reduce-scatter, inter-node
// all-reduce of the S/k shard between same-index ranks over their own NICs, intra
// all-gather; Jia et al. 2018 / Horovod / NCCL's "ring of rings"); with one rank
// per node, a flat all-reduce over the NICs. Inter-node stage: ring or tree, faster.
// The levels are pipelined: both levels' latencies, the slower level's bytes.
double group_allreduce_time(const Cluster& c, const GroupPlacement& g, double s);
// All-gather of S over a placed group: inter-node all-gather of S/k beside the
// intra-node one of S (pipelined as the all-reduce).
double group_allgather_time(const Cluster& c, const GroupPlacement& g, double s);
// Reduce-scatter of S over a placed group: intra of S beside inter-node of S/k.
double group_reducescatter_time(const Cluster& c, const GroupPlacement& g, double s);
// All-to-all of S per rank over a placed group (S: all a rank holds, 1/n of it
// for each member, itself included): NCCL runs it as grouped send/recv to
// every peer at once (torch.distributed.all_to_all_single; nccl-tests
// all_to_all), so a rank sends (k-1)/n · S over NVLink to the k-1 members on
// its node and (n-k)/n · S over its NIC to the others, both levels at once:
// the slower level bounds it, one latency each.
double group_alltoall_time(const Cluster& c, const GroupPlacement& g, double s);
// Send/recv of S between neighbours of a placed group: the slowest link the
// group spans (a pipeline spanning nodes has at least one inter-node boundary).
double group_p2p_time(const Cluster& c, const GroupPlacement& g, double s);

}  // namespace paraplan
