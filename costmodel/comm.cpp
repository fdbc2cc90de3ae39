#include "costmodel/comm.hpp"

#include <algorithm>
#include <bit>

namespace paraplan {

LinkCost intra_node_link(const Cluster& c) {
  return {c.intra_node.latency_us * 1e-6,
          c.intra_node.bandwidth_gbs * 1e9 * c.intra_comm_efficiency};
}

LinkCost inter_node_link(const Cluster& c) {
  return {c.inter_node.latency_us * 1e-6,
          c.inter_node.bandwidth_gbs * 1e9 * c.inter_comm_efficiency};
}

double ring_allreduce_bytes(int n, double s) { return n <= 1 ? 0 : 2.0 * (n - 1) / n * s; }
double allgather_bytes(int n, double s) { return n <= 1 ? 0 : double(n - 1) / n * s; }
double reducescatter_bytes(int n, double s) { return n <= 1 ? 0 : double(n - 1) / n * s; }
double p2p_bytes(double s) { return s; }

double ring_allreduce_time(int n, double s, const LinkCost& l) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) * l.alpha_s + ring_allreduce_bytes(n, s) / l.bytes_per_s;
}

double tree_allreduce_time(int n, double s, const LinkCost& l) {
  if (n <= 1) return 0;
  // NCCL uses log2i (floor) of the node count for the tree depth.
  const int depth = std::bit_width(unsigned(n)) - 1;
  return 2.0 * depth * l.alpha_s + 2.0 * s / l.bytes_per_s;
}

double best_allreduce_time(int n, double s, const LinkCost& l) {
  return std::min(ring_allreduce_time(n, s, l), tree_allreduce_time(n, s, l));
}

double allgather_time(int n, double s, const LinkCost& l) {
  if (n <= 1) return 0;
  return double(n - 1) * l.alpha_s + allgather_bytes(n, s) / l.bytes_per_s;
}

double reducescatter_time(int n, double s, const LinkCost& l) {
  if (n <= 1) return 0;
  return double(n - 1) * l.alpha_s + reducescatter_bytes(n, s) / l.bytes_per_s;
}

double p2p_time(double s, const LinkCost& l) { return l.alpha_s + p2p_bytes(s) / l.bytes_per_s; }

double bus_bandwidth_factor(Collective c, int n) {
  if (n <= 1) return c == Collective::kSendRecv ? 1.0 : 0.0;
  switch (c) {
    case Collective::kAllReduce: return 2.0 * (n - 1) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll: return double(n - 1) / n;
    case Collective::kSendRecv: return 1.0;
  }
  return 1.0;
}

double bus_bandwidth(Collective c, int n, double s, double time_s) {
  return time_s > 0 ? s / time_s * bus_bandwidth_factor(c, n) : 0;
}

GroupPlacement place_group(const Cluster& c, int group_size, int stride) {
  GroupPlacement g;
  g.size = std::max(1, group_size);
  const int per_node = std::max(1, c.gpus_per_node);
  stride = std::max(1, stride);
  if (stride >= per_node) {
    g.nodes = g.size;  // consecutive members are at least a node apart
  } else {
    const long long span = (long long)g.size * stride;  // GPUs from first to past-last member
    g.nodes = int(std::min<long long>(g.size, (span + per_node - 1) / per_node));
  }
  g.ranks_per_node = (g.size + g.nodes - 1) / g.nodes;
  return g;
}

// A collective over nodes moves its intra-node and inter-node shares at the
// same time: NCCL's rings and trees stream chunks through NVLink and the NICs
// as one pipeline, so the slower level sets the bandwidth term while the
// latencies of both levels add. (Summing the phases' times instead predicts
// nccl-tests all_reduce_perf on p5.48xlarge, 2-32 nodes x 8 H100, at 1-8 GiB
// 1.3-1.85x slow: crazyguitar/aws-gpu-communication-benchmark@4fdb5a4f
// data/nccl_all_reduce.csv.)
namespace {
double pipelined(const LinkCost& intra, double intra_msgs, double intra_bytes, const LinkCost& inter,
                 double inter_msgs, double inter_bytes) {
  return intra_msgs * intra.alpha_s + inter_msgs * inter.alpha_s +
         std::max(intra_bytes / intra.bytes_per_s, inter_bytes / inter.bytes_per_s);
}
}  // namespace

double group_allreduce_time(const Cluster& c, const GroupPlacement& g, double s) {
  if (g.size <= 1) return 0;
  if (g.intra_node()) return ring_allreduce_time(g.size, s, intra_node_link(c));
  const LinkCost intra = intra_node_link(c), inter = inter_node_link(c);
  const int k = g.ranks_per_node, n = g.nodes;
  // Inter-node stage over the S/k shard: ring (2(n-1) steps, 2(n-1)/n of it)
  // or tree (2·log2 n steps, twice it), whichever is faster on its own.
  const bool ring = ring_allreduce_time(n, s / k, inter) <= tree_allreduce_time(n, s / k, inter);
  const double inter_msgs = ring ? 2.0 * (n - 1) : 2.0 * (std::bit_width(unsigned(n)) - 1);
  const double inter_bytes = ring ? ring_allreduce_bytes(n, s / k) : 2.0 * s / k;
  return pipelined(intra, 2.0 * (k - 1), reducescatter_bytes(k, s) + allgather_bytes(k, s), inter, inter_msgs,
                   inter_bytes);
}

double group_allgather_time(const Cluster& c, const GroupPlacement& g, double s) {
  if (g.size <= 1) return 0;
  if (g.intra_node()) return allgather_time(g.size, s, intra_node_link(c));
  const int k = g.ranks_per_node, n = g.nodes;
  return pipelined(intra_node_link(c), k - 1, allgather_bytes(k, s), inter_node_link(c), n - 1,
                   allgather_bytes(n, s / k));
}

double group_reducescatter_time(const Cluster& c, const GroupPlacement& g, double s) {
  if (g.size <= 1) return 0;
  if (g.intra_node()) return reducescatter_time(g.size, s, intra_node_link(c));
  const int k = g.ranks_per_node, n = g.nodes;
  return pipelined(intra_node_link(c), k - 1, reducescatter_bytes(k, s), inter_node_link(c), n - 1,
                   reducescatter_bytes(n, s / k));
}

double group_alltoall_time(const Cluster& c, const GroupPlacement& g, double s) {
  if (g.size <= 1) return 0;
  const double n = g.size, k = g.intra_node() ? n : g.ranks_per_node;
  const LinkCost intra = intra_node_link(c), inter = inter_node_link(c);
  const double on_node = k > 1 ? intra.alpha_s + (k - 1) / n * s / intra.bytes_per_s : 0;
  const double off_node = k < n ? inter.alpha_s + (n - k) / n * s / inter.bytes_per_s : 0;
  return std::max(on_node, off_node);
}

double group_p2p_time(const Cluster& c, const GroupPlacement& g, double s) {
  if (g.size <= 1) return 0;
  return p2p_time(s, g.intra_node() ? intra_node_link(c) : inter_node_link(c));
}

}  // namespace paraplan
