// Fuzzes a HuggingFace config.json read as a model, then its parameter count.
#include <cstdlib>

#include "fuzz_common.hpp"
#include "planner/spec_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace paraplan;
  return fuzz::expect_clean([&] {
    const Model m = model_from_hf_json(fuzz::text_of(data, size), "config.json");
    if (total_params(m) <= 0) std::abort();
  });
}
