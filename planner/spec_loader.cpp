#include "planner/spec_loader.hpp"

#include <algorithm>
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "planner/catalog.hpp"
#include "planner/spec_inputs.hpp"
#include "planner/yaml_reader.hpp"

namespace paraplan {

namespace fs = std::filesystem;

std::string read_text_file(const std::string& path, const std::string& field) {
  // Only regular files (symlinks followed), so a FIFO never blocks and a
  // device is never read without end; and only up to kMaxInputFileBytes.
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st))
    throw SpecError(path, 0, field, "is a directory; expected a YAML or JSON file");
  if (fs::exists(st) && !fs::is_regular_file(st))
    throw SpecError(path, 0, field,
                    std::string("is a ") + (fs::is_fifo(st) ? "FIFO" : fs::is_socket(st) ? "socket" : "device or special file") +
                        "; expected a regular YAML or JSON file");
  const auto too_big = [&] {
    return SpecError(path, 0, field,
                     "larger than " + std::to_string(kMaxInputFileBytes >> 20) + " MiB; expected a YAML or JSON spec file");
  };
  if (fs::exists(st) && fs::file_size(path, ec) > kMaxInputFileBytes && !ec) throw too_big();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SpecError(path, 0, field, std::string("cannot read file: ") + std::strerror(errno));
  std::ostringstream ss;
  char buf[1 << 16];
  std::size_t total = 0;
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    total += std::size_t(in.gcount());
    if (total > kMaxInputFileBytes) throw too_big();  // it grew while being read
    ss.write(buf, in.gcount());
  }
  return ss.str();
}

std::string json_error_text(const std::exception& e) {
  // nlohmann: "[json.exception.parse_error.101] parse error at line 1, column 35: syntax error …"
  // or "[json.exception.out_of_range.406] number overflow parsing '1e400'".
  std::string w = e.what();
  const bool overflow = w.find("out_of_range") != std::string::npos;
  const size_t col = w.find("column ");
  const size_t colon = col == std::string::npos ? std::string::npos : w.find(": ", col);
  if (colon != std::string::npos) w = w.substr(colon + 2);
  else if (const size_t tag = w.find("] "); tag != std::string::npos) w = w.substr(tag + 2);
  return (overflow ? "JSON number out of range: " : "JSON syntax error: ") + w;
}

nlohmann::json parse_json_input(const std::string& text, const std::string& path, const std::string& field) {
  using nlohmann::json;
  // The keys seen in each open object (arrays hold an empty frame), and the path to it.
  struct Frame {
    std::vector<std::string> keys;
    std::string path;
  };
  std::vector<Frame> open;
  std::string last_key;
  const json::parser_callback_t check = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start: {
        const std::string at = open.empty() ? "" : open.back().path;
        open.push_back({{}, last_key.empty() ? at : (at.empty() ? last_key : at + "." + last_key)});
        last_key.clear();
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!open.empty()) open.pop_back();
        last_key.clear();
        break;
      case json::parse_event_t::key: {
        const std::string k = parsed.get<std::string>();
        Frame& f = open.back();
        const std::string name = f.path.empty() ? k : f.path + "." + k;
        if (std::find(f.keys.begin(), f.keys.end(), k) != f.keys.end())
          throw SpecError(path, 0, name, "key given twice in one object; give it once");
        f.keys.push_back(k);
        last_key = k;
        break;
      }
      case json::parse_event_t::value: last_key.clear(); break;
    }
    return true;
  };
  try {
    return json::parse(text, check);
  } catch (const json::parse_error& e) {
    const size_t off = std::min<size_t>(e.byte, text.size());
    throw SpecError(path, 1 + int(std::count(text.begin(), text.begin() + std::ptrdiff_t(off), '\n')), field,
                    json_error_text(e));
  } catch (const json::exception& e) {  // a number past double's range (1e400)
    throw json_range_error(path, text, e, field);
  }
}

