// Shared fixtures for the unit tests: paths into the repo and small specs.
#pragma once

#include <string>

#include "costmodel/spec.hpp"
#include "planner/spec_loader.hpp"

namespace paraplan::test {

inline std::string repo(const std::string& rel) { return std::string(PARAPLAN_SOURCE_DIR) + "/" + rel; }
inline Model model(const std::string& name) { return load_model_file(repo("configs/models/" + name + ".yaml")); }
inline Cluster cluster(const std::string& name) { return load_cluster_file(repo("configs/clusters/" + name + ".yaml")); }

// A GPT-style model as Korthikanti et al. count it: MHA, GeLU with ffn = 4h,
// LayerNorm, dropout on (1-byte masks saved), no flash attention.
inline Model gpt_style(int layers, int h, int heads, int vocab) {
  Model m;
  m.name = "gpt-style";
  m.num_layers = layers;
  m.hidden_size = h;
  m.num_attention_heads = heads;
  m.num_kv_heads = heads;
  m.head_dim = h / heads;
  m.ffn_hidden_size = 4 * h;
  m.vocab_size = vocab;
  m.activation = Activation::kGelu;
  m.normalization = Normalization::kLayerNorm;
  m.tie_embeddings = true;
  m.bias = true;
  m.position_embedding = PositionEmbedding::kLearned;
  m.max_position_embeddings = 2048;
  m.hidden_dropout = 0.1;
  m.attention_dropout = 0.1;
  return m;
}

// A spec on the synthetic CPU host with no runtime or fragmentation terms,
// predicted with the `paraplan` profile (the idealised stack the hand
// calculations in these tests describe; tests of other stacks set theirs).
inline Spec spec_for(const Model& m, int gpus, int seq, int gbs) {
  Spec s;
  s.model = m;
  s.cluster = cluster("cpu-host");
  s.cluster.gpus_per_node = gpus;
  s.num_nodes = 1;
  s.training.seq_length = seq;
  s.training.global_batch_size = gbs;
  s.training.precision = DType::kBf16;
  s.training.grad_dtype = DType::kBf16;
  s.training.optimizer_state_bytes = 12;
  s.training.flash_attention = false;
  s.training.framework = Framework::kParaplan;
  return s;
}

}  // namespace paraplan::test
