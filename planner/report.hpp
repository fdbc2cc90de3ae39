// Reports of one layout's memory (explain, check) as a table, JSON or Markdown.
// Every format is rendered from the same MemoryEstimate; JSON through nlohmann.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "costmodel/memory.hpp"

namespace paraplan {

enum class Format { kTable, kJson, kMarkdown, kCsv };
bool parse_format(const std::string& s, Format* out);

// {"weights": bytes, …, "total": bytes}
nlohmann::json memory_json(const MemoryBreakdown& m);
// The one-layout JSON document (schema in README.md).
nlohmann::json layout_json(const Spec& spec, const Layout& layout, const MemoryEstimate& e);

struct ExplainOptions {
  bool formulas = false;
  int stage = -1;  // stage whose formulas are printed; -1 = heaviest
};
// The explain JSON document: layout_json plus, with --formulas, the terms.
nlohmann::json explain_json(const Spec& spec, const Layout& layout, const MemoryEstimate& e,
                            const ExplainOptions& o);
std::string render_explain(Format f, const Spec& spec, const Layout& layout,
                           const MemoryEstimate& e, const ExplainOptions& o);

// One line for `check`: fits or not, by how much, and the dominant term.
std::string check_summary(const Spec& spec, const Layout& layout, const MemoryEstimate& e);

std::string gib(std::int64_t bytes, int decimals = 2);

// "network 50 GB/s per GPU per direction (8 x 400 Gb/s NICs per node / 8 GPUs)": the
// inter-node bandwidth as the model uses it, and where it came from.
std::string network_text(const Cluster& c);
// {"inter_node_gbs_per_gpu", and "nics_per_node", "nic_gbps" when given so}
nlohmann::json network_json(const Cluster& c);

}  // namespace paraplan
