// A small memo of values that depend on only part of a layout, for a search
// that evaluates many layouts of one Spec (planner/search.cpp): the layouts it
// walks in a row differ mostly in ZeRO stage and recomputation, while a
// layer's GEMM times or saved bytes depend on neither. The caller passes the
// layout with the fields the value does not depend on normalised (so that
// equal keys mean equal values); the last N keys are kept.
#pragma once

#include <array>

#include "costmodel/layout.hpp"

namespace paraplan {

struct Spec;

template <class V, int N>
class LayoutMemo {
 public:
  // The value for `key` under `spec`, computed by `compute()` on a miss. A
  // memo serves one Spec: another one clears it. The reference holds until
  // the next get().
  template <class F>
  const V& get(const Spec* spec, const Layout& key, F&& compute) {
    if (spec != spec_) spec_ = spec, used_ = 0;
    for (int i = 0; i < used_; ++i)
      if (keys_[i] == key) return values_[i];
    const int slot = used_ < N ? used_++ : int(next_++ % N);
    keys_[slot] = key;
    values_[slot] = compute();
    return values_[slot];
  }

 private:
  const Spec* spec_ = nullptr;
  std::array<Layout, N> keys_{};
  std::array<V, N> values_{};
  int used_ = 0;
  unsigned next_ = 0;
};

}  // namespace paraplan
