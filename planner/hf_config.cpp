// HuggingFace config.json -> Model. HF configs carry many keys paraplan does
// not need, so unknown keys are ignored here (unlike paraplan's own YAML).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

#include "planner/spec_loader.hpp"

namespace paraplan {

namespace {

using nlohmann::json;

struct HfReader {
  const json& j;
  const std::string& file;
  std::string prefix;  // "text_config." when the language model sits in a multimodal wrapper

  const json* find(std::initializer_list<const char*> keys) const {
    for (const char* k : keys) {
      auto it = j.find(k);
      if (it != j.end() && !it->is_null()) return &*it;
    }
    return nullptr;
  }
  [[noreturn]] void fail(const char* key, const std::string& msg) const {
    throw SpecError(file, 0, prefix + key, msg);
  }
  int get_int(std::initializer_list<const char*> keys, int def, bool required,
              long long max = 2'000'000'000) const {
    const json* v = find(keys);
    const char* name = *keys.begin();
    if (!v) {
      if (required) fail(name, "missing required key in HuggingFace config");
      return def;
    }
    if (!v->is_number_integer() || v->get<long long>() < 1 || v->get<long long>() > max)
      fail(name, "expected a positive integer up to " + std::to_string(max) + ", got " + v->dump());
    return v->get<int>();
  }
  double get_number(std::initializer_list<const char*> keys, double def) const {
    const json* v = find(keys);
    if (!v) return def;
    if (!v->is_number() || v->get<double>() < 0 || v->get<double>() >= 1)
      fail(*keys.begin(), "expected a number in [0, 1), got " + v->dump());
    return v->get<double>();
  }
  bool get_bool(const char* key, bool def) const {
    const json* v = find({key});
    if (!v) return def;
    if (!v->is_boolean()) fail(key, "expected true or false, got " + v->dump());
    return v->get<bool>();
  }
  std::string get_string(const char* key, const std::string& def) const {
    const json* v = find({key});
    if (!v) return def;
    if (!v->is_string()) fail(key, "expected a string, got " + v->dump());
    return v->get<std::string>();
  }
};

// tie_word_embeddings where a config leaves it out: the default of the model type's config class
// (huggingface/transformers@008e5743 src/transformers/models/<type>/configuration_<type>.py, the
// class field `tie_word_embeddings: bool = ...`); GPT-2's class keeps PreTrainedConfig's True. A type
// not read here is refused rather than guessed (issue 46: Mistral and Llama read as tied lost their
// output layer).
bool tie_default(const HfReader& r, const std::string& type) {
  struct Default {
    const char* type;
    bool tied;
  };
  static constexpr Default kDefaults[] = {
      {"llama", false},       {"mistral", false}, {"mixtral", false},    {"qwen2", false},   {"qwen3", false},
      {"qwen3_moe", false},   {"deepseek_v3", false}, {"gemma", true},   {"gemma2", true},   {"gpt2", true},
      {"nemotron_h", false},  // transformers@cfeb552e models/nemotron_h/configuration_nemotron_h.py: tie_word_embeddings=False
  };
  std::string known;
  for (const Default& d : kDefaults) {
    if (type == d.type) return d.tied;
    known += std::string(known.empty() ? "" : ", ") + d.type;
  }
  r.fail("tie_word_embeddings", "missing, and the default of model_type '" + type +
                                    "' is not one paraplan has read from transformers (it has: " + known +
                                    "); give tie_word_embeddings true or false");
}

}  // namespace

Model model_from_hf_json(const std::string& text, const std::string& file) {
  const json root = parse_json_input(text, file, "");
  if (!root.is_object()) throw SpecError(file, 0, "", "expected a JSON object (HuggingFace config.json)");
  // A multimodal wrapper (Gemma-3, Llama-4, Mistral-Small-3.1: *ForConditionalGeneration) keeps its
  // language model in text_config (transformers' composite configs, e.g. Mistral3Config's sub_configs):
  // that model is planned; the vision tower and projector are not (said as a caveat).
  const auto tc = root.find("text_config");
  const bool wrapped = tc != root.end() && tc->is_object() && !root.contains("num_hidden_layers");
  const json& j = wrapped ? *tc : root;
  const HfReader r{j, file, wrapped ? "text_config." : ""};
  const std::string type = r.get_string("model_type", "");
  // Mixtures of experts and multi-latent attention are read for Mixtral,
  // DeepSeek-V2/V3 and Qwen2/3-MoE (counted and planned, issue 16); any other config that
  // says it has experts or MLA is refused here, so that e.g. a Qwen-MoE is
  // never read as a dense model.
  // Families people train today that paraplan does not read yet: refused naming what is missing (issue 46).
  struct Family {
    const char* type;
    const char* missing;
  };
  static constexpr Family kNotYet[] = {
      {"gpt_oss", "GPT-OSS's learned attention sinks, its alternating sliding-window layers (layer_types), and its "
                  "clamped SwiGLU experts with biases are not modelled"},
      {"glm4_moe", "GLM-4.5's partial rotary queries and keys with qk-norm, its attention biases and its MoE layers from "
                   "first_k_dense_replace with a sigmoid router and MTP layers are not read yet"},
      {"llama4", "Llama-4's interleaved MoE layers (interleave_moe_layer_step), chunked attention (attention_chunk_size) "
                 "and no-RoPE layers are not read yet"},
      {"llama4_text", "Llama-4's interleaved MoE layers (interleave_moe_layer_step), chunked attention "
                      "(attention_chunk_size) and no-RoPE layers are not read yet"},
      {"kimi_k2", "Kimi-K2 is DeepSeek-V3's architecture (DeepseekV3ForCausalLM) with 384 experts; it is not read under its "
                  "own model_type until its count is checked against the checkpoint: give model_type deepseek_v3 to read it "
                  "as DeepSeek-V3"},
      {"jamba", "Jamba's Mamba (v1) layers and its MoE every expert_layer_period are not modelled"},
  };
  for (const Family& f : kNotYet)
    if (type == f.type) r.fail("model_type", "'" + type + "' is not read: " + f.missing);
  const bool mixtral = type == "mixtral";
  const bool deepseek = type == "deepseek_v2" || type == "deepseek_v3";
  const bool qwen_moe = type == "qwen2_moe" || type == "qwen3_moe";
  if (!mixtral && !deepseek && !qwen_moe) {
    for (const char* k : {"num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size",
                          "num_experts_per_tok", "shared_expert_intermediate_size", "n_shared_experts",
                          "moe_layer_freq", "decoder_sparse_step", "first_k_dense_replace"})
      if (j.contains(k) && !j[k].is_null())
        r.fail(k, "mixture-of-experts models ('" + type + "', " + k + " " + j[k].dump() +
                      ") are read for mixtral, deepseek_v2, deepseek_v3, qwen2_moe and qwen3_moe only; expected one of them or a "
                      "dense decoder");
    for (const char* k : {"q_lora_rank", "kv_lora_rank"})
      if (j.contains(k) && !j[k].is_null())
        r.fail(k, "multi-latent attention ('" + type + "', " + k + " " + j[k].dump() +
                      ") is read for deepseek_v2 and deepseek_v3 only");
    if (type.find("moe") != std::string::npos || type.rfind("deepseek", 0) == 0)
      r.fail("model_type", "mixture-of-experts models ('" + type +
                               "') are read for mixtral, deepseek_v2, deepseek_v3, qwen2_moe and qwen3_moe only; expected "
                               "one of them or a dense decoder");
  }
  const bool gpt2 = type == "gpt2";
  // Mamba-2 hybrids: NemotronH (transformers models/nemotron_h/configuration_nemotron_h.py at cfeb552e, and the
  // remote-code configs of nvidia/Nemotron-H-*: hybrid_override_pattern with '-' for an MLP block).
  const bool nemotron_h = type == "nemotron_h";
  if (!nemotron_h)
    for (const char* k : {"hybrid_override_pattern", "layers_block_type", "mamba_num_heads", "ssm_state_size", "mamba_d_state",
                          "attn_layer_period", "mamba_expand"})
      if (j.contains(k) && !j[k].is_null())
        r.fail(k, "Mamba / state-space hybrid layers ('" + type + "', " + k +
                      ") are read for nemotron_h only (its Mamba-2 mixer); expected model_type nemotron_h or a transformer");
  Model m;
  m.name = r.get_string("_name_or_path", "");
  if (m.name.empty()) {
    // Name it after the folder holding config.json (e.g. Llama-2-7b-hf).
    const std::filesystem::path p(file);
    m.name = p.has_parent_path() ? p.parent_path().filename().string() : type;
  }
  if (m.name.empty()) m.name = "hf-model";
  m.source = "HuggingFace config.json: " + file;
  if (nemotron_h) {
    // The layer pattern: hybrid_override_pattern (M, *, -, E) or layers_block_type (mamba, attention, moe);
    // num_hidden_layers is its length (configuration_nemotron_h.py num_hidden_layers property).
    if (const json* p = r.find({"hybrid_override_pattern"}); p && p->is_string()) {
      m.hybrid_pattern = p->get<std::string>();
    } else if (const json* l = r.find({"layers_block_type"}); l && l->is_array()) {
      for (const json& e : *l) {
        const std::string t = e.is_string() ? e.get<std::string>() : "";
        if (t == "mamba") m.hybrid_pattern += 'M';
        else if (t == "attention") m.hybrid_pattern += '*';
        else if (t == "mlp") m.hybrid_pattern += '-';
        else if (t == "moe") m.hybrid_pattern += 'E';
        else r.fail("layers_block_type", "expected mamba, attention, mlp or moe, got " + e.dump());
      }
    } else {
      r.fail("hybrid_override_pattern", "missing: a nemotron_h config names its layers (or layers_block_type)");
    }
    if (m.hybrid_pattern.empty() || m.hybrid_pattern.size() > std::size_t(kMaxLayers) ||
        m.hybrid_pattern.find_first_not_of("M*-E") != std::string::npos)
      r.fail("hybrid_override_pattern", "expected 1 to " + std::to_string(kMaxLayers) + " of M (Mamba-2), * (attention), "
                                        "- (MLP), E (experts), got \"" + SpecError::printable(m.hybrid_pattern, 80) + "\"");
    if (m.hybrid_pattern.find('E') != std::string::npos)
      r.fail("hybrid_override_pattern", "E (mixture-of-experts blocks, Nemotron-3) is not read yet; expected M, * and -");
    if (const json* n = r.find({"num_hidden_layers"}); n && n->is_number_integer() && n->get<long long>() != long(m.hybrid_pattern.size()))
      r.fail("num_hidden_layers", "is " + n->dump() + " but hybrid_override_pattern has " +
                                      std::to_string(m.hybrid_pattern.size()) + " layers");
    m.mamba_heads = r.get_int({"mamba_num_heads"}, 128, false, kMaxWidth);
    m.mamba_head_dim = r.get_int({"mamba_head_dim"}, 64, false, kMaxWidth);
    m.mamba_state = r.get_int({"ssm_state_size", "mamba_d_state"}, 128, false, kMaxWidth);
    m.mamba_groups = r.get_int({"n_groups", "mamba_n_groups"}, 8, false, kMaxHeads);
    m.mamba_conv_kernel = r.get_int({"conv_kernel", "mamba_d_conv"}, 4, false, 64);
    m.mamba_conv_bias = r.get_bool(j.contains("use_conv_bias") ? "use_conv_bias" : "mamba_conv_bias", true);
    m.mamba_proj_bias = r.get_bool(j.contains("mamba_proj_bias") ? "mamba_proj_bias" : "use_bias", false);
    if (std::int64_t(m.mamba_heads) * m.mamba_head_dim > kMaxWidth)
      r.fail("mamba_num_heads", "mamba_num_heads x mamba_head_dim is " +
                                    std::to_string(std::int64_t(m.mamba_heads) * m.mamba_head_dim) + "; expected at most " +
                                    std::to_string(kMaxWidth));
    if (std::int64_t(m.mamba_groups) * m.mamba_state > kMaxWidth)
      r.fail("ssm_state_size", "n_groups x ssm_state_size is too large; expected at most " + std::to_string(kMaxWidth));
    if (m.mamba_heads % m.mamba_groups)
      r.fail("n_groups", "expected a divisor of mamba_num_heads " + std::to_string(m.mamba_heads));
  }
  m.num_layers = nemotron_h ? int(m.hybrid_pattern.size()) : r.get_int({"num_hidden_layers", "n_layer"}, 0, true, kMaxLayers);
  m.hidden_size = r.get_int({"hidden_size", "n_embd"}, 0, true, kMaxWidth);
  m.num_attention_heads = r.get_int({"num_attention_heads", "n_head"}, 0, true, kMaxHeads);
  m.num_kv_heads = r.get_int({"num_key_value_heads"}, m.num_attention_heads, false, kMaxHeads);
  if (m.num_attention_heads % m.num_kv_heads)
    r.fail("num_key_value_heads", "expected a divisor of num_attention_heads " +
                                      std::to_string(m.num_attention_heads));
  const char* head_dim_key = nemotron_h && j.contains("attention_head_dim") ? "attention_head_dim" : "head_dim";
  if (!j.contains(head_dim_key) && m.hidden_size % m.num_attention_heads)
    r.fail("hidden_size", "expected a multiple of num_attention_heads " +
                              std::to_string(m.num_attention_heads));
  m.head_dim = r.get_int({head_dim_key}, m.hidden_size / m.num_attention_heads, false,
                         kMaxWidth / m.num_attention_heads);
  m.ffn_hidden_size =
      r.get_int({"intermediate_size", "n_inner"}, 4 * m.hidden_size, !gpt2, kMaxWidth);
  m.vocab_size = r.get_int({"vocab_size"}, 0, true, kMaxVocab);

  const std::string act = r.get_string(j.contains("activation_function") ? "activation_function"
                                       : nemotron_h && j.contains("mlp_hidden_act") ? "mlp_hidden_act"
                                                                                    : "hidden_act",
                                       gpt2 ? "gelu_new" : "silu");
  // Gemma's MLP is gated whatever its activation: gelu_pytorch_tanh(gate) * up
  // (transformers models/gemma2/modeling_gemma2.py Gemma2MLP).
  const bool gemma = type == "gemma" || type == "gemma2" || type == "gemma3" || type == "gemma3_text";
  // Nemotron: squared ReLU in a plain MLP, down_proj(act_fn(up_proj(x))) (transformers@694aaa7f
  // models/nemotron/modeling_nemotron.py NemotronMLP); relu2 elsewhere may be gated, so it is read for
  // nemotron only.
  const bool nemotron = type == "nemotron" || nemotron_h;
  if (act == "silu" || act == "swish") m.activation = Activation::kSwiglu;  // gated SiLU MLP
  else if (act.rfind("gelu", 0) == 0) m.activation = gemma ? Activation::kGeglu : Activation::kGelu;
  else if (act == "relu2" && nemotron) m.activation = Activation::kRelu2;
  else if (act == "relu2")
    r.fail("hidden_act", "relu2 (squared ReLU) is read for model_type nemotron, whose MLP is not gated; got model_type \"" +
                             type + "\", whose MLP may be");
  else r.fail("hidden_act", "expected silu, gelu* or relu2, got \"" + act + "\"");
  // Gemma-2 and 3 normalise after attention and after the MLP as well
  // (post_attention_layernorm, pre_ and post_feedforward_layernorm).
  m.post_norms = type == "gemma2" || type == "gemma3" || type == "gemma3_text";
  // Keys that change the computation but not the parameters: read, and said.
  if (const json* v = r.find({"attn_logit_softcapping"}); v && v->is_number())
    m.caveats.push_back(fmt::format("attn_logit_softcapping {}: tanh soft-capping of attention scores is not modelled "
                                    "(memory and time as plain attention; flash kernels support it)", v->dump()));
  if (const json* v = r.find({"final_logit_softcapping"}); v && v->is_number())
    m.caveats.push_back(fmt::format("final_logit_softcapping {}: the tanh on the logits keeps one more logits-sized "
                                    "tensor for backward, not counted", v->dump()));
  if (const json* v = r.find({"partial_rotary_factor"}); v && v->is_number() && v->get<double>() != 1.0)
    m.caveats.push_back(fmt::format("partial_rotary_factor {}: rotary embedding on that share of each head, costed on "
                                    "the whole head (a memory-bound pass; no tensor kept for backward either way)",
                                    v->dump()));
  if (const json* v = r.find({"sliding_window"}); v && v->is_number())
    m.caveats.push_back(fmt::format("sliding_window {}: attention is costed over the whole sequence (flash attention's "
                                    "memory does not depend on the window; its time would fall with it)", v->dump()));

  // NemotronH normalises with RMSNorm whatever its epsilon key (modeling_nemotron_h.py NemotronHRMSNorm).
  if (j.contains("rms_norm_eps") || nemotron_h) m.normalization = Normalization::kRmsNorm;
  // Nemotron's norm_eps is its LayerNorm1P's: a LayerNorm with weight and bias, applied with weight + 1
  // (modeling_nemotron.py NemotronLayerNorm1P).
  else if (j.contains("layer_norm_epsilon") || j.contains("layer_norm_eps") || gpt2 || (nemotron && j.contains("norm_eps")))
    m.normalization = Normalization::kLayerNorm;
  else r.fail("rms_norm_eps", "cannot tell the normalization (no rms_norm_eps or layer_norm_eps)");

  m.tie_embeddings = r.find({"tie_word_embeddings"}) ? r.get_bool("tie_word_embeddings", false) : tie_default(r, type);
  if (wrapped) {
    const auto vc = root.find("vision_config");
    m.caveats.push_back(fmt::format(
        "multimodal config ('{}'): the language model in text_config is planned; the vision tower{} and the "
        "projector are neither counted nor planned",
        root.value("model_type", std::string("?")),
        vc != root.end() && vc->is_object() ? " (vision_config, '" + vc->value("model_type", std::string("?")) + "')" : ""));
  }
  if (gpt2) {
    m.position_embedding = PositionEmbedding::kLearned;
    m.max_position_embeddings = r.get_int({"n_positions", "max_position_embeddings"}, 1024, false);
    m.bias = true;
    m.hidden_dropout = r.get_number({"resid_pdrop"}, 0.1);
    m.attention_dropout = r.get_number({"attn_pdrop"}, 0.1);
  } else {
    m.position_embedding = PositionEmbedding::kRope;
    m.max_position_embeddings = r.get_int({"max_position_embeddings"}, 0, false);
    const bool attn_bias = r.get_bool("attention_bias", false);
    const bool mlp_bias = r.get_bool("mlp_bias", false);
    m.bias = attn_bias && mlp_bias;
    m.qkv_bias = attn_bias || type == "qwen2" || type == "qwen2_moe";  // Qwen2 (and its MoE) always has QKV biases
    m.qk_norm = type == "qwen3" || type == "qwen3_moe";                 // Qwen3Attention q_norm, k_norm
    m.hidden_dropout = r.get_number({"hidden_dropout", "resid_pdrop"}, 0.0);
    m.attention_dropout = r.get_number({"attention_dropout", "attn_pdrop"}, 0.0);
  }
  if (mixtral) {
    // transformers models/mixtral/configuration_mixtral.py: every layer is sparse; intermediate_size is each expert's width.
    m.num_experts = r.get_int({"num_local_experts"}, 8, true, 1 << 16);
    m.experts_per_token = r.get_int({"num_experts_per_tok"}, 2, true, m.num_experts);
    m.moe_ffn_hidden_size = m.ffn_hidden_size;
  }
  if (deepseek) {
    // transformers models/deepseek_v3/configuration_deepseek_v3.py (and V2's).
    m.num_experts = r.get_int({"n_routed_experts"}, 0, true, 1 << 16);
    m.experts_per_token = r.get_int({"num_experts_per_tok"}, 0, true, m.num_experts);
    m.moe_ffn_hidden_size = r.get_int({"moe_intermediate_size"}, 0, true, kMaxWidth);
    if (r.find({"n_shared_experts"})) m.num_shared_experts = r.get_int({"n_shared_experts"}, 0, false, 1 << 16);
    // 0 is valid here (every layer sparse): get_int takes only positive values.
    if (const json* v = r.find({"first_k_dense_replace"}); v && !(v->is_number_integer() && v->get<long long>() == 0))
      m.first_dense_layers = r.get_int({"first_k_dense_replace"}, 0, false, m.num_layers);
    m.moe_layer_freq = r.get_int({"moe_layer_freq"}, 1, false, m.num_layers);
    // V3's noaux_tc routing adds e_score_correction_bias (one per routed expert).
    m.router_bias = r.get_string("topk_method", type == "deepseek_v3" ? "noaux_tc" : "greedy") == "noaux_tc";
    if (r.find({"q_lora_rank"})) m.q_lora_rank = r.get_int({"q_lora_rank"}, 0, false, kMaxWidth);  // null: V2-Lite
    m.kv_lora_rank = r.get_int({"kv_lora_rank"}, 0, true, kMaxWidth);
    m.qk_nope_head_dim = r.get_int({"qk_nope_head_dim"}, 0, true, kMaxWidth);
    m.qk_rope_head_dim = r.get_int({"qk_rope_head_dim"}, 0, true, kMaxWidth);
    m.v_head_dim = r.get_int({"v_head_dim"}, 0, true, kMaxWidth);
    if (const json* v = r.find({"num_nextn_predict_layers"}); v && !(v->is_number_integer() && v->get<long long>() == 0))
      m.mtp_layers = r.get_int({"num_nextn_predict_layers"}, 0, false, 64);
  }
  if (qwen_moe) {
    // transformers models/qwen2_moe/configuration_qwen2_moe.py, qwen3_moe/configuration_qwen3_moe.py:
    // layer i is sparse unless listed in mlp_only_layers and when (i + 1) % decoder_sparse_step == 0.
    m.num_experts = r.get_int({"num_experts"}, 0, true, 1 << 16);
    m.experts_per_token = r.get_int({"num_experts_per_tok"}, 0, true, m.num_experts);
    m.moe_ffn_hidden_size = r.get_int({"moe_intermediate_size"}, 0, true, kMaxWidth);
    if (const json* v = r.find({"decoder_sparse_step"}); v && !(v->is_number_integer() && v->get<long long>() == 1))
      r.fail("decoder_sparse_step", "only 1 (every layer sparse) is modelled, got " + v->dump());
    if (const json* v = r.find({"mlp_only_layers"}); v && !v->is_null()) {
      // A dense prefix [0, 1, .., k-1] is first_dense_layers; other dense layers are not modelled.
      if (!v->is_array()) r.fail("mlp_only_layers", "expected a list of layer indices");
      for (size_t i = 0; i < v->size(); ++i)
        if (!(*v)[i].is_number_integer() || (*v)[i].get<long long>() != (long long)i)
          r.fail("mlp_only_layers", "only a dense prefix [0, 1, ..] is modelled, got " + v->dump());
      m.first_dense_layers = int(std::min<size_t>(v->size(), size_t(m.num_layers)));
    }
    if (const json* v = r.find({"shared_expert_intermediate_size"}); v && !v->is_null() && !(v->is_number_integer() && v->get<long long>() == 0)) {
      const int shared = r.get_int({"shared_expert_intermediate_size"}, 0, false, kMaxWidth);
      // One shared expert of that width = shared / moe experts of the routed width (the same weights and FLOPs).
      if (shared % m.moe_ffn_hidden_size)
        r.fail("shared_expert_intermediate_size", "expected a multiple of moe_intermediate_size " +
                                                      std::to_string(m.moe_ffn_hidden_size) + ", got " + std::to_string(shared));
      m.num_shared_experts = shared / m.moe_ffn_hidden_size;
      m.shared_expert_gate = true;
    }
  }
  if (approx_params(m) > kMaxParams)
    r.fail("num_hidden_layers", fmt::format("the model has {:.3g} parameters; expected at most {:.3g}", approx_params(m), kMaxParams));
  return m;
}

}  // namespace paraplan
