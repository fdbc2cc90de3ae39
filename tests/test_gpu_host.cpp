// Host-side logic of the GPU backend (validate/gpu), tested without a GPU:
// the NCCL split plan (group membership), the caching pool's bookkeeping over a
// fake segment source, and phase timing over a scripted clock. The CUDA
// kernels' bodies are checked on the host in tests/gpu/test_kernels_emulated.cpp.
// Needs no CUDA: all of it is plain C++.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "validate/backend.hpp"
#include "validate/cpu/cpu_device.hpp"
#include "validate/phase_timer.hpp"
#include "validate/gpu/pool_core.hpp"
#include "validate/gpu/split_plan.hpp"
#include "validate/timed_comm.hpp"

using namespace paraplan;
using namespace paraplan::validate;

namespace {

using i64 = std::int64_t;
using Vec = std::vector<float>;
using Groups2 = std::set<std::vector<int>>;

// ---------------------------------------------------------------- split plan

// Every rank's colour for split `name`, grouped: colour -> members ordered by key.
std::map<int, std::vector<int>> split_groups(const std::string& name, int tp, int dp, int pp, bool emb,
                                              std::vector<int>* no_color = nullptr) {
  std::map<int, std::map<int, int>> by_color;  // colour -> key -> world rank
  for (int r = 0; r < tp * dp * pp; ++r)
    for (const SplitSpec& s : nccl_split_plan(r, tp, dp, pp, emb)) {
      if (s.name != name) continue;
      if (s.color == kNoColor) {
        if (no_color) no_color->push_back(r);
        continue;
      }
      CHECK(by_color[s.color].emplace(s.key, r).second);  // keys unique within a colour
      CHECK(s.members.at(std::size_t(s.key)) == r);        // key = position in members
    }
  std::map<int, std::vector<int>> out;
  for (auto& [c, keys] : by_color)
    for (auto& [k, r] : keys) out[c].push_back(r);
  return out;
}

Groups2 member_sets(const std::map<int, std::vector<int>>& g) {
  Groups2 s;
  for (auto& [c, m] : g) {
    CHECK(c == *std::min_element(m.begin(), m.end()));  // colour = lowest world rank
    s.insert(m);
  }
  return s;
}

}  // namespace

