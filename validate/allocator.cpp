#include "validate/allocator.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

namespace paraplan::validate {

void* HostMemory::allocate(std::int64_t bytes) {
  const std::size_t n = std::size_t((bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, n == 0 ? 64 : n);
  if (p) std::memset(p, 0, n);
  return p;
}

void HostMemory::deallocate(void* p, std::int64_t) { std::free(p); }

TrackingAllocator::TrackingAllocator(MemoryResource* backing, std::int64_t limit_bytes)
    : backing_(backing), limit_(limit_bytes) {}

TrackingAllocator::~TrackingAllocator() {
  for (auto& [p, b] : blocks_) backing_->deallocate(p, b.bytes);
}

static std::string gib_text(std::int64_t b) { return fmt::format("{:.3f} GiB", double(b) / kGiB); }

void* TrackingAllocator::allocate(std::int64_t bytes, Category c, const char* what) {
  if (limit_ >= 0 && live_ + bytes > limit_)
    throw OutOfMemory(fmt::format("out of memory: {} needs {} ({}) for {} with {} live of a {} limit",
                                  phase_, gib_text(bytes), category_name(c), what, gib_text(live_),
                                  gib_text(limit_)),
                      c, bytes, phase_);
  void* p = backing_->allocate(bytes);
  if (!p)
    throw OutOfMemory(fmt::format("out of memory: {} could not allocate {} ({}) for {} with {} live",
                                  phase_, gib_text(bytes), category_name(c), what, gib_text(live_)),
                      c, bytes, phase_);
  blocks_.emplace(p, Block{bytes, c});
  ++count_;
  CategoryStats& s = cats_[int(c)];
  s.live += bytes;
  if (s.live > s.peak) {
    s.peak = s.live;
    s.peak_phase = phase_;
  }
  live_ += bytes;
  if (live_ > peak_) {
    peak_ = live_;
    peak_phase_ = phase_;
    for (int i = 0; i < kNumCategories; ++i) at_peak_.bytes[i] = cats_[i].live;
  }
  return p;
}

void TrackingAllocator::deallocate(void* p) {
  if (!p) return;
  auto it = blocks_.find(p);
  if (it == blocks_.end()) return;  // not ours: a bug, but never free foreign memory
  cats_[int(it->second.category)].live -= it->second.bytes;
  live_ -= it->second.bytes;
  backing_->deallocate(p, it->second.bytes);
  blocks_.erase(it);
}

void TrackingAllocator::reset_peaks() {
  peak_ = live_;
  peak_phase_ = phase_;
  for (int i = 0; i < kNumCategories; ++i) {
    cats_[i].peak = cats_[i].live;
    cats_[i].peak_phase = phase_;
    at_peak_.bytes[i] = cats_[i].live;
  }
}

Buffer::Buffer(TrackingAllocator* a, std::int64_t numel, DType dtype, Category c, const char* what)
    : alloc_(a), numel_(numel), bytes_(numel * storage_bytes(dtype)), dtype_(dtype) {
  data_ = a->allocate(bytes_, c, what);
}

Buffer Buffer::bytes(TrackingAllocator* a, std::int64_t bytes, Category c, const char* what) {
  Buffer b;
  b.alloc_ = a;
  b.numel_ = b.bytes_ = bytes;
  b.data_ = a->allocate(bytes, c, what);
  return b;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    alloc_ = o.alloc_;
    data_ = o.data_;
    numel_ = o.numel_;
    bytes_ = o.bytes_;
    dtype_ = o.dtype_;
    o.data_ = nullptr;
    o.alloc_ = nullptr;
  }
  return *this;
}

void Buffer::reset() {
  if (data_ && alloc_) alloc_->deallocate(data_);
  data_ = nullptr;
}

}  // namespace paraplan::validate
