#include "validate/gpu/pool_core.hpp"

#include <algorithm>

namespace paraplan::validate {

PoolCore::~PoolCore() {
  for (Block* head : segments_) {
    char* base = head->ptr;
    std::int64_t bytes = 0;
    for (Block* b = head; b;) {
      bytes += b->size;
      Block* next = b->next;
      delete b;
      b = next;
    }
    source_->unmap(base, bytes);
  }
}

std::int64_t PoolCore::round_size(std::int64_t bytes) {
  if (bytes <= 0) return kRound;
  return (bytes + kRound - 1) / kRound * kRound;
}

std::int64_t PoolCore::segment_size(std::int64_t rounded) {
  if (rounded <= kSmallSize) return kSmallSegment;
  if (rounded < kMinLargeAlloc) return kMidSegment;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

PoolCore::Block* PoolCore::find_free(bool small, std::int64_t size) {
  FreeSet& set = free_set(small);
  Block key{nullptr, size, 0, true, small};
  auto it = set.lower_bound(&key);  // smallest size >= request, lowest address first
  if (it == set.end()) return nullptr;
  Block* b = *it;
  set.erase(it);
  return b;
}

PoolCore::Block* PoolCore::new_segment(bool small, std::int64_t size) {
  const std::int64_t seg = segment_size(size);
  void* p = source_->map(seg);
  if (!p) {
    release_free_segments();
    p = source_->map(seg);
    if (!p) return nullptr;
  }
  ++stats_.source_maps;
  ++stats_.segments;
  stats_.reserved += seg;
  Block* b = new Block{static_cast<char*>(p), seg, 0, true, small};
  segments_.push_back(b);
  return b;
}

void PoolCore::split(Block* b, std::int64_t size) {
  const std::int64_t rest = b->size - size;
  const bool worth = b->small ? rest >= kRound : rest > kSmallSize;
  if (!worth) return;
  Block* r = new Block{b->ptr + size, rest, 0, true, b->small, b, b->next};
  if (b->next) b->next->prev = r;
  b->next = r;
  b->size = size;
  free_set(r->small).insert(r);
}

void* PoolCore::allocate(std::int64_t bytes) {
  const std::int64_t size = round_size(bytes);
  const bool small = size <= kSmallSize;
  Block* b = find_free(small, size);
  if (!b) b = new_segment(small, size);
  if (!b) return nullptr;
  split(b, size);
  b->free = false;
  b->requested = std::max<std::int64_t>(bytes, 0);
  live_.emplace(b->ptr, b);
  stats_.allocated += b->size;
  stats_.requested += b->requested;
  ++stats_.live_blocks;
  note_peaks();
  return b->ptr;
}

void PoolCore::deallocate(void* p) {
  auto it = live_.find(p);
  if (it == live_.end()) return;
  Block* b = it->second;
  live_.erase(it);
  stats_.allocated -= b->size;
  stats_.requested -= b->requested;
  --stats_.live_blocks;
  b->free = true;
  b->requested = 0;
  FreeSet& set = free_set(b->small);
  // Merge into the previous block (so a segment's first block never goes away).
  if (b->prev && b->prev->free) {
    Block* prev = b->prev;
    set.erase(prev);
    prev->size += b->size;
    prev->next = b->next;
    if (b->next) b->next->prev = prev;
    delete b;
    b = prev;
  }
  if (b->next && b->next->free) {
    Block* next = b->next;
    set.erase(next);
    b->size += next->size;
    b->next = next->next;
    if (next->next) next->next->prev = b;
    delete next;
  }
  set.insert(b);
}

std::int64_t PoolCore::release_free_segments() {
  std::int64_t released = 0;
  std::vector<Block*> keep;
  keep.reserve(segments_.size());
  for (Block* head : segments_) {
    if (head->free && !head->next) {  // one free block spans the segment
      free_set(head->small).erase(head);
      source_->unmap(head->ptr, head->size);
      ++stats_.source_unmaps;
      --stats_.segments;
      stats_.reserved -= head->size;
      released += head->size;
      delete head;
    } else {
      keep.push_back(head);
    }
  }
  segments_.swap(keep);
  return released;
}

void PoolCore::note_peaks() {
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  if (stats_.requested > stats_.peak_requested) {
    stats_.peak_requested = stats_.requested;
    stats_.slack_at_peak = stats_.reserved - stats_.requested;
  }
}

void PoolCore::reset_peaks() {
  stats_.peak_reserved = stats_.reserved;
  stats_.peak_requested = stats_.requested;
  stats_.slack_at_peak = stats_.reserved - stats_.requested;
}

std::int64_t PoolCore::block_size(const void* p) const {
  auto it = live_.find(p);
  return it == live_.end() ? -1 : it->second->size;
}

std::string PoolCore::check_invariants() const {
  std::int64_t reserved = 0, allocated = 0, requested = 0, live = 0, free_blocks = 0;
  for (const Block* head : segments_) {
    if (head->prev) return "segment head has a predecessor";
    const Block* last = nullptr;
    for (const Block* b = head; b; last = b, b = b->next) {
      reserved += b->size;
      if (b->size <= 0 || b->size % kRound) return "block size not a positive multiple of 512";
      if (b->small != head->small) return "small and large blocks share a segment";
      if (last && last->ptr + last->size != b->ptr) return "blocks of a segment are not contiguous";
      if (last && last->free && b->free) return "two adjacent free blocks were not merged";
      if (b->free) {
        ++free_blocks;
        const FreeSet& set = b->small ? small_free_ : large_free_;
        if (!set.count(const_cast<Block*>(b))) return "free block missing from its free set";
      } else {
        ++live;
        allocated += b->size;
        requested += b->requested;
        if (!live_.count(b->ptr)) return "live block missing from the live map";
      }
    }
  }
  if (free_blocks != std::int64_t(small_free_.size() + large_free_.size()))
    return "free sets hold blocks that are not in any segment";
  if (live != std::int64_t(live_.size()) || live != stats_.live_blocks) return "live block count differs";
  if (reserved != stats_.reserved) return "reserved bytes differ from the segments";
  if (allocated != stats_.allocated) return "allocated bytes differ from the live blocks";
  if (requested != stats_.requested) return "requested bytes differ from the live blocks";
  if (std::int64_t(segments_.size()) != stats_.segments) return "segment count differs";
  return "";
}

}  // namespace paraplan::validate
