#include <catch2/catch.hpp>

#include "costmodel/comm.hpp"

using namespace paraplan;

namespace {

constexpr double kGiBytes = 1024.0 * 1024.0 * 1024.0;

// DGX H100 numbers (configs/clusters/dgx-h100.yaml, FACTS.md).
Cluster dgx_h100() {
  Cluster c;
  c.name = "DGX-H100";
  c.gpu.peak_tflops_bf16 = 989;
  c.gpu.hbm_bandwidth_gbs = 3350;
  c.gpu.memory_gib = 79.65;
  c.gpus_per_node = 8;
  c.intra_node = {450, 3.4};
  c.inter_node = {50, 14.0};
  c.intra_comm_efficiency = 0.82;
  c.inter_comm_efficiency = 0.94;
  return c;
}

}  // namespace

TEST_CASE("Collective volumes per rank, n = 8, S = 1 GiB", "[comm]") {
  // 2(n-1)/n · S = 2 · 7/8 · 2^30 = 1,879,048,192; (n-1)/n · S = 939,524,096.
  CHECK(ring_allreduce_bytes(8, kGiBytes) == 1879048192.0);
  CHECK(allgather_bytes(8, kGiBytes) == 939524096.0);
  CHECK(reducescatter_bytes(8, kGiBytes) == 939524096.0);
  CHECK(p2p_bytes(kGiBytes) == kGiBytes);
  // One rank moves nothing.
  CHECK(ring_allreduce_bytes(1, kGiBytes) == 0);
  CHECK(allgather_bytes(1, kGiBytes) == 0);
}

TEST_CASE("Bus bandwidth as nccl-tests defines it", "[comm]") {
  CHECK(bus_bandwidth_factor(Collective::kAllReduce, 8) == 1.75);
  CHECK(bus_bandwidth_factor(Collective::kAllGather, 8) == 0.875);
  CHECK(bus_bandwidth_factor(Collective::kReduceScatter, 8) == 0.875);
  CHECK(bus_bandwidth_factor(Collective::kAllToAll, 8) == 0.875);
  CHECK(bus_bandwidth_factor(Collective::kSendRecv, 2) == 1.0);
  // algBw = S / t = 1 GiB / 10 ms; busBw = algBw × 2·7/8.
  CHECK(bus_bandwidth(Collective::kAllReduce, 8, kGiBytes, 0.01) ==
        Approx(kGiBytes / 0.01 * 1.75).epsilon(1e-15));
  // The α–β ring at zero latency recovers the link bandwidth as busBw.
  const LinkCost link{0, 100e9};
  CHECK(bus_bandwidth(Collective::kAllReduce, 8, kGiBytes, ring_allreduce_time(8, kGiBytes, link)) ==
        Approx(100e9).epsilon(1e-12));
  CHECK(bus_bandwidth(Collective::kAllGather, 8, kGiBytes, allgather_time(8, kGiBytes, link)) ==
        Approx(100e9).epsilon(1e-12));
}

TEST_CASE("alpha-beta times of ring, tree and p2p", "[comm]") {
  const LinkCost l{10e-6, 100e9};
  // Ring all-reduce: 2(n-1) steps of α, 2(n-1)/n · S over β.
  CHECK(ring_allreduce_time(8, kGiBytes, l) == Approx(14 * 10e-6 + 1879048192.0 / 100e9));
  CHECK(allgather_time(8, kGiBytes, l) == Approx(7 * 10e-6 + 939524096.0 / 100e9));
  CHECK(reducescatter_time(8, kGiBytes, l) == Approx(7 * 10e-6 + 939524096.0 / 100e9));
  // Tree: 2·log2(n) steps, 2·S over β.
  CHECK(tree_allreduce_time(8, kGiBytes, l) == Approx(2 * 3 * 10e-6 + 2 * kGiBytes / 100e9));
  CHECK(p2p_time(kGiBytes, l) == Approx(10e-6 + kGiBytes / 100e9));
  // Large messages: ring wins on bandwidth; tiny messages on many ranks: tree wins on latency.
  CHECK(best_allreduce_time(8, kGiBytes, l) == ring_allreduce_time(8, kGiBytes, l));
  CHECK(best_allreduce_time(64, 1024, l) == tree_allreduce_time(64, 1024, l));
}

