// Where a layout comes from: the canonical string, Megatron-LM arguments, or a
// DeepSpeed JSON config (what a training repo's CI already has) — or several
// of them at once (Megatron-DeepSpeed), merged field by field.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "costmodel/spec.hpp"

namespace paraplan {

struct LayoutRequest {
  std::optional<std::string> layout;            // --layout
  std::optional<std::string> megatron_args;     // --megatron-args "…"
  std::optional<std::string> deepspeed_config;  // --deepspeed-config ds.json
  // When set, receives the Megatron flags paraplan does not read (the model
  // it predicts does not depend on them), for -v.
  std::vector<std::string>* ignored_flags = nullptr;
  // When set, receives the values a launch configuration's framework defaults where the configuration is
  // silent and the model said otherwise (Megatron's dropout 0.1), for the report's defaults line.
  std::vector<std::string>* framework_defaults = nullptr;
};

// Builds the layout, lets the sources override the spec's training settings
// they carry (global batch, sequence length, precision), and resolves it
// against the spec. Throws SpecError naming the source and the field.
Layout layout_from_sources(Spec* spec, const std::string& spec_file, const LayoutRequest& req);

// Megatron-LM's --moe-layer-freq for the model's MoE layers: "1" when every layer is MoE, else the run-length
// list expression Megatron evaluates, e.g. "([0]*3+[1]*58)" (arguments.py:327-345).
std::string megatron_moe_layer_freq(const Model& m);

}  // namespace paraplan
