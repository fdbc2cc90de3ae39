// The Ultra-Scale Playbook's nanotron runs (tests/data/measurements/ultrascale-playbook-*.csv) as
// paraplan sees them, shared by the tests that hold memory, time and the decision rule against them.
#pragma once

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "costmodel/spec.hpp"
#include "test_helpers.hpp"

namespace paraplan::test {

// The data rows of a copied CSV (comment lines and the header skipped), `fields` fields each.
inline std::vector<std::vector<std::string>> read_csv(const std::string& rel, size_t fields = 16) {
  std::ifstream in(repo(rel));
  REQUIRE(in);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    f.resize(fields);
    rows.push_back(std::move(f));
  }
  return rows;
}

// One Playbook run as paraplan sees it: nanotron on AWS p5 nodes (H100 SXM with
// NVLink inside, EFA between them: configs/clusters/h100-aws-p5.yaml), seq
// 4096, flash attention, tp in REDUCE_SCATTER mode (sp when tp > 1), global
// batch dp x mbs x grad_accum; the layout unresolved in *l.
// The Playbook's "1B" and "3B" models (configs/models/nanotron-bench-*.yaml).
inline const Model& playbook_model(const std::string& model) {
  static const Model m1 = test::model("nanotron-bench-1b"), m3 = test::model("nanotron-bench-3b");
  return model == "1B" ? m1 : m3;
}

inline Spec playbook_spec(const std::string& model, int nodes, int dp, int tp, int pp, int zero, int mbs, int grad_accum,
                          Layout* l) {
  static const Cluster h100 = cluster("h100-aws-p5");
  Spec s;
  s.model = playbook_model(model);
  s.cluster = h100;
  s.num_nodes = nodes;
  s.search.allow_tp_across_nodes = true;
  s.training.framework = Framework::kNanotron;
  s.training.seq_length = 4096;
  s.training.global_batch_size = dp * mbs * grad_accum;
  s.training.flash_attention = true;
  *l = Layout{};
  l->dp = dp, l->tp = tp, l->pp = pp, l->zero = zero, l->mbs = mbs;
  l->sp = tp > 1;  // tp_mode REDUCE_SCATTER
  return s;
}

struct TimedRow {
  std::string id, model;
  int nodes, dp, tp, pp, zero, mbs, grad_accum;
  double mfu_pct, tokens_per_s_per_gpu;
};

// The runs that ran, from the full copy of the Playbook's 1B and 3B rows.
inline std::vector<TimedRow> read_timed_rows() {
  std::vector<TimedRow> rows;
  for (const auto& f : read_csv("tests/data/measurements/ultrascale-playbook-1B-3B.csv"))
    if (f[11] == "ran")
      rows.push_back({f[0], f[1], std::stoi(f[2]), std::stoi(f[4]), std::stoi(f[5]), std::stoi(f[6]), std::stoi(f[7]),
                      std::stoi(f[8]), std::stoi(f[9]), std::stod(f[12]), std::stod(f[13])});
  return rows;
}

}  // namespace paraplan::test
