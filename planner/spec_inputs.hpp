// What explain, check and plan are asked about: a spec file, or a model and a
// GPU by name (`--model llama-3.1-70b --gpus 64 --gpu h100`) with the training
// defaults filled in and reported, or a spec with those flags overriding it.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "costmodel/spec.hpp"

namespace paraplan {

struct SpecInputs {
  std::string spec;                  // SPEC (a YAML file); "" = none, then --model, --gpus and --gpu are needed
  std::string model, gpu;            // --model NAME|FILE, --gpu NAME|FILE ("" = not given)
  std::optional<int> gpus;           // --gpus N: the whole job
  std::optional<int> gpus_per_node;  // --gpus-per-node G (overrides the cluster's)
  std::optional<int> nodes;          // --nodes N (overrides num_nodes)
  std::optional<int> seq, gbs;       // --seq-length, --global-batch-size
};

// Defaults paraplan chose because neither a spec nor a flag said.
inline constexpr int kDefaultSeqLength = 4096;
inline constexpr double kDefaultBatchTokens = 4194304;  // 4 Mi tokens per step (see default_global_batch)

// The default global batch: about 4 Mi tokens (Llama 2's 4M-token batch,
// Touvron et al. 2023 §2.2; Llama 3 405B starts at 4M, Dubey et al. 2024 §3.4.1),
// i.e. 4 Mi / seq sequences, rounded up to a multiple of the GPU count so that
// every data-parallel degree the GPU count allows divides it.
int default_global_batch(int seq_length, int num_gpus);
// The default sequence length: 4096, or the model's learned-position limit when shorter.
int default_seq_length(const Model& m);

struct ResolvedSpec {
  Spec spec;
  // {"seq_length": 4096, ...}: the values paraplan chose (empty when a spec or flag gave all).
  nlohmann::json defaults = nlohmann::json::object();
};

// Builds the spec; bad or missing inputs are SpecErrors naming the flag.
ResolvedSpec resolve_spec(const SpecInputs& in);

// "defaults used: seq_length 4096, global_batch_size 1024 (4.2M tokens), ..." ("" when none).
std::string defaults_text(const nlohmann::json& defaults);

}  // namespace paraplan
