// Loading the shipped specs, defaults, and strictness of the YAML reader.
#include <catch2/catch.hpp>

#include <filesystem>

#include "planner/spec_loader.hpp"
#include "planner/yaml_reader.hpp"
#include "test_helpers.hpp"

using namespace paraplan;

TEST_CASE("every shipped example loads and its layout resolves", "[spec]") {
  for (const auto& f : std::filesystem::directory_iterator(test::repo("configs/examples"))) {
    INFO(f.path().string());
    const Spec s = load_spec_file(f.path().string());
    CHECK(s.num_gpus() > 0);
    if (s.default_layout) {
      Layout l = parse_layout(*s.default_layout);
      const auto p = resolve_layout(s, &l, false);
      CHECK(!p);
    }
  }
}

TEST_CASE("every shipped model and cluster loads", "[spec]") {
  for (const char* dir : {"configs/models", "configs/clusters"})
    for (const auto& f : std::filesystem::directory_iterator(test::repo(dir))) {
      INFO(f.path().string());
      if (std::string(dir) == "configs/models") CHECK(load_model_file(f.path().string()).num_layers > 0);
      else CHECK(load_cluster_file(f.path().string()).gpus_per_node > 0);
    }
}

TEST_CASE("training defaults", "[spec]") {
  Training t;
  CHECK(t.optimizer_state_bytes == 12);
  CHECK(default_optimizer_state_bytes(OptimizerKind::kAdam, DType::kBf16) == 12);
  CHECK(default_optimizer_state_bytes(OptimizerKind::kAdam, DType::kFp32) == 8);
  CHECK(default_optimizer_state_bytes(OptimizerKind::kSgd, DType::kBf16) == 8);
}

TEST_CASE("closest key suggestions", "[spec]") {
  const char* known[] = {"hidden_size", "num_layers", "num_attention_heads", "training"};
  CHECK(closest_key("hiden_size", known, 4) == "hidden_size");
  CHECK(closest_key("trainig", known, 4) == "training");
  CHECK(closest_key("num_layer", known, 4) == "num_layers");
  CHECK(closest_key("zzzzzzzzzzz", known, 4).empty());
}

TEST_CASE("model YAML errors name the field and the line", "[spec]") {
  const std::string good =
      "name: m\nnum_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\nffn_hidden_size: 256\n"
      "vocab_size: 100\nactivation: gelu\nnormalization: layernorm\ntie_embeddings: true\n"
      "position_embedding: rope\n";
  CHECK_NOTHROW(model_from_yaml(YAML::Load(good), "m.yaml", ""));
  struct Case {
    std::string yaml;
    const char* field;
    int line;
  };
  const Case cases[] = {
      {good + "hiden: 3\n", "hiden", 11},
      {"name: m\nnum_layers: 0\n", "num_layers", 2},
      {"name: m\nnum_layers: -3\n", "num_layers", 2},
      {"name: m\nnum_layers: two\n", "num_layers", 2},
      {good + "num_kv_heads: 3\n", "num_kv_heads", 11},
      {good + "hidden_dropout: 1.5\n", "hidden_dropout", 11},
      {"name: m\nnum_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\nffn_hidden_size: 256\n"
       "vocab_size: 100\nactivation: relu\n", "activation", 7},
  };
  for (const Case& c : cases) {
    INFO(c.yaml);
    try {
      model_from_yaml(YAML::Load(c.yaml), "m.yaml", "");
      FAIL("expected a SpecError");
    } catch (const SpecError& e) {
      CHECK(e.field() == c.field);
      CHECK(e.line() == c.line);
      CHECK(e.file() == "m.yaml");
    }
  }
}

TEST_CASE("cluster gpu.flash_attention_tflops: loads the table, errors name the field (issue 15)", "[spec]") {
  const std::string head =
      "name: c\ngpu:\n  name: g\n  memory_gib: 80\n  peak_tflops_bf16: 989\n  hbm_bandwidth_gbs: 3350\n"
      "  flash_attention_tflops:\n";
  const std::string tail =
      "gpus_per_node: 8\nintra_node: {bandwidth_gbs: 450, latency_us: 3}\ninter_node: {bandwidth_gbs: 50, latency_us: 14}\n";
  const Cluster c = cluster_from_yaml(
      YAML::Load(head + "    seq_lengths: [1024, 4096]\n    head_dim_64: [192, 257]\n    head_dim_128: [221, 294]\n" + tail),
      "c.yaml", "");
  REQUIRE(c.gpu.flash_attention.n == 2);
  CHECK(c.gpu.flash_attention.seq[1] == 4096);
  CHECK(c.gpu.flash_attention.tflops_hd128[0] == 221);
  struct Case {
    std::string table;
    const char* field;
  };
  const Case cases[] = {
      {"    seq_lengths: [1024, 4096]\n    head_dim_64: [192]\n    head_dim_128: [221, 294]\n",
       "gpu.flash_attention_tflops.head_dim_64"},
      {"    seq_lengths: [4096, 1024]\n    head_dim_64: [192, 257]\n    head_dim_128: [221, 294]\n",
       "gpu.flash_attention_tflops.seq_lengths"},
      {"    seq_lengths: [1024, 4096]\n    head_dim_64: [192, 2000]\n    head_dim_128: [221, 294]\n",
       "gpu.flash_attention_tflops.head_dim_64"},  // above the GPU's peak
      {"    seq_lengths: [1024, 4096]\n    head_dim_64: [192, 257]\n", "gpu.flash_attention_tflops.head_dim_128"},
      {"    seq_lengths: [1024, 4096]\n    head_dim_64: [192, x]\n    head_dim_128: [221, 294]\n",
       "gpu.flash_attention_tflops.head_dim_64"},
      {"    seq_length: [1024]\n", "gpu.flash_attention_tflops.seq_length"},
  };
  for (const Case& k : cases) {
    INFO(k.table);
    try {
      cluster_from_yaml(YAML::Load(head + k.table + tail), "c.yaml", "");
      FAIL("expected a SpecError");
    } catch (const SpecError& e) {
      CHECK(e.field() == k.field);
      CHECK(e.file() == "c.yaml");
    }
  }
}

TEST_CASE("activation: relu2 (squared ReLU) loads as a plain MLP - an unknown activation names the four", "[spec]") {
  const std::string base = R"(name: nemotron-like
num_layers: 2
hidden_size: 256
num_attention_heads: 4
ffn_hidden_size: 1024
vocab_size: 1000
normalization: layernorm
tie_embeddings: false
position_embedding: rope
activation: )";
  const Model m = model_from_yaml(parse_yaml(base + "relu2\n", "m.yaml"), "m.yaml", "");
  CHECK(m.activation == Activation::kRelu2);
  CHECK(!m.gated());
  CHECK(m.ffn_in_width() == 1024);
  // 2 x 256 x 1024 MLP weights, as GeLU's.
  Model gelu = m;
  gelu.activation = Activation::kGelu;
  CHECK(layer_params(m) == layer_params(gelu));
  try {
    model_from_yaml(parse_yaml(base + "relu3\n", "m.yaml"), "m.yaml", "");
    FAIL("relu3 was read");
  } catch (const SpecError& e) {
    CHECK(e.field() == "activation");
    CHECK(std::string(e.what()).find("relu2") != std::string::npos);
  }
}
