// paraplan's side of the PyTorch oracle (tests/oracle/oracle.py): prints, as
// one JSON line, what a framework profile predicts for one transformer layer's
// saved tensors and for the loss's forward peak at the shape given.
//   paraplan_oracle_probe FRAMEWORK STYLE H HEADS KV FFN S B TP VOCAB DTYPE FLASH [E K SHARED [LOAD]]
// STYLE: llama (RMSNorm, SwiGLU, no biases) | gpt (LayerNorm, GeLU, biases);
// no dropout; TP splits heads, kv heads, ffn and vocabulary by TP (no SP).
// With E K SHARED the layer is a mixture of experts: E routed experts of
// width FFN, top-K, SHARED shared experts, ep = 1 (every routed copy local,
// so the expert rows are exactly K per token whatever the routing); LOAD > 0
// is a capacity factor (DeepSpeed-MoE: every expert padded to its capacity,
// tokens beyond it dropped).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "costmodel/activations.hpp"
#include "costmodel/frameworks/profile.hpp"

using namespace paraplan;

int main(int argc, char** argv) {
  if (argc != 13 && argc != 16 && argc != 17) {
    std::cerr << "usage: paraplan_oracle_probe FRAMEWORK STYLE H HEADS KV FFN S B TP VOCAB DTYPE FLASH [E K SHARED [LOAD]]\n";
    return 2;
  }
  Framework f;
  if (!parse_framework(argv[1], &f)) {
    std::cerr << "unknown framework " << argv[1] << "\n";
    return 2;
  }
  const std::string style = argv[2];
  Model m;
  m.name = "oracle-" + style;
  m.num_layers = 1;
  m.hidden_size = std::atoi(argv[3]);
  m.num_attention_heads = std::atoi(argv[4]);
  m.num_kv_heads = std::atoi(argv[5]);
  m.head_dim = m.hidden_size / m.num_attention_heads;
  m.ffn_hidden_size = std::atoi(argv[6]);
  // llama-relu2: the Llama layer with Nemotron's plain squared-ReLU MLP (up, relu2, down).
  const bool relu2 = style == "llama-relu2", llama = style == "llama" || relu2;
  m.activation = relu2 ? Activation::kRelu2 : llama ? Activation::kSwiglu : Activation::kGelu;
  m.normalization = llama ? Normalization::kRmsNorm : Normalization::kLayerNorm;
  m.bias = !llama;
  const std::int64_t s = std::atoll(argv[7]), b = std::atoll(argv[8]);
  const int tp = std::atoi(argv[9]);
  const std::int64_t vocab = std::atoll(argv[10]);
  const int act = std::string(argv[11]) == "fp32" ? 4 : 2;
  const bool flash = std::string(argv[12]) == "1";
  LayerKind kind = LayerKind::kDense;
  const double load = argc == 17 ? std::atof(argv[16]) : 0;
  if (argc >= 16) {
    m.num_experts = std::atoi(argv[13]);
    m.experts_per_token = std::atoi(argv[14]);
    m.num_shared_experts = std::atoi(argv[15]);
    m.moe_ffn_hidden_size = m.ffn_hidden_size;
    kind = LayerKind::kMoe;
  }
  const Profile& p = profile(f);
  const ActShape a{s, b, tp, false, act, false, 1, load > 0 ? load : 1.0, 1, m.is_moe() ? m.num_experts : 1};
  nlohmann::json j;
  j["layer_saved_bytes"] = layer_activation_bytes(m, flash, Recompute::kNone, a, p.act, kind);
  // What the profile's selective recompute keeps (torchtitan's per-op policy under fsdp).
  j["layer_selective_bytes"] = layer_activation_bytes(m, flash, Recompute::kSelective, a, p.act, kind);
  // The loss the profile runs at this tp (torchtitan's loss-parallel cross-entropy at tp > 1).
  const LossVariant& loss = p.loss_for(tp);
  j["loss_peak_bytes"] = loss_forward_peak_bytes(loss, s * b, vocab / tp, act);
  // The same without the per-token row tensors: the logit-sized tensors only.
  j["loss_peak_logit_bytes"] = loss_forward_peak_bytes(loss, s * b, vocab / tp, act) - s * b * loss.row_bytes_per_token;
  // The loss's backward peak (logit-sized tensors: S, G, dX), 0 where not modelled.
  j["loss_backward_peak_logit_bytes"] = loss_backward_peak_bytes(loss, s * b, vocab / tp);
  nlohmann::json tensors = nlohmann::json::array();
  for (const SavedTensor& t : layer_saved_tensors(m, flash, p.act, kind))
    tensors.push_back({{"op", t.op}, {"tensor", t.tensor}, {"bytes", tensor_bytes(t, a)}});
  j["tensors"] = tensors;
  std::cout << j.dump() << "\n";
  return 0;
}
