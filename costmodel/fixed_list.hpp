// A list of at most N small plain values kept inline (no allocation), whose
// unused slots are never constructed: the cost model builds such lists (saved
// tensors, a layer's GEMMs, state buffers) several times per evaluated layout,
// and value-initialising all N slots each time was a measurable share of the
// search (bench/README.md).
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>

namespace paraplan {

template <class T, int N>
class FixedList {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "FixedList holds plain values only");

 public:
  FixedList() = default;
  void add(const T& t) { ::new (static_cast<void*>(storage_ + sizeof(T) * std::size_t(size_++))) T(t); }
  const T* begin() const { return std::launder(reinterpret_cast<const T*>(storage_)); }
  const T* end() const { return begin() + size_; }
  int size() const { return size_; }
  const T& operator[](int i) const { return begin()[i]; }

 private:
  alignas(T) unsigned char storage_[sizeof(T) * N];
  int size_ = 0;
};

}  // namespace paraplan
