// `--emit megatron|deepspeed|torchtitan|nanotron`: a layout as the launch
// settings of a training framework, so that the plan can be run as planned.
// Megatron-LM flags and DeepSpeed JSON read back through --megatron-args and
// --deepspeed-config to the same layout (tests/test_emit.cpp).
#pragma once

#include <string>
#include <vector>

#include "costmodel/spec.hpp"

namespace paraplan {

enum class EmitTarget { kMegatron, kDeepSpeed, kTorchtitan, kNanotron };
inline constexpr const char* kEmitChoices = "megatron, deepspeed, torchtitan or nanotron";
bool parse_emit_target(const std::string& name, EmitTarget* out);
// The framework profile whose memory accounting matches what is emitted
// (torchtitan runs FSDP2: the fsdp profile).
Framework emit_framework(EmitTarget t);

// Why the framework cannot run `l` as paraplan models it ("" = it can).
std::string emit_unsupported(EmitTarget t, const Spec& s, const Layout& l);

struct Emitted {
  std::string text;                // stdout: only what the framework reads
  std::vector<std::string> notes;  // stderr: what it does not read from there (e.g. the GPU count)
};
// `l` must be resolved (dp set). Throws SpecError naming --emit when emit_unsupported says why.
Emitted emit_launch(EmitTarget t, const Spec& s, const Layout& l);

}  // namespace paraplan
