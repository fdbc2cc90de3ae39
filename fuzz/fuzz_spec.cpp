// Fuzzes a plan spec (YAML, models and clusters inline or as the repo's files),
// then everything a spec feeds: every stage's memory and the step time of the
// spec's layout, and the search when the GPU count is small enough to be quick
// (<= 256 GPUs, <= 128 layers).
#include <cstdlib>
#include <functional>
#include <string_view>

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
    // most of its executions. Even there it is most of an execution's time, so
    // it runs for a spec with search constraints (fuzzed lists are what the
    // search's own parsing sees) and for one input in four otherwise, chosen by
    // the input's hash so that an input always takes the same path.
    const SearchSpace& q = s.search;
    const bool constrained = !(q.dp.empty() && q.tp.empty() && q.cp.empty() && q.pp.empty() && q.vpp.empty() &&
                               q.zero.empty() && q.mbs.empty() && q.recompute.empty() && q.sp.empty() &&
                               q.schedule.empty());
    const bool sampled = std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char*>(data), size)) % 4 == 0;
    if (s.num_gpus() <= 256 && s.model.num_layers <= 128 && (constrained || sampled)) (void)make_plan(s);
  });
}
