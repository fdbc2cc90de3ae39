// Shared by the libFuzzer harnesses (fuzz/*.cpp): a bad input must end in a
// SpecError or LayoutError (the CLI's one-line exit 2); anything else escaping
// — another exception, a crash, a sanitizer report, a hang — is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "costmodel/layout.hpp"
#include "planner/spec_error.hpp"

namespace paraplan::fuzz {

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Runs f; the two expected error types are swallowed, everything else escapes.
template <class F>
int expect_clean(F&& f) {
  try {
    f();
  } catch (const SpecError&) {
  } catch (const LayoutError&) {
  }
  return 0;
}

}  // namespace paraplan::fuzz