SpecError json_range_error(const std::string& path, const std::string& text, const std::exception& e,
                           const std::string& field) {
  // "… number overflow parsing '1e400'": find that literal to name its line and key.
  const std::string w = e.what();
  const size_t q1 = w.find('\''), q2 = q1 == std::string::npos ? q1 : w.find('\'', q1 + 1);
  if (q2 != std::string::npos) {
    const std::string literal = w.substr(q1 + 1, q2 - q1 - 1);
    const size_t at = literal.empty() ? std::string::npos : text.find(literal);
    if (at != std::string::npos) {
      const int line = 1 + int(std::count(text.begin(), text.begin() + std::ptrdiff_t(at), '\n'));
      const size_t colon = text.rfind(':', at), close = colon == std::string::npos ? colon : text.rfind('"', colon);
      const size_t open = close == std::string::npos || close == 0 ? std::string::npos : text.rfind('"', close - 1);
      const std::string key = open == std::string::npos ? field : text.substr(open + 1, close - open - 1);
      return SpecError(path, line, key, "expected a number within double's range, got " + literal);
    }
  }
  return SpecError(path, 0, field, json_error_text(e));
}

namespace {

bool looks_like_json(const std::string& path, const std::string& text) {
  if (fs::path(path).extension() == ".json") return true;
  // A YAML flow mapping also starts with '{': JSON only where the text is JSON (issue 46).
  return nlohmann::json::accept(text);
}

void check_model(const Model& m, const MapReader& r) {
  if (m.num_kv_heads > m.num_attention_heads || m.num_attention_heads % m.num_kv_heads)
    r.fail("num_kv_heads", "expected a divisor of num_attention_heads " +
                               std::to_string(m.num_attention_heads) + ", got " +
                               std::to_string(m.num_kv_heads));
  if (!r.has("head_dim") && m.hidden_size % m.num_attention_heads)
    r.fail("hidden_size", "expected a multiple of num_attention_heads " +
                              std::to_string(m.num_attention_heads) + " (or give head_dim), got " +
                              std::to_string(m.hidden_size));
  if (approx_params(m) > kMaxParams)
    r.fail("num_layers", fmt::format("the model has {:.3g} parameters; expected at most {:.3g}", approx_params(m), kMaxParams));
}

int capped(const MapReader& r, const char* key, std::int64_t v, std::int64_t max) {
  if (v > max)
    r.fail(key, "expected at most " + std::to_string(max) + ", got " + std::to_string(v));
  return int(v);
}
int to_int(const MapReader& r, const char* key, std::int64_t v) {
  return capped(r, key, v, 2'000'000'000);
}

}  // namespace

Model model_from_yaml(const YAML::Node& node, const std::string& file, const std::string& prefix) {
  const MapReader r(node, file, prefix,
                    {"name", "source", "num_layers", "hidden_size", "num_attention_heads",
                     "num_kv_heads", "head_dim", "ffn_hidden_size", "vocab_size", "activation",
                     "normalization", "tie_embeddings", "bias", "qkv_bias", "post_norms", "position_embedding",
                     "max_position_embeddings", "hidden_dropout", "attention_dropout",
                     "published_params", "num_experts", "experts_per_token", "moe_ffn_hidden_size",
                     "num_shared_experts", "first_dense_layers", "moe_layer_freq", "router_bias", "q_lora_rank",
                     "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "mtp_layers",
                     "shared_expert_gate", "qk_norm"});
  Model m;
  m.name = r.get_string("name");
  m.source = r.opt_string("source", "");
  m.num_layers = capped(r, "num_layers", r.get_int("num_layers", 1), kMaxLayers);
  m.hidden_size = capped(r, "hidden_size", r.get_int("hidden_size", 1), kMaxWidth);
  m.num_attention_heads =
      capped(r, "num_attention_heads", r.get_int("num_attention_heads", 1), kMaxHeads);
  m.num_kv_heads =
      capped(r, "num_kv_heads", r.opt_int("num_kv_heads", m.num_attention_heads, 1), kMaxHeads);
  m.head_dim = capped(r, "head_dim", r.opt_int("head_dim", m.hidden_size / m.num_attention_heads, 1),
                      kMaxWidth / m.num_attention_heads);
  m.ffn_hidden_size = capped(r, "ffn_hidden_size", r.get_int("ffn_hidden_size", 1), kMaxWidth);
  m.vocab_size = capped(r, "vocab_size", r.get_int("vocab_size", 1), kMaxVocab);
  m.activation = Activation(r.get_choice("activation", {"gelu", "swiglu", "geglu", "relu2"}));
  m.normalization = Normalization(r.get_choice("normalization", {"layernorm", "rmsnorm"}));
  m.tie_embeddings = r.get_bool("tie_embeddings");
  m.bias = r.opt_bool("bias", false);
  m.qkv_bias = r.opt_bool("qkv_bias", false);
  m.post_norms = r.opt_bool("post_norms", false);
  m.qk_norm = r.opt_bool("qk_norm", false);
  m.position_embedding = PositionEmbedding(r.get_choice("position_embedding", {"rope", "learned"}));
  if (m.position_embedding == PositionEmbedding::kLearned)
    m.max_position_embeddings =
        to_int(r, "max_position_embeddings", r.get_int("max_position_embeddings", 1));
  else
    m.max_position_embeddings = to_int(r, "max_position_embeddings",
                                       r.opt_int("max_position_embeddings", 0, 1));
  m.hidden_dropout = r.opt_number("hidden_dropout", 0.0, 0.0, 1.0, false);
  m.attention_dropout = r.opt_number("attention_dropout", 0.0, 0.0, 1.0, false);
  m.published_params = r.opt_int("published_params", 0, 1);
  // Mixture of experts and multi-latent attention (issue 16: counted, planned under Megatron-LM's profile).
  m.num_experts = capped(r, "num_experts", r.opt_int("num_experts", 0, 0), 1 << 16);
  if (m.num_experts > 0) {
    m.experts_per_token = capped(r, "experts_per_token", r.get_int("experts_per_token", 1), m.num_experts);
    m.moe_ffn_hidden_size = capped(r, "moe_ffn_hidden_size", r.get_int("moe_ffn_hidden_size", 1), kMaxWidth);
    m.num_shared_experts = capped(r, "num_shared_experts", r.opt_int("num_shared_experts", 0, 0), 1 << 16);
    m.first_dense_layers = capped(r, "first_dense_layers", r.opt_int("first_dense_layers", 0, 0), m.num_layers);
    m.moe_layer_freq = capped(r, "moe_layer_freq", r.opt_int("moe_layer_freq", 1, 1), m.num_layers);
    m.router_bias = r.opt_bool("router_bias", false);
    m.shared_expert_gate = r.opt_bool("shared_expert_gate", false);
  } else {
    for (const char* k : {"experts_per_token", "moe_ffn_hidden_size", "num_shared_experts", "first_dense_layers",
                          "moe_layer_freq", "router_bias", "shared_expert_gate"})
      if (r.has(k)) r.fail(k, "applies to a mixture of experts only (num_experts > 0)");
  }
  m.kv_lora_rank = capped(r, "kv_lora_rank", r.opt_int("kv_lora_rank", 0, 0), kMaxWidth);
  if (m.kv_lora_rank > 0) {
    m.q_lora_rank = capped(r, "q_lora_rank", r.opt_int("q_lora_rank", 0, 0), kMaxWidth);
    m.qk_nope_head_dim = capped(r, "qk_nope_head_dim", r.get_int("qk_nope_head_dim", 1), kMaxWidth);
    m.qk_rope_head_dim = capped(r, "qk_rope_head_dim", r.get_int("qk_rope_head_dim", 1), kMaxWidth);
    m.v_head_dim = capped(r, "v_head_dim", r.get_int("v_head_dim", 1), kMaxWidth);
  } else {
    for (const char* k : {"q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"})
      if (r.has(k)) r.fail(k, "applies to multi-latent attention only (kv_lora_rank > 0)");
  }
  m.mtp_layers = capped(r, "mtp_layers", r.opt_int("mtp_layers", 0, 0), 64);
  check_model(m, r);
  return m;
}

Cluster cluster_from_yaml(const YAML::Node& node, const std::string& file,
                          const std::string& prefix) {
  const MapReader r(node, file, prefix,
                    {"name", "source", "gpu", "gpus_per_node", "intra_node", "inter_node",
                     "runtime_overhead_gib", "fragmentation", "gemm_efficiency", "gemm_k_overhead", "gemm_fixed_us",
                     "gemm_efficiency_fp8",
                     "hbm_efficiency", "strided_hbm_efficiency", "flash_attention_dropout_slowdown", "flash_attention_deterministic_slowdown", "attention_efficiency", "optimizer_efficiency", "best_published_mfu",
                     "best_published_mfu_fp8",
                     "cuda_context_gib", "cublas_workspace_mib", "te_cublas_workspace_mib", "nccl_comm_mib"});
  Cluster c;
  c.name = r.get_string("name");
  c.source = r.opt_string("source", "");
  if (!r.has("gpu")) r.fail("gpu", "missing required key");
  const MapReader g(r.child("gpu"), file, prefix + "gpu.",
                    {"name", "memory_gib", "peak_tflops_bf16", "peak_tflops_fp8", "hbm_bandwidth_gbs",
                     "flash_attention_tflops", "sm_count", "bf16"});
  c.gpu.name = g.get_string("name");
  c.gpu.memory_gib = g.get_number("memory_gib", 1e-9, kMaxGpuMemoryGib, true);
  c.gpu.peak_tflops_bf16 = g.get_number("peak_tflops_bf16", 1e-9, kMaxRate, true);
  c.gpu.peak_tflops_fp8 = g.has("peak_tflops_fp8") ? g.get_number("peak_tflops_fp8", 1e-9, kMaxRate, true) : 0;
  c.gpu.hbm_bandwidth_gbs = g.get_number("hbm_bandwidth_gbs", 1e-9, kMaxRate, true);
  c.gpu.bf16 = g.opt_bool("bf16", true);
  c.gpu.sm_count = int(g.opt_int("sm_count", 0, 1));
  if (c.gpu.sm_count > (1 << 20)) g.fail("sm_count", "expected at most 1048576 SMs");
  if (g.has("flash_attention_tflops")) {
    const MapReader a(g.child("flash_attention_tflops"), file, prefix + "gpu.flash_attention_tflops.",
                      {"seq_lengths", "head_dim_64", "head_dim_128"});
    const std::vector<double> seq = a.get_number_list("seq_lengths", 0, kMaxRate);
    const std::vector<double> t64 = a.get_number_list("head_dim_64", 0, c.gpu.peak_tflops_bf16);
    const std::vector<double> t128 = a.get_number_list("head_dim_128", 0, c.gpu.peak_tflops_bf16);
    if (seq.size() < 2 || seq.size() > size_t(AttentionTable::kMax))
      a.fail("seq_lengths", fmt::format("expected 2 to {} sequence lengths, got {}", AttentionTable::kMax, seq.size()));
    for (size_t i = 1; i < seq.size(); ++i)
      if (seq[i] <= seq[i - 1]) a.fail("seq_lengths", "expected increasing sequence lengths");
    if (t64.size() != seq.size()) a.fail("head_dim_64", fmt::format("expected {} values, one per sequence length", seq.size()));
    if (t128.size() != seq.size()) a.fail("head_dim_128", fmt::format("expected {} values, one per sequence length", seq.size()));
    AttentionTable& t = c.gpu.flash_attention;
    t.n = int(seq.size());
    for (int i = 0; i < t.n; ++i) t.seq[i] = seq[i], t.tflops_hd64[i] = t64[i], t.tflops_hd128[i] = t128[i];
  }
  c.gpus_per_node = capped(r, "gpus_per_node", r.get_int("gpus_per_node", 1), 1024);
  for (const char* level : {"intra_node", "inter_node"}) {
    if (!r.has(level)) r.fail(level, "missing required key");
    const bool intra = std::string(level) == "intra_node";
    const MapReader l = intra ? MapReader(r.child(level), file, prefix + level + ".",
                                          {"bandwidth_gbs", "latency_us", "efficiency", "nccl_channels"})
                              : MapReader(r.child(level), file, prefix + level + ".",
                                          {"bandwidth_gbs", "nics_per_node", "nic_gbps", "latency_us", "efficiency"});
    Link& link = intra ? c.intra_node : c.inter_node;
    if (!intra && (l.has("nics_per_node") || l.has("nic_gbps"))) {
      // A node's NICs as the datasheet gives them (ConnectX-7: 400 Gb/s), shared by its GPUs.
      if (l.has("bandwidth_gbs"))
        l.fail("bandwidth_gbs", "give bandwidth_gbs (GB/s per GPU) or nics_per_node and nic_gbps, not both");
      link.nics_per_node = capped(l, "nics_per_node", l.get_int("nics_per_node", 1), 1024);
      link.nic_gbps = l.get_number("nic_gbps", 1e-9, kMaxRate, true);
      link.bandwidth_gbs = link.nics_per_node * link.nic_gbps / 8 / c.gpus_per_node;
    } else {
      link.bandwidth_gbs = l.get_number("bandwidth_gbs", 1e-9, kMaxRate, true);
    }
    link.latency_us = l.get_number("latency_us", 0, kMaxLatencyUs, true);
    double& eff = intra ? c.intra_comm_efficiency : c.inter_comm_efficiency;
    eff = l.opt_number("efficiency", eff, 1e-6, 1.0, true);
    if (intra && l.has("nccl_channels")) c.nccl_channels = capped(l, "nccl_channels", l.get_int("nccl_channels", 1), 64);
  }
  c.gemm_efficiency = r.opt_number("gemm_efficiency", c.gemm_efficiency, 1e-6, 1.0, true);
  c.gemm_k_overhead = r.opt_number("gemm_k_overhead", 0.0, 0.0, 1e6, true);
  c.gemm_fixed_us = r.opt_number("gemm_fixed_us", 0.0, 0.0, 1e6, true);
  if (r.has("gemm_efficiency_fp8")) c.gemm_efficiency_fp8 = r.get_number("gemm_efficiency_fp8", 1e-6, 1.0, true);
  c.hbm_efficiency = r.opt_number("hbm_efficiency", c.hbm_efficiency, 1e-6, 1.0, true);
  if (r.has("strided_hbm_efficiency"))
    c.strided_hbm_efficiency = r.get_number("strided_hbm_efficiency", 1e-6, 1.0, true);
  c.flash_dropout_slowdown =
      r.opt_number("flash_attention_dropout_slowdown", c.flash_dropout_slowdown, 1.0, 10.0, true);
  c.flash_deterministic_slowdown =
      r.opt_number("flash_attention_deterministic_slowdown", c.flash_deterministic_slowdown, 1.0, 10.0, true);
  if (r.has("attention_efficiency")) c.attention_efficiency = r.get_number("attention_efficiency", 1e-6, 1.0, true);
  if (r.has("optimizer_efficiency")) c.optimizer_efficiency = r.get_number("optimizer_efficiency", 1e-6, 1.0, true);
  if (r.has("best_published_mfu")) c.best_published_mfu = r.get_number("best_published_mfu", 1e-6, 1.0, true);
  if (r.has("best_published_mfu_fp8"))
    c.best_published_mfu_fp8 = r.get_number("best_published_mfu_fp8", 1e-6, 2.0, true);
  // Not given: modelled from the parts below (costmodel/memory.cpp).
  if (r.has("runtime_overhead_gib")) c.runtime_overhead_gib = r.get_number("runtime_overhead_gib", 0, 1e6, true);
  if (r.has("fragmentation")) c.fragmentation = r.get_number("fragmentation", 0, 1, false);
  c.cuda_context_gib = r.opt_number("cuda_context_gib", c.cuda_context_gib, 0, 1e3, true);
  c.cublas_workspace_mib = r.opt_number("cublas_workspace_mib", c.cublas_workspace_mib, 0, 1e6, true);
  c.te_cublas_workspace_mib = r.opt_number("te_cublas_workspace_mib", c.te_cublas_workspace_mib, 0, 1e6, true);
  c.nccl_comm_mib = r.opt_number("nccl_comm_mib", c.nccl_comm_mib, 0, 1e6, true);
  return c;
}

Model load_model_file(const std::string& path) {
  const std::string text = read_text_file(path);
  if (looks_like_json(path, text)) return model_from_hf_json(text, path);
  return model_from_yaml(parse_yaml(text, path), path, "");
}

Cluster load_cluster_file(const std::string& path) {
  return cluster_from_yaml(parse_yaml(read_text_file(path), path), path, "");
}

namespace {

// `gpu`: the cluster's GPU, whose lack of BF16 makes fp16 the default precision
// and refuses bf16 (nullptr: any).
void load_training(const MapReader& top, const std::string& file, const Model& m, int num_gpus, Training* t,
                   const Gpu* gpu = nullptr) {
  // No training: map, or one without seq_length / global_batch_size: the defaults (said in the report).
  const MapReader r(top.has("training") ? top.child("training") : YAML::Node(YAML::NodeType::Map), file, "training.",
                    {"seq_length", "global_batch_size", "precision", "grad_dtype", "optimizer",
                     "optimizer_state_bytes", "flash_attention", "grad_bucket_params",
                     "overlap_dp_comm", "overlap_param_gather", "framework", "fp8", "fp8_param_gather", "pipeline_scatter_gather",
                     "gradient_accumulation_fusion", "cross_entropy_fusion", "tp_comm_overlap", "grad_reduce_dtype", "moe_load_imbalance", "moe_capacity_factor",
                     "moe_pad_to_capacity", "mtp", "moe_grouped_gemm", "transformer_impl", "tp_async_allreduce", "deterministic",
                     "overlap_p2p_comm", "overlap_p2p_comm_warmup_flush", "moe_token_dispatcher", "moe_ep_overlap",
                     "zero3_prefetch_bucket_size", "zero3_max_live_parameters", "zero3_max_reuse_distance"});
  t->framework = Framework(r.opt_choice("framework", int(Framework::kMegatron),
                                        {"megatron", "deepspeed", "fsdp", "nanotron", "paraplan"}));
  t->seq_length_given = r.has("seq_length");
  t->seq_length = t->seq_length_given ? capped(r, "seq_length", r.get_int("seq_length", 1), kMaxSeq) : default_seq_length(m);
  if (t->seq_length > max_seq_length(m))
    r.fail("seq_length", seq_length_limit_message(m));
  t->global_batch_size_given = r.has("global_batch_size");
  t->global_batch_size = t->global_batch_size_given
                             ? capped(r, "global_batch_size", r.get_int("global_batch_size", 1), kMaxBatch)
                             : default_global_batch(t->seq_length, num_gpus);
  const bool no_bf16 = gpu && !gpu->bf16;
  const std::string no_bf16_why = no_bf16 ? no_bf16_reason(*gpu) : "";
  t->precision = DType(r.opt_choice("precision", int(no_bf16 ? DType::kFp16 : DType::kBf16), {"bf16", "fp16", "fp32"}));
  t->precision_given = r.has("precision");
  if (no_bf16 && t->precision == DType::kBf16) r.fail("precision", no_bf16_why + "; expected fp16 or fp32");
  // Default gradients: the compute precision (16-bit grads as in the ZeRO paper).
  t->grad_dtype_given = r.has("grad_dtype");
  t->grad_dtype = DType(r.opt_choice("grad_dtype", int(t->precision), {"bf16", "fp16", "fp32"}));
  if (no_bf16 && t->grad_dtype == DType::kBf16) r.fail("grad_dtype", no_bf16_why + "; expected fp16 or fp32");
  if (t->grad_dtype == DType::kFp16 && t->precision != DType::kFp16)
    r.fail("grad_dtype", "expected bf16 or fp32 (fp16 gradients need precision fp16)");
  t->optimizer = OptimizerKind(r.opt_choice("optimizer", 0, {"adam", "sgd"}));
  t->optimizer_state_bytes_given = r.has("optimizer_state_bytes");
  t->optimizer_state_bytes =
      r.opt_number("optimizer_state_bytes",
                   default_optimizer_state_bytes(t->optimizer, t->precision), 0, kMaxStateBytesPerParam, true);
  // Megatron --transformer-impl: local keeps Megatron-core's own modules, whose core attention is
  // unfused (megatron/core/models/backends.py:129-131) unless flash_attention says otherwise.
  t->transformer_engine = r.opt_choice("transformer_impl", 0, {"transformer_engine", "local"}) == 0;
  t->flash_attention = r.opt_bool("flash_attention", t->transformer_engine);
  t->grad_bucket_params_given = r.has("grad_bucket_params");
  t->grad_bucket_params = r.opt_int("grad_bucket_params", t->grad_bucket_params, 1);
  t->overlap_dp_comm = r.opt_bool("overlap_dp_comm", true);
  // DeepSpeed ZeRO-3's stage3_prefetch_bucket_size, stage3_max_live_parameters, stage3_max_reuse_distance.
  t->zero3_prefetch_bucket_size = r.opt_int("zero3_prefetch_bucket_size", t->zero3_prefetch_bucket_size, 0);
  t->zero3_max_live_parameters = r.opt_int("zero3_max_live_parameters", t->zero3_max_live_parameters, 0);
  t->zero3_max_reuse_distance = r.opt_int("zero3_max_reuse_distance", t->zero3_max_reuse_distance, 0);
  t->overlap_param_gather = r.opt_bool("overlap_param_gather", true);
  t->fp8 = r.opt_bool("fp8", false);
  t->fp8_param_gather = r.opt_bool("fp8_param_gather", false);
  if (t->fp8_param_gather && !t->fp8) r.fail("fp8_param_gather", "needs fp8: true");
  if (t->fp8 && t->precision == DType::kFp32) r.fail("fp8", "FP8 training runs with bf16 or fp16 precision");
  t->pipeline_scatter_gather = r.opt_bool("pipeline_scatter_gather", false);
  t->gradient_accumulation_fusion = r.opt_bool("gradient_accumulation_fusion", true);
  t->cross_entropy_fusion = r.opt_bool("cross_entropy_fusion", false);
  t->tp_comm_overlap = r.opt_bool("tp_comm_overlap", false);
  t->tp_async_allreduce = r.opt_bool("tp_async_allreduce", true);
  t->overlap_p2p_comm = r.opt_bool("overlap_p2p_comm", true);
  t->overlap_p2p_comm_warmup_flush = r.opt_bool("overlap_p2p_comm_warmup_flush", false);
  if (t->overlap_p2p_comm_warmup_flush && !t->overlap_p2p_comm)
    r.fail("overlap_p2p_comm_warmup_flush",
           "needs overlap_p2p_comm: true (Megatron: only valid with --overlap-p2p-communication, "
           "model_parallel_config.py:570-574)");
  t->deterministic = r.opt_bool("deterministic", false);
  t->moe_load_imbalance = r.opt_number("moe_load_imbalance", t->moe_load_imbalance, 1.0, 64.0, true);
  t->moe_capacity_factor = r.opt_number("moe_capacity_factor", 0.0, 0.0, 64.0, true);
  t->moe_pad_to_capacity = r.opt_bool("moe_pad_to_capacity", false);
  if (t->moe_pad_to_capacity && t->moe_capacity_factor == 0)
    r.fail("moe_pad_to_capacity", "has no effect without moe_capacity_factor (Megatron-LM transformer_config.py:921-924); "
                                  "expected a capacity factor too");
  if (t->fp8 && m.is_moe())
    r.fail("fp8", "FP8 training of a mixture of experts is not modelled (its expert GEMMs, their FP8 padding and "
                  "workspaces); expected fp8: false");
  t->moe_grouped_gemm = r.opt_bool("moe_grouped_gemm", false);
  t->moe_dispatcher = Training::MoeDispatcher(r.opt_choice("moe_token_dispatcher", 0, {"alltoall", "allgather"}));
  t->moe_ep_overlap = r.opt_bool("moe_ep_overlap", false);
  if (!m.is_moe() && (t->moe_ep_overlap || t->moe_dispatcher != Training::MoeDispatcher::kAllToAll))
    r.fail(t->moe_ep_overlap ? "moe_ep_overlap" : "moe_token_dispatcher",
           "the model has no experts; expected the key left out");
  t->mtp = r.opt_bool("mtp", false);
  if (t->mtp && m.mtp_layers == 0)
    r.fail("mtp", "the model has no multi-token-prediction modules (mtp_layers: 0); expected mtp: false");
  t->grad_reduce_dtype_given = r.has("grad_reduce_dtype");
  if (t->grad_reduce_dtype_given) t->grad_reduce_dtype = DType(r.get_choice("grad_reduce_dtype", {"bf16", "fp16", "fp32"}));
  if (no_bf16 && t->grad_reduce_dtype_given && t->grad_reduce_dtype == DType::kBf16)
    r.fail("grad_reduce_dtype", no_bf16_why + "; expected fp16 or fp32");
}

void load_search(const MapReader& top, const std::string& file, SearchSpace* s) {
  if (!top.has("search")) return;
  const MapReader r(top.child("search"), file, "search.",
                    {"dp", "tp", "cp", "pp", "vpp", "sp", "zero", "recompute", "mbs", "schedule",
                     "allow_tp_across_nodes", "ep", "etp"});
  auto ints = [&](const char* k, std::int64_t min_v, std::vector<int>* out) {
    for (auto v : r.opt_int_list(k, min_v)) out->push_back(to_int(r, k, v));
  };
  ints("dp", 1, &s->dp);
  ints("tp", 1, &s->tp);
  ints("cp", 1, &s->cp);
  ints("ep", 1, &s->ep);
  ints("etp", 1, &s->etp);
  ints("pp", 1, &s->pp);
  ints("vpp", 1, &s->vpp);
  ints("mbs", 1, &s->mbs);
  ints("zero", 0, &s->zero);
  for (int z : s->zero)
    if (z > 3) r.fail("zero", "expected ZeRO stages 0-3, got " + std::to_string(z));
  ints("sp", 0, &s->sp);
  for (int x : s->sp)
    if (x > 1) r.fail("sp", "expected 0 or 1, got " + std::to_string(x));
  for (int x : r.opt_choice_list("recompute", {"none", "selective", "full"}))
    s->recompute.push_back(Recompute(x));
  for (int x : r.opt_choice_list("schedule", {"1f1b", "gpipe"})) s->schedule.push_back(Schedule(x));
  s->allow_tp_across_nodes = r.opt_bool("allow_tp_across_nodes", false);
}

// `model:` / `cluster:` is a path relative to the spec, a built-in name
// (`model: llama-3.1-70b`, `cluster: dgx-h100` or `cluster: h100`; a file of
// that name wins), or an inline mapping.
template <class T, class FromFile, class FromYaml, class Builtin>
T load_part(const MapReader& top, const char* key, const std::string& file, FromFile from_file,
            FromYaml from_yaml, Builtin builtin, const std::string& names) {
  if (!top.has(key)) top.fail(key, "missing required key");
  const YAML::Node n = top.child(key);
  if (n.IsMap()) return from_yaml(n, file, std::string(key) + ".");
  if (!n.IsScalar()) top.fail(key, "expected a file path, a built-in name or a mapping");
  fs::path p(n.Scalar());
  if (p.is_relative()) p = fs::path(file).parent_path() / p;
  std::error_code ec;
  if (!fs::exists(p, ec)) {
    if (std::optional<T> b = builtin(n.Scalar())) return *b;
    top.fail(key, "file not found: " + p.lexically_normal().string() + "; expected a path or a built-in name (" +
                      names + ")");
  }
  return from_file(p.lexically_normal().string());
}

std::optional<Model> builtin_model(const std::string& name) {
  if (!find_builtin_model(name)) return std::nullopt;
  return resolve_model(name, "model");
}
std::optional<Cluster> builtin_cluster(const std::string& name) {
  if (!find_builtin_cluster(name)) return std::nullopt;
  return resolve_cluster(name, "cluster");
}

}  // namespace

Training default_training(const Model& m) {
  // The loader's own defaults, from a training map that gives only the required keys.
  const YAML::Node root = YAML::Load("training: {seq_length: 1, global_batch_size: 1}");
  const MapReader r(root, "defaults", "", {"training"});
  Training t;
  load_training(r, "defaults", m, 1, &t);
  return t;
}

Spec load_spec_file(const std::string& path) { return load_spec_text(read_text_file(path), path); }

Spec load_spec_text(const std::string& text, const std::string& path) {
  const YAML::Node root = parse_yaml(text, path);
  const MapReader r(root, path, "",
                    {"model", "cluster", "num_nodes", "training", "memory_headroom", "search",
                     "layout"});
  Spec s;
  s.model = load_part<Model>(r, "model", path, load_model_file, model_from_yaml, builtin_model, builtin_model_names());
  if (s.model.hybrid())
    try {
      refuse_unplanned(s.model, "model");
    } catch (const SpecError& e) {
      throw SpecError(path, r.line("model"), "model", e.what());
    }
  s.cluster = load_part<Cluster>(r, "cluster", path, load_cluster_file, cluster_from_yaml, builtin_cluster,
                                 builtin_gpu_names());
  s.num_nodes = capped(r, "num_nodes", r.get_int("num_nodes", 1), kMaxGpus / s.cluster.gpus_per_node);
  load_training(r, path, s.model, s.num_gpus(), &s.training, &s.cluster.gpu);
  if (s.training.fp8 && s.cluster.gpu.peak_tflops_fp8 <= 0)
    throw SpecError(path, 0, "training.fp8",
                    "GPU " + s.cluster.gpu.name + " has no FP8 peak (cluster gpu.peak_tflops_fp8); FP8 needs Hopper or later");
  s.memory_headroom = r.opt_number("memory_headroom", 0.05, 0.0, 1.0, false);
  load_search(r, path, &s.search);
  if (r.has("layout")) {
    s.default_layout = r.get_string("layout");
    try {
      (void)parse_layout(*s.default_layout);
    } catch (const LayoutError& e) {
      throw SpecError(path, r.line("layout"), "layout." + e.field(), e.what());
    }
  }
  return s;
}

}  // namespace paraplan