TEST_CASE("nccl split plan: tp=2 dp=2 pp=2, groups worked out by hand", "[gpu-host]") {
  // rank = (stage * dp + dp_rank) * tp + tp_rank:
  // stage 0: dp 0 -> {0, 1}, dp 1 -> {2, 3}; stage 1: dp 0 -> {4, 5}, dp 1 -> {6, 7}.
  CHECK(member_sets(split_groups("tp", 2, 2, 2, true)) == Groups2{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(member_sets(split_groups("dp", 2, 2, 2, true)) == Groups2{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(member_sets(split_groups("pp", 2, 2, 2, true)) == Groups2{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  // pp = 2: first and last stage are the whole pipeline.
  std::vector<int> outside;
  CHECK(member_sets(split_groups("embedding", 2, 2, 2, true, &outside)) == Groups2{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(outside.empty());
  // Every rank performs the same splits in the same order (they are collective).
  for (int r = 0; r < 8; ++r) {
    const auto plan = nccl_split_plan(r, 2, 2, 2, true);
    REQUIRE(plan.size() == 4);
    CHECK(plan[0].name == "tp");
    CHECK(plan[1].name == "dp");
    CHECK(plan[2].name == "pp");
    CHECK(plan[3].name == "embedding");
  }
}

TEST_CASE("nccl split plan: tp=1 dp=2 pp=4, middle stages stay out of the embedding group", "[gpu-host]") {
  // rank = stage * 2 + dp_rank.
  Groups2 singles;
  for (int r = 0; r < 8; ++r) singles.insert({r});
  CHECK(member_sets(split_groups("tp", 1, 2, 4, true)) == singles);
  CHECK(member_sets(split_groups("dp", 1, 2, 4, true)) == Groups2{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(member_sets(split_groups("pp", 1, 2, 4, true)) == Groups2{{0, 2, 4, 6}, {1, 3, 5, 7}});
  std::vector<int> outside;
  CHECK(member_sets(split_groups("embedding", 1, 2, 4, true, &outside)) == Groups2{{0, 6}, {1, 7}});
  CHECK(outside == std::vector<int>{2, 3, 4, 5});
}

TEST_CASE("nccl split plan: no embedding split with pp = 1 or when not asked - bad ranks throw", "[gpu-host]") {
  CHECK(member_sets(split_groups("tp", 4, 1, 1, true)) == Groups2{{0, 1, 2, 3}});
  CHECK(nccl_split_plan(0, 4, 1, 1, true).size() == 3);
  CHECK(nccl_split_plan(0, 1, 1, 2, false).size() == 3);
  // tp=2 dp=3 pp=2: dp groups stride tp, pp groups stride tp*dp.
  CHECK(member_sets(split_groups("dp", 2, 3, 2, false)) == Groups2{{0, 2, 4}, {1, 3, 5}, {6, 8, 10}, {7, 9, 11}});
  CHECK(member_sets(split_groups("pp", 2, 3, 2, false)) ==
        Groups2{{0, 6}, {1, 7}, {2, 8}, {3, 9}, {4, 10}, {5, 11}});
  CHECK_THROWS_AS(nccl_split_plan(8, 2, 2, 2, true), std::invalid_argument);
  CHECK_THROWS_AS(nccl_split_plan(0, 0, 1, 1, true), std::invalid_argument);
}

// ---------------------------------------------------------------- pool

namespace {

// Hands out fake, never dereferenced addresses from a budget; counts calls.
class FakeSource final : public SegmentSource {
 public:
  explicit FakeSource(i64 capacity) : capacity_(capacity) {}
  void* map(i64 bytes) override {
    if (used_ + bytes > capacity_) return nullptr;
    used_ += bytes;
    void* p = reinterpret_cast<void*>(next_);
    next_ += std::uintptr_t(bytes) + (std::uintptr_t(1) << 30);  // gaps: segments never touch
    live_[p] = bytes;
    return p;
  }
  void unmap(void* p, i64 bytes) override {  // CHECK, not REQUIRE: called from destructors
    CHECK(live_.count(p) == 1);
    CHECK(live_[p] == bytes);
    used_ -= bytes;
    live_.erase(p);
  }
  i64 used() const { return used_; }
  std::size_t segments() const { return live_.size(); }

 private:
  i64 capacity_, used_ = 0;
  std::uintptr_t next_ = std::uintptr_t(1) << 40;
  std::map<void*, i64> live_;
};

constexpr i64 kMiB = 1 << 20;
char* cp(void* p) { return static_cast<char*>(p); }

}  // namespace

TEST_CASE("pool: size rounding and segment sizes follow PyTorch's caching allocator", "[gpu-host]") {
  struct Case {
    i64 bytes, rounded, segment;
  };
  for (const Case& c : {Case{0, 512, 2 * kMiB}, Case{1, 512, 2 * kMiB}, Case{512, 512, 2 * kMiB},
                        Case{513, 1024, 2 * kMiB}, Case{kMiB, kMiB, 2 * kMiB}, Case{kMiB + 1, kMiB + 512, 20 * kMiB},
                        Case{10 * kMiB - 512, 10 * kMiB - 512, 20 * kMiB}, Case{10 * kMiB, 10 * kMiB, 10 * kMiB},
                        Case{10 * kMiB + 1, 10 * kMiB + 512, 12 * kMiB}}) {
    INFO("bytes " << c.bytes);
    CHECK(PoolCore::round_size(c.bytes) == c.rounded);
    CHECK(PoolCore::segment_size(c.rounded) == c.segment);
  }
}

TEST_CASE("pool: small blocks share a 2 MiB segment, split, merge and are reused best-fit", "[gpu-host]") {
  FakeSource src(1 << 30);
  PoolCore pool(&src);
  void* a = pool.allocate(1000);
  void* b = pool.allocate(1000);
  void* c = pool.allocate(1000);
  CHECK(src.segments() == 1);
  CHECK(cp(b) == cp(a) + 1024);
  CHECK(cp(c) == cp(a) + 2048);
  CHECK(pool.stats().reserved == 2 * kMiB);
  CHECK(pool.stats().allocated == 3 * 1024);
  CHECK(pool.stats().requested == 3000);
  CHECK(pool.slack() == 2 * kMiB - 3000);
  CHECK(pool.check_invariants() == "");

  pool.deallocate(b);
  pool.deallocate(a);  // merges with b's block: a free 2048-byte block at a
  CHECK(pool.check_invariants() == "");
  void* d = pool.allocate(2000);  // best fit: the 2048-byte hole, not the segment's tail
  CHECK(d == a);
  CHECK(pool.block_size(d) == 2048);
  void* e = pool.allocate(100);  // the hole is used up: from the tail after c
  CHECK(cp(e) == cp(c) + 1024);
  CHECK(pool.check_invariants() == "");

  for (void* p : {c, d, e}) pool.deallocate(p);
  CHECK(pool.stats().requested == 0);
  CHECK(pool.stats().reserved == 2 * kMiB);  // cached, not given back
  CHECK(pool.release_free_segments() == 2 * kMiB);
  CHECK(src.segments() == 0);
  CHECK(pool.stats().reserved == 0);
  CHECK(pool.check_invariants() == "");
}

TEST_CASE("pool: large blocks take 20 MiB or their own segments - remainders over 1 MiB are reused", "[gpu-host]") {
  FakeSource src(1 << 30);
  PoolCore pool(&src);
  void* a = pool.allocate(5 * kMiB);  // 20 MiB segment, 15 MiB free after it
  CHECK(pool.stats().reserved == 20 * kMiB);
  void* b = pool.allocate(3 * kMiB);  // from the remainder: no new segment; 12 MiB left
  CHECK(src.segments() == 1);
  CHECK(cp(b) == cp(a) + 5 * kMiB);
  void* c = pool.allocate(14 * kMiB);  // >= 10 MiB and no free block fits: a 14 MiB segment of its own
  CHECK(src.segments() == 2);
  CHECK(pool.stats().reserved == 34 * kMiB);
  CHECK(pool.block_size(c) == 14 * kMiB);
  void* s = pool.allocate(4096);  // small: never from a large segment
  CHECK(src.segments() == 3);
  CHECK(pool.stats().reserved == 36 * kMiB);
  CHECK(pool.check_invariants() == "");
  // The 12 MiB tail serves a request 512 KiB smaller; a large remainder of
  // <= 1 MiB is not split off, the block keeps it.
  void* f = pool.allocate(12 * kMiB - 512 * 1024);
  CHECK(src.segments() == 3);
  CHECK(cp(f) == cp(b) + 3 * kMiB);
  CHECK(pool.block_size(f) == 12 * kMiB);
  CHECK(pool.stats().allocated == 5 * kMiB + 3 * kMiB + 14 * kMiB + 4096 + 12 * kMiB);
  for (void* p : {a, b, c, s, f}) pool.deallocate(p);
  CHECK(pool.check_invariants() == "");
  CHECK(pool.stats().allocated == 0);
  CHECK(pool.release_free_segments() == 36 * kMiB);
}

TEST_CASE("pool: when the source refuses, free segments are given back and the request retried", "[gpu-host]") {
  FakeSource src(21 * kMiB);
  PoolCore pool(&src);
  void* a = pool.allocate(5 * kMiB);  // a 20 MiB segment
  pool.deallocate(a);                 // cached
  void* b = pool.allocate(4096);      // a small segment: 2 MiB more than the source has, until the 20 go back
  REQUIRE(b != nullptr);
  CHECK(pool.stats().source_unmaps == 1);
  CHECK(pool.stats().reserved == 2 * kMiB);
  CHECK(pool.allocate(20 * kMiB) == nullptr);  // truly out of memory: nothing changes
  CHECK(pool.stats().reserved == 2 * kMiB);
  CHECK(pool.stats().requested == 4096);
  CHECK(pool.check_invariants() == "");
}

TEST_CASE("pool: peaks, slack at the peak, reset, foreign pointers, destructor", "[gpu-host]") {
  FakeSource src(1 << 30);
  {
    PoolCore pool(&src);
    void* a = pool.allocate(1000);
    void* b = pool.allocate(3000);
    CHECK(pool.stats().peak_requested == 4000);
    CHECK(pool.stats().slack_at_peak == 2 * kMiB - 4000);
    pool.deallocate(a);
    void* c = pool.allocate(100);  // below the peak: nothing moves
    CHECK(pool.stats().peak_requested == 4000);
    CHECK(pool.stats().slack_at_peak == 2 * kMiB - 4000);
    pool.reset_peaks();
    CHECK(pool.stats().peak_requested == 3100);
    CHECK(pool.stats().slack_at_peak == 2 * kMiB - 3100);
    int not_ours = 0;
    pool.deallocate(&not_ours);  // ignored
    CHECK(pool.stats().live_blocks == 2);
    (void)b, (void)c;
  }
  CHECK(src.segments() == 0);  // the destructor gave everything back, live blocks included
  CHECK(src.used() == 0);
}

TEST_CASE("pool: random allocate/free sequences keep the books and never overlap blocks", "[gpu-host]") {
  FakeSource src(i64(1) << 50);
  PoolCore pool(&src);
  std::mt19937 rng(7);
  std::map<char*, i64> live;  // pointer -> requested bytes
  std::uniform_int_distribution<int> op(0, 2);
  std::uniform_int_distribution<int> small(1, 300000), large(1, 30 * kMiB);
  for (int step = 0; step < 3000; ++step) {
    if (op(rng) != 0 || live.empty()) {
      const i64 bytes = (step % 5 == 0) ? large(rng) : small(rng);
      char* p = cp(pool.allocate(bytes));
      REQUIRE(p != nullptr);
      // No overlap with the neighbours by address.
      auto next = live.lower_bound(p);
      if (next != live.end()) REQUIRE(p + PoolCore::round_size(bytes) <= next->first);
      if (next != live.begin()) {
        auto prev = std::prev(next);
        REQUIRE(prev->first + PoolCore::round_size(prev->second) <= p);
      }
      live[p] = bytes;
    } else {
      auto it = live.begin();
      std::advance(it, std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng));
      pool.deallocate(it->first);
      live.erase(it);
    }
    if (step % 100 == 0) REQUIRE(pool.check_invariants() == "");
    if (step % 700 == 0) pool.release_free_segments();
  }
  i64 requested = 0;
  for (auto& [p, b] : live) requested += b;
  CHECK(pool.stats().requested == requested);
  CHECK(pool.slack() == pool.stats().reserved - requested);
  CHECK(pool.check_invariants() == "");
}

// ---------------------------------------------------------------- phase timing

namespace {

// A clock whose "now" the test sets; marks remember it.
class ScriptedClock final : public PhaseClock {
 public:
  double now = 0;
  int syncs = 0, resets = 0;
  int mark() override {
    stamps_.push_back(now);
    return int(stamps_.size()) - 1;
  }
  void sync() override { ++syncs; }
  double elapsed_ms(int from, int to) override { return stamps_.at(std::size_t(to)) - stamps_.at(std::size_t(from)); }
  void reset() override {
    ++resets;
    stamps_.clear();
  }
  std::size_t marks() const { return stamps_.size(); }

 private:
  std::vector<double> stamps_;
};

}  // namespace

TEST_CASE("phase timer: nested and overlapping phases, totals per name, collect once per step", "[gpu-host]") {
  ScriptedClock clock;
  PhaseTimer t(&clock);
  t.begin("forward");
  clock.now = 2;
  t.begin("tp all_reduce");
  clock.now = 3;
  t.end("tp all_reduce");
  clock.now = 5;
  t.end("forward");
  t.begin("backward");
  clock.now = 6;
  t.begin("tp all_reduce");
  clock.now = 8.5;
  t.end("tp all_reduce");
  clock.now = 15;
  t.end("backward");
  CHECK(t.open_phases() == 0);
  CHECK(t.pending_intervals() == 4);
  CHECK(t.totals().empty());  // nothing is read before collect()
  t.collect();
  CHECK(clock.syncs == 1);
  CHECK(clock.resets == 1);
  CHECK(clock.marks() == 0);
  CHECK(t.total("forward").ms == Approx(5));
  CHECK(t.total("backward").ms == Approx(10));
  CHECK(t.total("tp all_reduce").ms == Approx(3.5));
  CHECK(t.total("tp all_reduce").count == 2);
  CHECK(t.total("optimizer").count == 0);
  // Self time: less the intervals nested directly inside (forward 0..5 held a
  // 2..3 all-reduce, backward 5..15 a 6..8.5 one).
  CHECK(t.total("forward").self_ms == Approx(4));
  CHECK(t.total("backward").self_ms == Approx(7.5));
  CHECK(t.total("tp all_reduce").self_ms == Approx(3.5));

  // A second step adds to the totals.
  t.begin("forward");
  clock.now = 19;
  t.end("forward");
  t.collect();
  CHECK(t.total("forward").ms == Approx(9));
  CHECK(t.total("forward").count == 2);
  t.clear_totals();
  CHECK(t.totals().empty());
}

TEST_CASE("phase timer: same-name nesting closes the innermost - misuse throws", "[gpu-host]") {
  ScriptedClock clock;
  PhaseTimer t(&clock);
  t.begin("layer");
  clock.now = 1;
  t.begin("layer");
  clock.now = 4;
  t.end("layer");  // inner: 1..4
  clock.now = 10;
  CHECK_THROWS_AS(t.collect(), std::logic_error);  // "layer" still open
  t.end("layer");  // outer: 0..10
  t.collect();
  CHECK(t.total("layer").ms == Approx(13));
  CHECK(t.total("layer").count == 2);
  CHECK(t.total("layer").self_ms == Approx(10));  // outer 10 - inner 3, + inner 3
  CHECK_THROWS_AS(t.end("layer"), std::logic_error);
  {
    ScopedPhase p(&t, "optimizer");
    clock.now = 12;
    CHECK(t.open_phases() == 1);
  }
  CHECK(t.open_phases() == 0);
  t.collect();
  CHECK(t.total("optimizer").ms == Approx(2));
  ScopedPhase none(nullptr, "untimed");  // a null timer is allowed: nothing happens
}

TEST_CASE("phase timer: timed communicators name each collective by group and operation", "[gpu-host]") {
  ScriptedClock clock;
  PhaseTimer t(&clock);
  const auto cpu = make_cpu_device();
  Groups g = make_local_groups(cpu.get(), 0, 2, 2, 1, false);
  time_groups(g, &t);
  Vec buf(8, 1.0f), out(16);
  g.tp->all_reduce(Ref(buf.data()), 8, ReduceOp::kSum);
  g.tp->all_gather(Ref(buf.data()), Ref(out.data()), 8);
  g.dp->reduce_scatter_v(Ref(out.data()), {8, 8}, {0, 8});
  g.dp->barrier();
  t.collect();
  CHECK(t.total("tp all_reduce").count == 1);
  CHECK(t.total("tp all_gather").count == 1);
  CHECK(t.total("dp reduce_scatter_v").count == 1);
  CHECK(t.total("dp barrier").count == 1);
  CHECK(g.tp->size() == 2);
  CHECK(out[8] == 1.0f);  // the local stand-in still did its work through the wrapper
}

TEST_CASE("phase timer: only direct children count against self time - overlapping phases", "[gpu-host]") {
  ScriptedClock clock;
  PhaseTimer t(&clock);
  t.begin("step");  // 0..20
  clock.now = 1;
  t.begin("backward");  // 1..11
  clock.now = 2;
  t.begin("dp reduce_scatter_v");  // 2..4: a child of backward, a grandchild of step
  clock.now = 4;
  t.end("dp reduce_scatter_v");
  clock.now = 11;
  t.end("backward");
  t.begin("a");  // 11..16, overlapping b (13..18): b began while a was open, so b is a's child
  clock.now = 13;
  t.begin("b");
  clock.now = 16;
  t.end("a");
  clock.now = 18;
  t.end("b");
  clock.now = 20;
  t.end("step");
  t.collect();
  CHECK(t.total("backward").ms == Approx(10));
  CHECK(t.total("backward").self_ms == Approx(8));
  CHECK(t.total("step").self_ms == Approx(20 - 10 - 5));  // backward and a are its children
  CHECK(t.total("a").self_ms == Approx(5 - 5));
  CHECK(t.total("b").self_ms == Approx(5));
}

TEST_CASE("phase timer: timed views time the groups without owning them", "[gpu-host]") {
  ScriptedClock clock;
  PhaseTimer t(&clock);
  const auto cpu = make_cpu_device();
  const Groups g = make_local_groups(cpu.get(), 0, 2, 1, 2, true);
  {
    const Groups v = timed_views(g, &t);
    Vec buf(4, 2.0f);
    clock.now = 1;
    v.pp->recv(Ref(buf.data()), 4, 1, 0);
    v.embedding->all_reduce(Ref(buf.data()), 4, ReduceOp::kSum);
    CHECK(v.dp->size() == 1);
  }
  t.collect();
  CHECK(t.total("pp recv").count == 1);
  CHECK(t.total("embedding all_reduce").count == 1);
  CHECK(g.pp->size() == 2);  // still usable after the views are gone
}

TEST_CASE("phase timer: the steady clock measures host time", "[gpu-host]") {
  SteadyPhaseClock clock;
  PhaseTimer t(&clock);
  t.begin("spin");
  volatile double x = 0;
  for (int i = 0; i < 100000; ++i) x = x + 1;
  t.end("spin");
  t.collect();
  CHECK(t.total("spin").ms >= 0);
  CHECK(t.total("spin").count == 1);
}

TEST_CASE("gpu module: paraplan loads CUDA only for a GPU run and the module resolves against the executable",
          "[gpu-host]") {
  // The CLI does not link CUDA, cuBLAS or NCCL (cuBLASLt alone is 540 MB to map per process).
  const std::string ldd = std::string("ldd ") + PARAPLAN_BINARY + " 2>&1";
  std::string libs;
  if (FILE* p = ::popen(ldd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) libs += buf;
    ::pclose(p);
  }
  REQUIRE_FALSE(libs.empty());
  CHECK(libs.find("libcublas") == std::string::npos);
  CHECK(libs.find("libcudart") == std::string::npos);
  CHECK(libs.find("libnccl") == std::string::npos);
  std::string why;
#ifdef PARAPLAN_HAVE_CUDA
  // Built with CUDA: the module loads here (no GPU needed to load it), every symbol resolved.
  INFO(why);
  CHECK(paraplan::validate::gpu_module_loadable(&why));
#else
  CHECK_FALSE(paraplan::validate::gpu_module_loadable(&why));
  CHECK(why == "this paraplan was built without CUDA");
#endif
}
