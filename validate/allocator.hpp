// The tracking allocator: every buffer the executor uses is allocated here,
// under one of the memory model's categories (costmodel/memory.hpp), so the
// measured peak per category is comparable term by term with the prediction.
// It records live and peak bytes per category, the peak of the total, and the
// point in the step ("phase") where each peak happened. With a limit set it
// refuses past the budget by throwing OutOfMemory, as a GPU would.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "costmodel/memory.hpp"
#include "validate/tensor.hpp"

namespace paraplan::validate {

// Where raw bytes come from: host memory (CPU backend) or a device pool (GPU).
class MemoryResource {
 public:
  virtual ~MemoryResource() = default;
  virtual void* allocate(std::int64_t bytes) = 0;  // nullptr when the device is out of memory
  virtual void deallocate(void* p, std::int64_t bytes) = 0;
  // Bytes the resource holds beyond what is allocated (pool slack) right now.
  virtual std::int64_t reserved_slack() const { return 0; }
  // What the device holds for this process beyond the tracked tensors, read
  // after a run: runtime (CUDA context, kernel images, library workspaces,
  // communicator buffers) and the pool's reserved-but-unallocated bytes when
  // its allocations peaked. Host memory: none of either.
  struct Outside {
    std::int64_t runtime = 0, fragmentation = 0;
  };
  virtual Outside outside() const { return {}; }
};

// 64-byte aligned host memory, zero-filled on allocation (first touch, so the
// pages are resident and a measured RSS agrees with the count).
class HostMemory final : public MemoryResource {
 public:
  void* allocate(std::int64_t bytes) override;
  void deallocate(void* p, std::int64_t bytes) override;
};

// Untracked memory straight from a MemoryResource, released on scope exit:
// calibration's buffers (not a tracked run) and the executor's one-element
// loss reduction buffer (NCCL reduces device memory only; 64 bytes that no
// memory category owns, so the per-category comparison is unchanged).
class Scratch {
 public:
  Scratch(MemoryResource& mem, std::int64_t bytes) : mem_(mem), bytes_(bytes < 64 ? 64 : bytes) {
    p_ = mem_.allocate(bytes_);
    if (!p_) throw std::runtime_error("out of memory allocating " + std::to_string(bytes_) + " bytes of scratch");
  }
  ~Scratch() { mem_.deallocate(p_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Ref ref(DType t) const { return Ref(p_, t); }
  float* f32() const { return static_cast<float*>(p_); }
  std::uint8_t* bytes() const { return static_cast<std::uint8_t*>(p_); }

 private:
  MemoryResource& mem_;
  std::int64_t bytes_;
  void* p_ = nullptr;
};

struct OutOfMemory : std::runtime_error {
  OutOfMemory(const std::string& msg, Category c, std::int64_t req, std::string ph)
      : std::runtime_error(msg), category(c), requested(req), phase(std::move(ph)) {}
  Category category;
  std::int64_t requested;
  std::string phase;
};

struct CategoryStats {
  std::int64_t live = 0;
  std::int64_t peak = 0;
  std::string peak_phase;  // phase when `peak` was first reached
};

class TrackingAllocator {
 public:
  // limit_bytes < 0: no limit.
  explicit TrackingAllocator(MemoryResource* backing, std::int64_t limit_bytes = -1);
  ~TrackingAllocator();
  TrackingAllocator(const TrackingAllocator&) = delete;
  TrackingAllocator& operator=(const TrackingAllocator&) = delete;

  void* allocate(std::int64_t bytes, Category c, const char* what);
  void deallocate(void* p);

  // A label for the current point of the step, e.g. "step 1 F chunk 0 mb 3 layer 2".
  void set_phase(std::string phase) { phase_ = std::move(phase); }
  const std::string& phase() const { return phase_; }

  const CategoryStats& stats(Category c) const { return cats_[int(c)]; }
  std::int64_t live() const { return live_; }
  std::int64_t peak() const { return peak_; }
  const std::string& peak_phase() const { return peak_phase_; }
  // Live bytes per category at the moment the total peaked.
  const MemoryBreakdown& at_peak() const { return at_peak_; }
  std::int64_t limit() const { return limit_; }
  MemoryResource& backing() const { return *backing_; }
  std::int64_t allocations() const { return count_; }
  // Forget peaks (keep live bytes), e.g. after initialisation.
  void reset_peaks();

 private:
  struct Block {
    std::int64_t bytes;
    Category category;
  };
  MemoryResource* backing_;
  std::int64_t limit_;
  std::unordered_map<void*, Block> blocks_;
  std::array<CategoryStats, kNumCategories> cats_{};
  std::int64_t live_ = 0, peak_ = 0, count_ = 0;
  std::string phase_ = "start", peak_phase_;
  MemoryBreakdown at_peak_{};
};

// A move-only owned buffer of `numel` elements of `dtype` in category `c`.
class Buffer {
 public:
  Buffer() = default;
  Buffer(TrackingAllocator* a, std::int64_t numel, DType dtype, Category c, const char* what);
  // Raw bytes (masks, token ids): dtype is meaningless, numel counts bytes.
  static Buffer bytes(TrackingAllocator* a, std::int64_t bytes, Category c, const char* what);
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void reset();
  explicit operator bool() const { return data_ != nullptr; }
  Ref ref() const { return Ref(data_, dtype_); }
  Ref at(std::int64_t elems) const { return ref().at(elems); }
  void* data() const { return data_; }
  std::int64_t numel() const { return numel_; }
  std::int64_t size_bytes() const { return bytes_; }
  DType dtype() const { return dtype_; }
  template <class T>
  T* as() const { return static_cast<T*>(data_); }

 private:
  TrackingAllocator* alloc_ = nullptr;
  void* data_ = nullptr;
  std::int64_t numel_ = 0, bytes_ = 0;
  DType dtype_ = DType::kFp32;
};

}  // namespace paraplan::validate
