// Bookkeeping of the GPU backend's caching pool, in plain C++ so that it is
// unit-tested without a GPU (tests/test_gpu_host.cpp) over a fake source.
// cuda_pool.cpp puts it over cudaMalloc.
//
// Policy (PyTorch's caching allocator, FACTS.md "Overheads beyond tensors"):
//  * requests round up to 512 B;
//  * blocks of <= 1 MiB come from 2 MiB segments, blocks of 1-10 MiB from
//    20 MiB segments, larger ones from a segment of their own size rounded up
//    to 2 MiB; small and large blocks never share a segment;
//  * best fit: the smallest free block that fits (lowest address on ties),
//    split when the rest is worth keeping (>= 512 B small, > 1 MiB large);
//  * a freed block merges with free neighbours of its segment;
//  * when the source refuses a segment, every fully free segment is given back
//    and the request retried once.
// Fragmentation (the memory model's `fragmentation` category) is what the pool
// holds beyond what its callers asked for: reserved - requested, which counts
// rounding, split remainders and cached free segments alike.
// Not thread-safe: the executor allocates from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace paraplan::validate {

// Where segments come from: cudaMalloc/cudaFree, or a fake in tests.
class SegmentSource {
 public:
  virtual ~SegmentSource() = default;
  virtual void* map(std::int64_t bytes) = 0;  // nullptr when out of memory
  virtual void unmap(void* p, std::int64_t bytes) = 0;
};

struct PoolStats {
  std::int64_t reserved = 0;   // bytes of segments held from the source
  std::int64_t allocated = 0;  // bytes of blocks handed out (rounded sizes)
  std::int64_t requested = 0;  // bytes the callers asked for, live
  std::int64_t segments = 0;
  std::int64_t live_blocks = 0;
  std::int64_t peak_reserved = 0;
  std::int64_t peak_requested = 0;
  // reserved - requested at the moment `requested` first reached its peak:
  // the fragmentation at the step's peak (the pool serves only the tracking
  // allocator, so its peak is the tracker's total peak).
  std::int64_t slack_at_peak = 0;
  std::int64_t source_maps = 0, source_unmaps = 0;
};

class PoolCore {
 public:
  static constexpr std::int64_t kRound = 512;
  static constexpr std::int64_t kSmallSize = 1 << 20;        // blocks up to here are "small"
  static constexpr std::int64_t kSmallSegment = 2 << 20;     // segment for small blocks
  static constexpr std::int64_t kMidSegment = 20 << 20;      // segment for 1-10 MiB blocks
  static constexpr std::int64_t kMinLargeAlloc = 10 << 20;   // from here: own segment
  static constexpr std::int64_t kRoundLarge = 2 << 20;

  explicit PoolCore(SegmentSource* source) : source_(source) {}
  ~PoolCore();  // gives every segment back, live blocks included
  PoolCore(const PoolCore&) = delete;
  PoolCore& operator=(const PoolCore&) = delete;

  // nullptr when the source is exhausted even after giving back free segments.
  // A request of 0 bytes gets a 512-byte block (a distinct, valid pointer).
  void* allocate(std::int64_t bytes);
  // Ignores pointers it did not hand out (as TrackingAllocator does).
  void deallocate(void* p);
  // Gives every fully free segment back to the source; returns the bytes.
  std::int64_t release_free_segments();

  const PoolStats& stats() const { return stats_; }
  std::int64_t slack() const { return stats_.reserved - stats_.requested; }
  // Forget peaks (keep live state), e.g. after initialisation.
  void reset_peaks();

  static std::int64_t round_size(std::int64_t bytes);
  // Segment size for a block of `rounded` bytes.
  static std::int64_t segment_size(std::int64_t rounded);
  // Size of the block behind a live pointer, or -1.
  std::int64_t block_size(const void* p) const;
  // Walks every segment and checks the bookkeeping; "" when consistent, else
  // what is wrong (tests).
  std::string check_invariants() const;

 private:
  struct Block {
    char* ptr;
    std::int64_t size;
    std::int64_t requested = 0;  // 0 while free
    bool free = true;
    bool small;
    Block* prev = nullptr;  // neighbours within the segment, by address
    Block* next = nullptr;
  };
  struct BySize {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : std::less<const char*>()(a->ptr, b->ptr);
    }
  };
  using FreeSet = std::set<Block*, BySize>;

  FreeSet& free_set(bool small) { return small ? small_free_ : large_free_; }
  Block* find_free(bool small, std::int64_t size);
  Block* new_segment(bool small, std::int64_t size);
  void split(Block* b, std::int64_t size);
  void note_peaks();

  SegmentSource* source_;
  FreeSet small_free_, large_free_;
  std::unordered_map<const void*, Block*> live_;
  std::vector<Block*> segments_;  // first block of each segment
  PoolStats stats_;
};

}  // namespace paraplan::validate
