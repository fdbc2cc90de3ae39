// The shipped models and clusters, built into the binary from configs/ at
// build time (cmake/embed_catalog.cmake), so that `--model llama-3.1-70b`,
// `--gpu h100` and `model: llama-3.1-70b` in a spec work from any directory.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "costmodel/spec.hpp"

namespace paraplan {

// One configs/ file as text: its name (the file name without .yaml), its
// path in the source tree, and its contents.
struct EmbeddedFile {
  const char* name;
  const char* path;
  const char* text;
};

namespace catalog_data {
extern const EmbeddedFile k_models[];
extern const std::size_t k_num_models;
extern const EmbeddedFile k_clusters[];
extern const std::size_t k_num_clusters;
}  // namespace catalog_data

std::span<const EmbeddedFile> builtin_model_files();
std::span<const EmbeddedFile> builtin_cluster_files();

// The label a built-in file carries in errors and reports: "built-in configs/models/x.yaml".
std::string builtin_label(const EmbeddedFile& f);

// A built-in model by its file name or its `name:` (case-insensitive):
// "llama-3.1-70b", "Llama-3.1-70B", "mistral-7b" and "Mistral-7B-v0.1" all work. nullptr if none.
const EmbeddedFile* find_builtin_model(const std::string& name);
// A built-in cluster by its file name, its `name:`, its GPU's `gpu.name`, or
// that GPU name's first word ("h100", "a100", "h200", "cpu"); case-insensitive. nullptr if none.
const EmbeddedFile* find_builtin_cluster(const std::string& name);

// The short GPU name `--gpu` takes for a cluster: the first word of gpu.name, lower case ("h100").
std::string gpu_short_name(const Cluster& c);

// Parsed entries (cached after the first call).
struct CatalogModel {
  const EmbeddedFile* file;
  Model model;
};
struct CatalogCluster {
  const EmbeddedFile* file;
  Cluster cluster;
};
const std::vector<CatalogModel>& builtin_models();
const std::vector<CatalogCluster>& builtin_clusters();

// "llama-2-7b, llama-2-13b, ..." for error messages.
std::string builtin_model_names();
std::string builtin_gpu_names();

// A model from a path (paraplan YAML or HuggingFace config.json) when that
// file exists, else a built-in model of that name; else a SpecError naming
// `field` and listing the built-in names.
Model resolve_model(const std::string& name_or_path, const std::string& field);
// Throws SpecError naming `field` when the model is read and counted but cannot be planned (a Mamba-2 hybrid):
// every path that predicts memory or time calls it; `paraplan models --model` does not.
void refuse_unplanned(const Model& m, const std::string& field);
// The same for a cluster; names may be any `find_builtin_cluster` accepts.
Cluster resolve_cluster(const std::string& name_or_path, const std::string& field);

}  // namespace paraplan

namespace paraplan {
enum class Format;
// `paraplan models` / `paraplan gpus`: the catalogs as a table, JSON, CSV or Markdown.
std::string render_models(Format f);
// `paraplan models --model NAME|FILE`: one model's shape and parameter counts
// (total, active per token, multi-token-prediction modules apart), MoE and MLA included.
std::string render_model(const Model& m, Format f);
std::string render_gpus(Format f);
}  // namespace paraplan
