// Files the GUI reads and writes: the configs/ catalog (models, clusters,
// example specs), a directory listing for the Open dialog, and atomic writes
// for exports (a failed save leaves no partial file).
#pragma once

#include <string>
#include <vector>

#include "planner/search.hpp"

namespace paraplan::gui {

// The first folder of these that holds models/ and clusters/: $PARAPLAN_CONFIGS,
// <exe dir>/../configs, <exe dir>/../share/paraplan/configs, the source tree's
// configs/ (compiled in), ./configs. "" when none.
std::string find_configs_dir(const std::string& exe_dir, const std::string& source_configs);

struct Catalog {
  std::string dir;
  std::vector<std::string> models, clusters, examples;  // full paths, sorted by name
};
Catalog load_catalog(const std::string& configs_dir);

struct DirEntry {
  std::string name;
  bool is_dir = false;
};
// Sub-folders and .yaml/.yml/.json files of `dir` (folders first, by name; ".." first
// unless at the root). Empty on error.
std::vector<DirEntry> list_dir(const std::string& dir);

// Writes through a temporary file and a rename. Returns "" or the error.
std::string write_file_atomic(const std::string& path, const std::string& text);

enum class ExportFormat { kJson, kMarkdown };
// The plan as `paraplan plan --format json|markdown --top top` would print it.
std::string export_plan(ExportFormat f, const Spec& spec, const Plan& plan, int top);

}  // namespace paraplan::gui