TEST_CASE("Group placement in Megatron order", "[comm]") {
  const Cluster c = dgx_h100();
  const GroupPlacement tp8 = place_group(c, 8, 1);
  CHECK(tp8.nodes == 1);
  CHECK(tp8.ranks_per_node == 8);
  CHECK(tp8.intra_node());
  const GroupPlacement tp16 = place_group(c, 16, 1);
  CHECK(tp16.nodes == 2);
  CHECK(tp16.ranks_per_node == 8);
  const GroupPlacement dp_stride8 = place_group(c, 4, 8);
  CHECK(dp_stride8.nodes == 4);
  CHECK(dp_stride8.ranks_per_node == 1);
  // tp = 2: a dp group of 8 with stride 2 covers 16 GPUs, 4 of its ranks per node.
  const GroupPlacement dp_stride2 = place_group(c, 8, 2);
  CHECK(dp_stride2.nodes == 2);
  CHECK(dp_stride2.ranks_per_node == 4);
  // tp = 2, dp = 4: the dp group fits in one node.
  CHECK(place_group(c, 4, 2).intra_node());
  CHECK(place_group(c, 1, 64).nodes == 1);
}

TEST_CASE("A tp group inside a node pays NVLink, one across nodes pays the NIC", "[comm]") {
  Cluster c = dgx_h100();
  const double s = kGiBytes;
  const LinkCost intra = intra_node_link(c), inter = inter_node_link(c);
  CHECK(intra.bytes_per_s == Approx(450e9 * 0.82));
  CHECK(inter.bytes_per_s == Approx(50e9 * 0.94));

  // tp = 8, stride 1: a ring over NVLink; hand-computed 2·7·3.4 us + 1.75 GiB / 369 GB/s.
  const double t8 = group_allreduce_time(c, place_group(c, 8, 1), s);
  CHECK(t8 == Approx(ring_allreduce_time(8, s, intra)).epsilon(1e-15));
  CHECK(t8 == Approx(0.00513987152303523).epsilon(1e-9));

  // tp = 16 on 8-GPU nodes: intra reduce-scatter, inter all-reduce of S/8 over
  // 2 nodes, intra all-gather. Hand-computed: 0.008023567863460762 s.
  const double t16 = group_allreduce_time(c, place_group(c, 16, 1), s);
  CHECK(t16 == Approx(reducescatter_time(8, s, intra) + ring_allreduce_time(2, s / 8, inter) +
                      allgather_time(8, s, intra))
                   .epsilon(1e-15));
  CHECK(t16 == Approx(0.008023567863460762).epsilon(1e-9));
  CHECK(t16 > t8);

  // dp = 4 with stride 8: one rank per node, a flat ring over the NICs.
  // Hand-computed: 2·3·14 us + 1.5 GiB / 47 GB/s = 0.03435235608510638 s.
  const double tdp = group_allreduce_time(c, place_group(c, 4, 8), s);
  CHECK(tdp == Approx(0.03435235608510638).epsilon(1e-9));

  // Only the cross-node groups depend on the inter-node bandwidth.
  Cluster slow = c;
  slow.inter_node.bandwidth_gbs = 25;
  CHECK(group_allreduce_time(slow, place_group(slow, 8, 1), s) == t8);
  CHECK(group_allreduce_time(slow, place_group(slow, 16, 1), s) > t16);
  CHECK(group_allreduce_time(slow, place_group(slow, 4, 8), s) > tdp);

  // All-gather and reduce-scatter follow the same split; p2p uses the slowest link spanned.
  CHECK(group_allgather_time(c, place_group(c, 8, 1), s) == Approx(allgather_time(8, s, intra)));
  CHECK(group_allgather_time(c, place_group(c, 16, 1), s) ==
        Approx(allgather_time(2, s / 8, inter) + allgather_time(8, s, intra)));
  CHECK(group_reducescatter_time(c, place_group(c, 16, 1), s) ==
        Approx(reducescatter_time(8, s, intra) + reducescatter_time(2, s / 8, inter)));
  CHECK(group_p2p_time(c, place_group(c, 2, 4), s) == Approx(p2p_time(s, intra)));
  CHECK(group_p2p_time(c, place_group(c, 2, 8), s) == Approx(p2p_time(s, inter)));
  CHECK(group_allreduce_time(c, place_group(c, 1, 1), s) == 0);
}
