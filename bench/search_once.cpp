// One full search (make_plan) of a spec, or n evaluate() calls of one layout,
// and nothing else: run it under `valgrind --tool=callgrind` to count the
// instructions a search costs, a figure that, unlike wall time, does not move
// with the load or the clock of a shared VM (bench/README.md, "Instructions").
//   paraplan_search_once SPEC            one search of SPEC as `paraplan plan` runs it
//   paraplan_search_once SPEC --all      the same with the spec's search: block removed
//   paraplan_search_once SPEC --evaluate LAYOUT N   N evaluations of LAYOUT
//   paraplan_search_once SPEC --load     only loads the spec (the baseline to subtract)
//   paraplan_search_once SPEC --dump [FRAMEWORK]  the --all search's every candidate, in rank
//        order, with its peak bytes and step time to the last bit (%a): an exact
//        before/after check for a change meant to make the search faster only
// Prints the evaluated count (or the sum of the step times, so nothing is optimised away).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include "planner/search.hpp"
#include "planner/spec_loader.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SPEC [--all | --load | --evaluate LAYOUT N | --dump [FRAMEWORK]]\n", argv[0]);
    return 2;
  }
  try {
    paraplan::Spec s = paraplan::load_spec_file(argv[1]);
    const std::string mode = argc > 2 ? argv[2] : "";
    if (mode == "--load") return 0;
    if (mode == "--evaluate") {
      if (argc < 5) throw std::runtime_error("--evaluate needs LAYOUT and N");
      paraplan::Layout l = paraplan::parse_layout(argv[3]);
      if (const auto problem = paraplan::resolve_layout(s, &l)) throw std::runtime_error(problem->message);
      const int n = std::atoi(argv[4]);
      double sum = 0;
      for (int i = 0; i < n; ++i) sum += paraplan::evaluate(s, l).time.step_s;
      std::printf("%g\n", sum);
      return 0;
    }
    if (mode == "--dump") {
      s.search = paraplan::SearchSpace{};
      s.search.allow_tp_across_nodes = false;
      if (argc > 3) {
        if (!paraplan::parse_framework(argv[3], &s.training.framework))
          throw std::runtime_error(std::string("unknown framework ") + argv[3]);
      }
      const paraplan::Plan p = paraplan::make_plan(s);
      for (const paraplan::Candidate& c : p.candidates)
        std::printf("%s %d %lld %a %d %u\n", paraplan::to_string(c.layout).c_str(), c.peak_stage,
                    static_cast<long long>(c.peak_bytes), c.time.step_s, int(c.fits), unsigned(c.time.warnings));
      std::printf("pareto");
      for (int i : p.pareto) std::printf(" %d", i);
      std::printf("\nrejected");
      for (std::int64_t n : p.rejected) std::printf(" %lld", static_cast<long long>(n));
      std::printf("\n%lld evaluated, %lld feasible\n", static_cast<long long>(p.evaluated), static_cast<long long>(p.feasible));
      return 0;
    }
    if (mode == "--all") {
      s.search = paraplan::SearchSpace{};
      s.search.allow_tp_across_nodes = false;
    }
    const paraplan::Plan p = paraplan::make_plan(s);
    std::printf("%lld layouts evaluated\n", static_cast<long long>(p.evaluated));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[1], e.what());
    return 2;
  }
  return 0;
}
