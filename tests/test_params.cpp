// Parameter counts of the shipped models against their published counts.
#include <catch2/catch.hpp>

#include "costmodel/activations.hpp"
#include "costmodel/model.hpp"
#include "planner/catalog.hpp"
#include "planner/spec_error.hpp"
#include "planner/spec_loader.hpp"
#include "planner/yaml_reader.hpp"
#include "test_helpers.hpp"

using namespace paraplan;

TEST_CASE("shipped models match their published parameter counts within 0.5%", "[params]") {
  struct Case {
    const char* file;
    double published;
    const char* source;
  };
  const Case cases[] = {
      {"llama-2-7b", 6'738'415'616, "FACTS.md (HF weights, less rotary inv_freq buffers)"},
      {"llama-2-13b", 13'015'864'320, "FACTS.md"},
      {"llama-2-70b", 68'976'648'192, "FACTS.md"},
      {"llama-3.1-8b", 8'030'261'248, "FACTS.md / HF model card"},
      {"llama-3.1-70b", 70'553'706'496, "FACTS.md / HF model card"},
      {"llama-3.1-405b", 405'853'388'800, "FACTS.md / HF model card"},
      {"gpt3-175b", 175.0e9, "GPT-3 paper, Table 2.1"},
      {"mistral-7b", 7'241'732'096, "FACTS.md"},
      {"qwen2.5-7b", 7'615'616'512, "FACTS.md"},
      {"qwen2.5-72b", 72'706'203'648, "FACTS.md"},
      {"nemotron-4-340b", 341.0e9, "Nemotron-4 340B report: 331.6B non-embedding + 9.4B embedding"},
  };
  for (const Case& c : cases) {
    INFO(c.file << " vs " << c.source);
    const double n = double(total_params(test::model(c.file)));
    CHECK(std::abs(n - c.published) / c.published < 0.005);
  }
}

TEST_CASE("parameter counts worked out by hand", "[params]") {
  // Llama-2-7B: per layer 4·4096² (attention) + 3·4096·11008 (SwiGLU MLP) + 2·4096 (RMSNorms)
  // = 67,108,864 + 135,266,304 + 8,192 = 202,383,360; ×32 = 6,476,267,520;
  // + untied embedding and output 2·32000·4096 = 262,144,000; + final norm 4096.
  CHECK(total_params(test::model("llama-2-7b")) == 6'476'267'520 + 262'144'000 + 4'096);
  // GPT-3 175B: per layer 12h² + 13h (biases, 2 LayerNorms with bias), h = 12288:
  // 1,812,099,072 × 96 = 173,961,510,912; tied embedding 50257·h = 617,558,016;
  // positions 2048·h = 25,165,824; final LayerNorm 2h = 24,576 → 174,604,259,328.
  CHECK(total_params(test::model("gpt3-175b")) == 174'604'259'328);
  // Llama-3.1-70B, GQA: attention 2·8192² + 2·8192·1024 = 150,994,944; MLP 3·8192·28672
  // = 704,643,072; norms 16,384 → 855,654,400 per layer; ×80 = 68,452,352,000;
  // + 2·128256·8192 = 2,101,346,304 + 8192 = 70,553,706,496.
  CHECK(total_params(test::model("llama-3.1-70b")) == 70'553'706'496);
}

TEST_CASE("HuggingFace config.json gives the same model as the YAML", "[params][hf]") {
  struct Case {
    const char* hf;
    const char* yaml;
  };
  for (const Case c : {Case{"llama-2-7b-hf", "llama-2-7b"}, Case{"llama-3.1-70b", "llama-3.1-70b"},
                       Case{"qwen2.5-7b", "qwen2.5-7b"}, Case{"mistral-7b-v0.1", "mistral-7b"}}) {
    INFO(c.hf);
    const Model hf = load_model_file(test::repo(std::string("tests/data/hf/") + c.hf + "/config.json"));
    const Model y = test::model(c.yaml);
    CHECK(hf.num_layers == y.num_layers);
    CHECK(hf.num_kv_heads == y.num_kv_heads);
    CHECK(hf.activation == y.activation);
    CHECK(hf.normalization == y.normalization);
    CHECK(hf.tie_embeddings == y.tie_embeddings);
    CHECK(hf.has_qkv_bias() == y.has_qkv_bias());
    CHECK(total_params(hf) == total_params(y));
  }
  // GPT-2 small: 124,439,808 weights (12 layers, 768 wide, vocab 50257, 1024 positions, tied).
  const Model g = load_model_file(test::repo("tests/data/hf/gpt2/config.json"));
  CHECK(g.ffn_hidden_size == 3072);
  CHECK(g.position_embedding == PositionEmbedding::kLearned);
  CHECK(total_params(g) == 124'439'808);
}

TEST_CASE("Gemma-2: GeGLU MLP and four norms per layer - soft-capping and the window are said, not hidden (issue 14)",
          "[params][hf]") {
  // 2B: per layer q 2304·2048 + k, v 2·2304·1024 + o 2048·2304 = 14,155,776;
  // GeGLU gate, up, down 3·2304·9216 = 63,700,992; 4 RMSNorms 4·2304 = 9,216:
  // 77,865,984 × 26 = 2,024,515,584; + tied embedding 256,000·2304 = 589,824,000
  // + final norm 2304 = 2,614,341,888.
  const Model m2 = load_model_file(test::repo("tests/data/hf/gemma-2-2b/config.json"));
  CHECK(m2.activation == Activation::kGeglu);
  CHECK(m2.post_norms);
  CHECK(m2.tie_embeddings);
  CHECK(m2.q_width() == 2048);
  CHECK(layer_params(m2) == 77'865'984);
  CHECK(total_params(m2) == 2'614'341'888);
  // 9B: 3·3584·4096 + 3·3584·14336 + 4·3584 = 198,195,200 per layer × 42
  // + 256,000·3584 + 3584 = 9,241,705,984.
  const Model m9 = load_model_file(test::repo("tests/data/hf/gemma-2-9b/config.json"));
  CHECK(layer_params(m9) == 198'195'200);
  CHECK(total_params(m9) == 9'241'705'984);
  // The keys that change computation but not parameters are named.
  REQUIRE(m9.caveats.size() == 3);
  CHECK(m9.caveats[0].rfind("attn_logit_softcapping", 0) == 0);
  CHECK(m9.caveats[1].rfind("final_logit_softcapping", 0) == 0);
  CHECK(m9.caveats[2].rfind("sliding_window", 0) == 0);
  // Each post-norm saves its input for backward: two more hidden-sized tensors
  // per layer than a pre-norm-only layer of the same shape.
  Model pre = m2;
  pre.post_norms = false;
  const ActShape a{4096, 1, 1, false, 2};
  CHECK(layer_activation_bytes(m2, true, Recompute::kNone, a) - layer_activation_bytes(pre, true, Recompute::kNone, a) ==
        2 * 2 * 4096 * 2304);
}

TEST_CASE("Mixtral-8x7B and DeepSeek-V3 count their published parameters, total and active (issue 16)", "[params][hf][moe]") {
  // Mixtral-8x7B (mistralai/Mixtral-8x7B-v0.1 config.json): per layer attention 4096*4096*2 + 4096*1024*2
  // = 41,943,040, router 4096*8 = 32,768, 8 experts of 3*4096*14336 = 176,160,768 each, 2 norms of 4096:
  // 32 * 1,451,270,144 + embedding and head 2 * 32000*4096 + final norm 4096 = 46,702,792,704 (Mistral AI's figure).
  const Model mix = load_model_file(test::repo("tests/data/hf/mixtral-8x7b-v0.1/config.json"));
  const ParamCounts m = count_params(mix);
  CHECK(m.total == 46702792704LL);
  CHECK(total_params(mix) == m.total);
  // Active: 2 of 8 experts per layer: 46,702,792,704 - 32 * 6 * 176,160,768 = 12,879,925,248 ("12.9B active").
  CHECK(m.active == 12879925248LL);
  CHECK(m.mtp == 0);

  // DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json): MLA attention per layer
  //   q_a 7168*1536 + q_a_norm 1536 + q_b 1536*128*192 + kv_a 7168*576 + kv_a_norm 512 + kv_b 512*128*256
  //   + o 128*128*7168 = 187,107,328; 2 norms 14,336;
  // 3 dense layers of MLP 3*7168*18432 = 396,361,728; 58 MoE layers of 257 experts (256 routed + 1 shared) of
  //   3*7168*2048 = 44,040,192, router 256*7168 + bias 256 = 1,835,264: 11,320,164,608;
  // embedding and head 2 * 129280*7168 = 1,853,358,080, final norm 7168:
  //   3*583,483,392 + 58*11,507,286,272 + 1,853,365,248 = 671,026,419,200 ("671B total").
  const Model ds = load_model_file(test::repo("tests/data/hf/deepseek-v3/config.json"));
  const ParamCounts d = count_params(ds);
  CHECK(attention_params(ds) == 187107328);
  CHECK(d.total == 671026419200LL);
  // Active: 8 of 256 routed experts: 671,026,419,200 - 58 * 248 * 44,040,192 = 37,552,297,472 ("37B activated").
  CHECK(d.active == 37552297472LL);
  // The MTP module apart: enorm + hnorm 2*7168, eh_proj 14336*7168, one MoE layer 11,507,286,272,
  // shared_head norm 7168 = 11,610,068,224 (+ the shared 1.85 B embedding and head: DeepSeek's "14B", 685B in all).
  CHECK(d.mtp == 11610068224LL);
  CHECK(ds.is_moe_layer(2) == false);
  CHECK(ds.is_moe_layer(3) == true);

  // The YAML model format says the same.
  const Model y = model_from_yaml(parse_yaml(
      "name: Mixtral-8x7B\nnum_layers: 32\nhidden_size: 4096\nnum_attention_heads: 32\nnum_kv_heads: 8\n"
      "ffn_hidden_size: 14336\nvocab_size: 32000\nactivation: swiglu\nnormalization: rmsnorm\ntie_embeddings: false\n"
      "position_embedding: rope\nnum_experts: 8\nexperts_per_token: 2\nmoe_ffn_hidden_size: 14336\n", "m.yaml"),
      "m.yaml", "");
  CHECK(count_params(y).total == 46702792704LL);
  CHECK(count_params(y).active == 12879925248LL);
  // Dense models: count_params is total_params, and every parameter is active.
  for (const char* f : {"llama-3.1-70b", "gpt3-175b", "qwen2.5-7b"}) {
    const Model dm = load_model_file(test::repo(std::string("configs/models/") + f + ".yaml"));
    CHECK(count_params(dm).total == total_params(dm));
    CHECK(count_params(dm).active == total_params(dm));
  }
}

TEST_CASE("Nemotron-4 340B's config.json: squared ReLU in a plain MLP, LayerNorm1P, partial rotary said", "[params][hf]") {
  // Per layer: q 18432² + k, v 2·18432·(8·192) + o 18432² = 736,100,352; up and down 2·18432·73728 =
  // 2,717,908,992; two LayerNorms of weight and bias 4·18432 = 73,728: 3,454,083,072 x 96 = 331,591,974,912
  // (the Nemotron-4 340B report: 331.6B non-embedding); embedding and output layer 2·256000·18432 =
  // 9,437,184,000 (9.4B embedding); final norm 2·18432: 341,029,195,776.
  const Model m = load_model_file(test::repo("tests/data/hf/nemotron-4-340b/config.json"));
  CHECK(m.activation == Activation::kRelu2);
  CHECK(m.normalization == Normalization::kLayerNorm);
  CHECK(!m.bias);
  CHECK(!m.tie_embeddings);
  CHECK(m.kv_width() == 1536);
  CHECK(layer_params(m) == 3'454'083'072LL);
  CHECK(total_params(m) == 341'029'195'776LL);
  // The built-in YAML model is the same model.
  CHECK(total_params(test::model("nemotron-4-340b")) == 341'029'195'776LL);
  CHECK(test::model("nemotron-4-340b").activation == Activation::kRelu2);
  REQUIRE(m.caveats.size() == 1);
  CHECK(m.caveats[0].rfind("partial_rotary_factor 0.5", 0) == 0);
  // relu2 is read for nemotron only: another model type may gate it (e.g. BitNet's gate/up/down MLP).
  const std::string other = R"({"model_type": "bitnet", "hidden_act": "relu2", "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 100, "rms_norm_eps": 1e-5})";
  try {
    model_from_hf_json(other, "bitnet/config.json");
    FAIL("relu2 on a model type other than nemotron was read");
  } catch (const SpecError& e) {
    CHECK(e.field() == "hidden_act");
    CHECK(std::string(e.what()).find("bitnet") != std::string::npos);
  }
}

TEST_CASE("HF configs: tie_word_embeddings defaults per model type, multimodal text_config, duplicate keys (issue 46)",
          "[params][hf]") {
  // Mistral-Small-3.1 (a Mistral3ForConditionalGeneration wrapper): the language model in text_config is
  // planned, untied as MistralConfig defaults it (transformers@008e5743 configuration_mistral.py:
  // tie_word_embeddings: bool = False). By hand: embedding 131072 x 5120 = 671,088,640; per layer q 5120 x 4096
  // = 20,971,520, k and v 2 x 5120 x 1024 = 10,485,760, o 20,971,520, SwiGLU 3 x 5120 x 32768 = 503,316,480,
  // two RMSNorms 10,240: 555,755,520 x 40 = 22,230,220,800; final norm 5,120; the output layer 671,088,640:
  // 23,572,403,200 (tied it would be 671,088,640 less).
  const Model m = load_model_file(test::repo("tests/data/hf/mistral-small-3.1-24b/config.json"));
  CHECK(!m.tie_embeddings);
  CHECK(layer_params(m) == 555'755'520LL);
  CHECK(total_params(m) == 23'572'403'200LL);
  bool said = false;
  for (const std::string& c : m.caveats) said = said || c.find("vision tower (vision_config, 'pixtral')") != std::string::npos;
  CHECK(said);
  // Llama and Qwen2 without the key are untied too; Gemma-2 and GPT-2 tied (their config classes).
  const auto dense = [](const std::string& type, const std::string& extra = "") {
    return R"({"model_type": ")" + type + R"(", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
      "num_hidden_layers": 2, "vocab_size": 100, "rms_norm_eps": 1e-5)" + extra + "}";
  };
  CHECK(!model_from_hf_json(dense("llama"), "llama/config.json").tie_embeddings);
  CHECK(!model_from_hf_json(dense("qwen2"), "qwen2/config.json").tie_embeddings);
  CHECK(model_from_hf_json(dense("gemma2"), "gemma2/config.json").tie_embeddings);
  CHECK(model_from_hf_json(dense("llama", R"(, "tie_word_embeddings": true)"), "l/config.json").tie_embeddings);
  // A type whose default paraplan has not read: refused, naming the key, not guessed.
  try {
    model_from_hf_json(dense("phi3"), "phi3/config.json");
    FAIL("a model type with an unread default was guessed");
  } catch (const SpecError& e) {
    CHECK(e.field() == "tie_word_embeddings");
    CHECK(std::string(e.what()).find("'phi3'") != std::string::npos);
  }
  // The key one level down is named so.
  try {
    model_from_hf_json(R"({"model_type": "mistral3", "text_config": {"model_type": "mistral", "hidden_size": 64}})",
                       "w/config.json");
    FAIL("a text_config without its layers was read");
  } catch (const SpecError& e) {
    CHECK(e.field() == "text_config.num_hidden_layers");
  }
  // A key given twice is an error naming its path (nlohmann kept the last in silence).
  try {
    model_from_hf_json(dense("llama", R"(, "vocab_size": 200)"), "dup/config.json");
    FAIL("a duplicate key was read");
  } catch (const SpecError& e) {
    CHECK(e.field() == "vocab_size");
    CHECK(std::string(e.what()).find("given twice") != std::string::npos);
  }
}

TEST_CASE("Nemotron-H-8B, a Mamba-2 hybrid: counted from its hybrid_override_pattern, and refused for planning with the reason",
          "[params][hf]") {
  // tests/data/hf/nemotron-h-8b/config.json: 24 M (Mamba-2), 4 * (attention), 24 - (squared-ReLU MLP) blocks.
  // By hand, as transformers' NemotronH builds them (modeling_nemotron_h.py):
  //   Mamba-2 mixer: d_inner = 128 heads x 64 = 8192, conv_dim = 8192 + 2 x 8 groups x 128 state = 10,240;
  //   in_proj 4096 x (8192 + 10,240 + 128) = 76,021,760; conv1d 10,240 x 4 + bias 10,240 = 51,200;
  //   dt_bias, A_log, D 3 x 128 = 384; gated RMSNorm 8192; out_proj 8192 x 4096 = 33,554,432: 109,635,968;
  //   + the block's RMSNorm 4096 = 109,640,064, x 24 = 2,631,361,536.
  //   attention: q 4096 x 4096 + k, v 2 x 4096 x 1024 + o 4096 x 4096 = 41,943,040 + 4096 = 41,947,136, x 4 = 167,788,544.
  //   MLP (not gated): up 4096 x 21,504 + down 21,504 x 4096 = 176,160,768 + 4096 = 176,164,864, x 24 = 4,227,956,736.
  //   embedding and output (untied) 2 x 131,072 x 4096 = 1,073,741,824; final norm 4096.
  //   Total 8,100,852,736: about 8.1 B, as NVIDIA names it (not the 17.0 B transformer it was read as).
  const Model m = load_model_file(test::repo("tests/data/hf/nemotron-h-8b/config.json"));
  CHECK(m.hybrid());
  CHECK(m.num_layers == 52);
  CHECK(m.activation == Activation::kRelu2);
  CHECK(m.normalization == Normalization::kRmsNorm);
  CHECK(mamba_mixer_params(m) == 109'635'968LL);
  CHECK(total_params(m) == 8'100'852'736LL);
  // Planning refuses it, naming what is missing.
  try {
    refuse_unplanned(m, "--model");
    FAIL("a Mamba-2 hybrid was planned");
  } catch (const SpecError& e) {
    CHECK(std::string(e.what()).find("Mamba-2 mixers' activations, state-space scan and conv kernels are not modelled") !=
          std::string::npos);
  }
  // Another model type with Mamba keys is refused, not read as a transformer.
  try {
    model_from_hf_json(R"({"model_type": "hybrid_thing", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
      "num_hidden_layers": 2, "vocab_size": 100, "rms_norm_eps": 1e-5, "attn_layer_period": 8, "tie_word_embeddings": false})",
                       "jamba.json");
    FAIL("a Jamba config was read");
  } catch (const SpecError& e) {
    CHECK(e.field() == "attn_layer_period");
  }
  // A pattern whose length disagrees with num_hidden_layers is refused.
  try {
    model_from_hf_json(R"({"model_type": "nemotron_h", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
      "num_hidden_layers": 3, "vocab_size": 100, "hybrid_override_pattern": "M*", "mamba_num_heads": 4, "mamba_head_dim": 32,
      "n_groups": 2, "ssm_state_size": 16, "mlp_hidden_act": "relu2"})", "h.json");
    FAIL("a 2-layer pattern with num_hidden_layers 3 was read");
  } catch (const SpecError& e) {
    CHECK(e.field() == "num_hidden_layers");
  }
}

TEST_CASE("Families not read yet are refused naming what is missing (GPT-OSS, GLM-4.5, Llama-4, Kimi-K2, Jamba)", "[params][hf]") {
  const std::pair<const char*, const char*> cases[] = {
      {"gpt_oss", "attention sinks"},      {"glm4_moe", "partial rotary"},          {"llama4_text", "chunked attention"},
      {"llama4", "interleaved MoE layers"}, {"kimi_k2", "give model_type deepseek_v3"}, {"jamba", "Mamba (v1) layers"},
  };
  for (const auto& [type, what] : cases) {
    INFO(type);
    try {
      model_from_hf_json(std::string(R"({"model_type": ")") + type + R"(", "hidden_size": 64, "num_hidden_layers": 2})", "c.json");
      FAIL("read");
    } catch (const SpecError& e) {
      CHECK(e.field() == "model_type");
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
  }
}
