// Loading specs from YAML (and HuggingFace config.json for models). Strict:
// unknown keys, wrong types and impossible values are SpecErrors naming the
// file, line and field.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "costmodel/spec.hpp"
#include "planner/spec_error.hpp"

namespace YAML {
class Node;
}

namespace paraplan {

// A model file: paraplan YAML, or a HuggingFace config.json (by extension or
// leading '{').
Model load_model_file(const std::string& path);
Cluster load_cluster_file(const std::string& path);
// A plan spec; `model` and `cluster` are paths relative to it or inline maps.
Spec load_spec_file(const std::string& path);
// The same from text already read; `path` names it in errors and anchors
// relative model/cluster paths.
Spec load_spec_text(const std::string& text, const std::string& path);

// The training settings a spec gets when its training: map gives only
// seq_length and global_batch_size (both 1 here; the caller sets them).
Training default_training(const Model& m);

// The same from already parsed YAML (file names only label errors).
Model model_from_yaml(const YAML::Node& node, const std::string& file, const std::string& prefix);
Cluster cluster_from_yaml(const YAML::Node& node, const std::string& file,
                          const std::string& prefix);
// HuggingFace config.json text.
Model model_from_hf_json(const std::string& text, const std::string& file);

// "JSON syntax error: <what nlohmann says, without its prefix>".
std::string json_error_text(const std::exception& e);
// A JSON number past double's range (nlohmann out_of_range.406), named by its line and key.
SpecError json_range_error(const std::string& path, const std::string& text, const std::exception& e,
                           const std::string& field);

// Parses a JSON input file (a HuggingFace config, a DeepSpeed config): syntax
// errors and out-of-range numbers as SpecErrors naming the line, and a key
// given twice in one object as an error naming its path (nlohmann would keep
// the last in silence; issue 46). `field` labels errors with no key of their own.
nlohmann::json parse_json_input(const std::string& text, const std::string& path, const std::string& field);

// Reads a whole file or throws SpecError("cannot read").
// Spec, model, cluster and config files are small: anything larger is refused.
inline constexpr std::size_t kMaxInputFileBytes = std::size_t(16) << 20;
// Reads a regular file (FIFOs, devices and directories are refused, naming them).
std::string read_text_file(const std::string& path, const std::string& field = "");

}  // namespace paraplan
