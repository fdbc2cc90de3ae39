// Fuzzes a plan spec (YAML, models and clusters inline or as the repo's files),
// then everything a spec feeds: every stage's memory and the step time of the
// spec's layout, and the search when the GPU count is small enough to be quick
// (<= 256 GPUs, <= 128 layers).
#include <cstdlib>

#include "costmodel/memory.hpp"
#include "costmodel/time.hpp"
#include "fuzz_common.hpp"
#include "planner/layout_source.hpp"
#include "planner/search.hpp"
#include "planner/spec_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace paraplan;
  return fuzz::expect_clean([&] {
    // Relative model/cluster paths resolve against the repo's configs/examples.
    Spec s = load_spec_text(fuzz::text_of(data, size), PARAPLAN_SOURCE_DIR "/configs/examples/fuzz.yaml");
    if (s.default_layout) {
      Layout l = layout_from_sources(&s, "fuzz.yaml", LayoutRequest{});
      const MemoryEstimate e = estimate_memory(s, l);
      const StepTime t = estimate_time(s, l);
      if (e.peak_bytes < 0 || !(t.step_s >= 0)) std::abort();  // a wrong answer is a finding too
    }
    // The search on small clusters only: every code path of it runs there, and
    // a larger one (cp, uneven stages, block recompute) would cost the fuzzer
    // most of its executions.
    if (s.num_gpus() <= 256 && s.model.num_layers <= 128) (void)make_plan(s);
  });
}
