// Fuzzes the layout string, Megatron-LM arguments and a DeepSpeed JSON config
// (the three ways `check` takes a layout) against the shipped Llama-2-7B spec,
// then the memory and time of whatever resolves. The first byte picks the source.
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "costmodel/memory.hpp"
#include "costmodel/time.hpp"
#include "fuzz_common.hpp"
#include "planner/layout_source.hpp"
#include "planner/spec_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace paraplan;
  if (size == 0) return 0;
  static const Spec base = load_spec_file(PARAPLAN_SOURCE_DIR "/configs/examples/llama2-7b-dgx-h100.yaml");
  static const std::string ds_path = "/tmp/paraplan-fuzz-ds-" + std::to_string(getpid()) + ".json";
  const std::string text = fuzz::text_of(data + 1, size - 1);
  return fuzz::expect_clean([&] {
    Spec s = base;
    LayoutRequest req;
    switch (data[0] % 3) {
      case 0: req.layout = text; break;
      case 1: req.megatron_args = text; break;
      default:
        std::ofstream(ds_path, std::ios::binary | std::ios::trunc) << text;
        req.deepspeed_config = ds_path;
    }
    const Layout l = layout_from_sources(&s, "spec.yaml", req);
    const MemoryEstimate e = estimate_memory(s, l);
    const StepTime t = estimate_time(s, l);
    if (e.peak_bytes < 0 || !(t.step_s >= 0)) std::abort();
  });
}
