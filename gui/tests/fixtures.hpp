// A hand-made plan for the view-model tests: six candidates whose every
// column value was chosen here, so sort orders and filters can be worked out
// by hand (see the table in test_table_model.cpp).
#pragma once

#include <string>
#include <vector>

#include "costmodel/memory.hpp"
#include "planner/search.hpp"

namespace paraplan::gui::test {

inline std::string repo(const std::string& rel) { return std::string(PARAPLAN_SOURCE_DIR) + "/" + rel; }

inline Candidate cand(const char* layout, bool fits, double peak_gib, double step, double tokens,
                      double mfu, double bubble, double comm) {
  Candidate c;
  c.layout = parse_layout(layout);
  c.fits = fits;
  c.peak_bytes = std::int64_t(peak_gib * kGiB);
  c.time.step_s = step;
  c.time.tokens_per_s = tokens;
  c.time.mfu = mfu;
  c.time.bubble_fraction = bubble;
  c.time.exposed_comm_fraction = comm;
  return c;
}

//  i  layout                                        fits peak  step tokens  mfu bubble comm
//  0  dp=4,tp=2,pp=1       zero=1 none      mbs=1    yes  40   10   5000   .45  0     .10
//  1  dp=2,tp=2,pp=2  sp=1 zero=2 selective mbs=2    yes  30   12   4200   .40  .05   .20
//  2  dp=1,tp=8,pp=1       zero=0 full      mbs=4    yes  20   15   3300   .30  0     .35
//  3  dp=2,tp=1,pp=4 vpp=2 zero=3 none      mbs=1    yes  35   16   3100   .28  .10   .05
//  4  dp=8,tp=1,pp=1       zero=0 none      mbs=2    OOM  90    8   6000   .50  0     .15
//  5  dp=1,tp=2,pp=4  sp=1 zero=0 selective mbs=1 gpipe OOM 85 20   2500   .22  .30   .25
// Pareto front (fitting, by memory): 2 (20 GiB, 15 s), 1 (30, 12), 0 (40, 10);
// 3 (35, 16) is dominated by 1; 4 is faster than all but does not fit.
inline Plan six_plan() {
  Plan p;
  p.candidates = {
      cand("dp=4,tp=2,pp=1,vpp=1,sp=0,zero=1,recompute=none,mbs=1", true, 40, 10, 5000, .45, 0, .10),
      cand("dp=2,tp=2,pp=2,vpp=1,sp=1,zero=2,recompute=selective,mbs=2", true, 30, 12, 4200, .40, .05, .20),
      cand("dp=1,tp=8,pp=1,vpp=1,sp=0,zero=0,recompute=full,mbs=4", true, 20, 15, 3300, .30, 0, .35),
      cand("dp=2,tp=1,pp=4,vpp=2,sp=0,zero=3,recompute=none,mbs=1", true, 35, 16, 3100, .28, .10, .05),
      cand("dp=8,tp=1,pp=1,vpp=1,sp=0,zero=0,recompute=none,mbs=2", false, 90, 8, 6000, .50, 0, .15),
      cand("dp=1,tp=2,pp=4,vpp=1,sp=1,zero=0,recompute=selective,mbs=1,schedule=gpipe", false, 85, 20,
           2500, .22, .30, .25),
  };
  p.evaluated = 6;
  p.feasible = 4;
  p.pareto = pareto_front(p.candidates);
  return p;
}

inline std::vector<std::string> texts(const Plan& p) {
  std::vector<std::string> t;
  for (const Candidate& c : p.candidates) t.push_back(to_string(c.layout));
  return t;
}

}  // namespace paraplan::gui::test
