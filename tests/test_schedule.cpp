// In-flight micro-batches per pipeline schedule.
#include <catch2/catch.hpp>

#include "costmodel/schedule.hpp"

using namespace paraplan;

namespace {
Layout pipe(int p, int v, Schedule s) {
  Layout l;
  l.dp = 1, l.pp = p, l.vpp = v, l.schedule = s;
  return l;
}
}  // namespace

TEST_CASE("1F1B: stage i holds min(p - i, m) micro-batches", "[schedule]") {
  const Layout l = pipe(4, 1, Schedule::k1F1B);
  const int expect_m8[] = {4, 3, 2, 1};  // Narayanan et al. 2021, PipeDream-Flush
  for (int i = 0; i < 4; ++i) CHECK(in_flight_chunks(l, 8, i) == expect_m8[i]);
  const int expect_m2[] = {2, 2, 2, 1};  // fewer micro-batches than stages
  for (int i = 0; i < 4; ++i) CHECK(in_flight_chunks(l, 2, i) == expect_m2[i]);
}

TEST_CASE("GPipe holds all m micro-batches on every stage", "[schedule]") {
  const Layout l = pipe(4, 1, Schedule::kGPipe);
  for (int i = 0; i < 4; ++i) CHECK(in_flight_chunks(l, 16, i) == 16);
}

TEST_CASE("interleaved 1F1B: first stage holds p(1 + (p-1)/(pv)) stage-equivalents", "[schedule]") {
  // p = 4, v = 2, m = 8. Stage 0 warm-up: 2(p-1) + (v-1)p = 10 chunk forwards, +1 = 11.
  // In whole-stage units: 11 / v = 5.5 = p·(1 + (p-1)/(p·v)) = 4·(1 + 3/8).
  const Layout l = pipe(4, 2, Schedule::k1F1B);
  CHECK(in_flight_chunks(l, 8, 0) == 11);
  CHECK(double(in_flight_chunks(l, 8, 0)) / 2 == Approx(4.0 * (1 + 3.0 / 8)));
  // Last stage: (v-1)p + 1 = 5 chunk forwards: 4 of chunk 0, 1 of chunk 1.
  CHECK(in_flight_chunks(l, 8, 3) == 5);
  CHECK(in_flight_of_chunk(l, 8, 3, 0) == 4);
  CHECK(in_flight_of_chunk(l, 8, 3, 1) == 1);
  // Stage 0: forwards 0-3 chunk 0, 4-7 chunk 1, 8-10 chunk 0 again: 7 and 4.
  CHECK(in_flight_of_chunk(l, 8, 0, 0) == 7);
  CHECK(in_flight_of_chunk(l, 8, 0, 1) == 4);
  // Capped at m·v when there are few micro-batches: p = 4, v = 2, m = 4 → 8.
  CHECK(in_flight_chunks(l, 4, 0) == 8);
}

TEST_CASE("bubble fractions (Narayanan et al. 2021)", "[schedule]") {
  // p = 8, m = 16: (p-1)/(m+p-1) = 7/23 of the step; (p-1)/m = 7/16 of ideal.
  const Layout a = pipe(8, 1, Schedule::k1F1B);
  CHECK(bubble_fraction_of_step(a, 16) == Approx(7.0 / 23));
  CHECK(bubble_fraction_of_ideal(a, 16) == Approx(7.0 / 16));
  // p = 10, m = 4: 9/13 of the step, 9/4 of ideal.
  const Layout c = pipe(10, 1, Schedule::kGPipe);
  CHECK(bubble_fraction_of_step(c, 4) == Approx(9.0 / 13));
  CHECK(bubble_fraction_of_ideal(c, 4) == Approx(9.0 / 4));
  // Interleaving with v = 2 halves the bubble: (p-1)/(v·m) = 7/32.
  const Layout b = pipe(8, 2, Schedule::k1F1B);
  CHECK(bubble_fraction_of_ideal(b, 16) == Approx(7.0 / 32));
}

TEST_CASE("interleaved 1F1B with Megatron's micro-batch groups (--microbatch-group-size-per-virtual-pipeline-stage)",
          "[schedule]") {
  // p = 4, v = 2, m = 12 in groups of g = 6: Megatron's schedule table runs micro-batches 0-5 on chunk 0,
  // 0-5 on chunk 1, 6-11 on chunk 0, 6-11 on chunk 1 (schedules.py:989-1015); warm-up on rank r is
  // 2(p - r - 1) + (v - 1)g forwards (:960-965), then one more before the first backward.
  Layout l = pipe(4, 2, Schedule::k1F1B);
  l.microbatch_group = 6;
  CHECK(l.group() == 6);
  // Rank 0: 2 x 3 + 6 + 1 = 13 forwards: micro-batches 0-5 of chunk 0, 0-5 of chunk 1, 6 of chunk 0.
  CHECK(in_flight_chunks(l, 12, 0) == 13);
  CHECK(in_flight_of_chunk(l, 12, 0, 0) == 7);
  CHECK(in_flight_of_chunk(l, 12, 0, 1) == 6);
  // The last rank: 0 + 6 + 1 = 7: all six of chunk 0's first group and one of chunk 1.
  CHECK(in_flight_chunks(l, 12, 3) == 7);
  CHECK(in_flight_of_chunk(l, 12, 3, 0) == 6);
  CHECK(in_flight_of_chunk(l, 12, 3, 1) == 1);
  // Unset, the group is pp: the counts of the test above.
  l.microbatch_group = 0;
  CHECK(l.group() == 4);
  CHECK(in_flight_chunks(l, 8, 0) == 11);
}
