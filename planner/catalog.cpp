#include "planner/catalog.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "planner/spec_loader.hpp"
#include "planner/yaml_reader.hpp"

namespace paraplan {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return !path.empty() && std::filesystem::exists(path, ec);
}

}  // namespace

std::span<const EmbeddedFile> builtin_model_files() {
  return {catalog_data::k_models, catalog_data::k_num_models};
}
std::span<const EmbeddedFile> builtin_cluster_files() {
  return {catalog_data::k_clusters, catalog_data::k_num_clusters};
}

std::string builtin_label(const EmbeddedFile& f) { return std::string("built-in ") + f.path; }

// Every embedded file of one kind, parsed once.
template <class Entry, class Parse>
std::vector<Entry> parse_all(std::span<const EmbeddedFile> files, Parse parse) {
  std::vector<Entry> v;
  for (const EmbeddedFile& f : files) {
    const std::string label = builtin_label(f);
    v.push_back({&f, parse(parse_yaml(f.text, label), label, "")});
  }
  return v;
}

const std::vector<CatalogModel>& builtin_models() {
  static const std::vector<CatalogModel> models = parse_all<CatalogModel>(builtin_model_files(), model_from_yaml);
  return models;
}

const std::vector<CatalogCluster>& builtin_clusters() {
  static const std::vector<CatalogCluster> clusters =
      parse_all<CatalogCluster>(builtin_cluster_files(), cluster_from_yaml);
  return clusters;
}

std::string gpu_short_name(const Cluster& c) {
  const std::string g = lower(c.gpu.name);
  return g.substr(0, g.find_first_of("- _"));
}

const EmbeddedFile* find_builtin_model(const std::string& name) {
  const std::string n = lower(name);
  for (const CatalogModel& m : builtin_models())
    if (n == lower(m.file->name) || n == lower(m.model.name)) return m.file;
  return nullptr;
}

// A file or cluster name first; then a GPU's name, which picks the first
// cluster of that GPU in file-name order (h100: dgx-h100, not h100-aws-p5).
const EmbeddedFile* find_builtin_cluster(const std::string& name) {
  const std::string n = lower(name);
  for (const CatalogCluster& c : builtin_clusters())
    if (n == lower(c.file->name) || n == lower(c.cluster.name)) return c.file;
  for (const CatalogCluster& c : builtin_clusters())
    if (n == lower(c.cluster.gpu.name) || n == gpu_short_name(c.cluster)) return c.file;
  return nullptr;
}

std::string builtin_model_names() {
  std::string s;
  for (const EmbeddedFile& f : builtin_model_files()) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

std::string builtin_gpu_names() {
  std::string s;
  for (const CatalogCluster& c : builtin_clusters())
    s += (s.empty() ? "" : ", ") + gpu_short_name(c.cluster) + " (" + c.file->name + ")";
  return s;
}

void refuse_unplanned(const Model& m, const std::string& field) {
  if (m.hybrid())
    throw SpecError(field, 0, "",
                    "'" + SpecError::printable(m.name, 80) + "' is a Mamba-2 hybrid (hybrid_override_pattern " +
                        SpecError::printable(m.hybrid_pattern, 60) + "): its parameters are counted (paraplan models --model), but "
                        "the Mamba-2 mixers' activations, state-space scan and conv kernels are not modelled yet, so its memory "
                        "and time cannot be predicted; expected a transformer");
}

Model resolve_model(const std::string& name_or_path, const std::string& field) {
  if (file_exists(name_or_path)) return load_model_file(name_or_path);
  if (const EmbeddedFile* f = find_builtin_model(name_or_path)) {
    for (const CatalogModel& m : builtin_models())
      if (m.file == f) return m.model;
  }
  throw SpecError(field, 0, "",
                  "no file and no built-in model named '" + SpecError::printable(name_or_path, 120) +
                      "'; expected a path to a model YAML or HuggingFace config.json, or one of: " +
                      builtin_model_names() + " (paraplan models lists them)");
}

Cluster resolve_cluster(const std::string& name_or_path, const std::string& field) {
  if (file_exists(name_or_path)) return load_cluster_file(name_or_path);
  if (const EmbeddedFile* f = find_builtin_cluster(name_or_path)) {
    for (const CatalogCluster& c : builtin_clusters())
      if (c.file == f) return c.cluster;
  }
  throw SpecError(field, 0, "",
                  "no file and no built-in GPU or cluster named '" + SpecError::printable(name_or_path, 120) +
                      "'; expected a path to a cluster YAML or one of: " + builtin_gpu_names() +
                      " (paraplan gpus lists them)");
}

}  // namespace paraplan

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "planner/report.hpp"

namespace paraplan {

std::string render_models(Format f) {
  nlohmann::json j = nlohmann::json::array();
  for (const CatalogModel& c : builtin_models()) {
    const Model& m = c.model;
    j.push_back({{"name", c.file->name},
                 {"model", m.name},
                 {"parameters", total_params(m)},
                 {"layers", m.num_layers},
                 {"hidden_size", m.hidden_size},
                 {"attention_heads", m.num_attention_heads},
                 {"kv_heads", m.num_kv_heads},
                 {"ffn_hidden_size", m.ffn_hidden_size},
                 {"vocab_size", m.vocab_size},
                 {"max_seq_length", max_seq_length(m)},
                 {"file", c.file->path},
                 {"source", m.source}});
  }
  if (f == Format::kJson) return j.dump(2) + "\n";
  std::string o;
  const bool md = f == Format::kMarkdown, csv = f == Format::kCsv;
  if (csv) o = "name,model,parameters,layers,hidden_size,attention_heads,kv_heads,ffn_hidden_size,vocab_size,source\n";
  else if (md) o = "| name | model | parameters | layers | hidden | heads (kv) | ffn | vocab | source |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n";
  else o = fmt::format("{:<18} {:<18} {:>10} {:>6} {:>7} {:>10} {:>7} {:>7}  {}\n", "name", "model", "params",
                       "layers", "hidden", "heads(kv)", "ffn", "vocab", "source");
  for (const nlohmann::json& m : j) {
    const double params = m["parameters"].get<double>();
    const std::string p = params >= 1e9 ? fmt::format("{:.2f}B", params / 1e9) : fmt::format("{:.1f}M", params / 1e6);
    const std::string heads = fmt::format("{}({})", m["attention_heads"].get<int>(), m["kv_heads"].get<int>());
    const std::string src = m["source"].get<std::string>();
    if (csv)
      o += fmt::format("{},{},{},{},{},{},{},{},{},\"{}\"\n", m["name"].get<std::string>(), m["model"].get<std::string>(),
                       m["parameters"].get<std::int64_t>(), m["layers"].get<int>(), m["hidden_size"].get<int>(),
                       m["attention_heads"].get<int>(), m["kv_heads"].get<int>(), m["ffn_hidden_size"].get<int>(),
                       m["vocab_size"].get<int>(), src);
    else
      o += fmt::format(fmt::runtime(md ? "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} |\n"
                                       : "{:<18} {:<18} {:>10} {:>6} {:>7} {:>10} {:>7} {:>7}  {}\n"),
                       m["name"].get<std::string>(), m["model"].get<std::string>(), p, m["layers"].get<int>(),
                       m["hidden_size"].get<int>(), heads, m["ffn_hidden_size"].get<int>(), m["vocab_size"].get<int>(), src);
  }
  if (!csv) o += fmt::format("{}{} built-in models: --model NAME, or model: NAME in a spec; "
                             "--model also takes a model YAML or a HuggingFace config.json\n", md ? "\n" : "\n", j.size());
  return o;
}

std::string render_model(const Model& m, Format f) {
  const ParamCounts c = count_params(m);
  nlohmann::ordered_json j;
  j["model"] = m.name;
  j["parameters"] = c.total;
  j["active_parameters"] = c.active;
  j["mtp_parameters"] = c.mtp;
  j["layers"] = m.num_layers;
  j["hidden_size"] = m.hidden_size;
  j["attention_heads"] = m.num_attention_heads;
  j["kv_heads"] = m.num_kv_heads;
  j["ffn_hidden_size"] = m.ffn_hidden_size;
  j["vocab_size"] = m.vocab_size;
  if (m.is_moe())
    j["moe"] = {{"experts", m.num_experts},           {"experts_per_token", m.experts_per_token},
                {"expert_ffn_hidden_size", m.moe_ffn_hidden_size}, {"shared_experts", m.num_shared_experts},
                {"first_dense_layers", m.first_dense_layers},       {"moe_layer_freq", m.moe_layer_freq}};
  if (m.mla())
    j["mla"] = {{"q_lora_rank", m.q_lora_rank},           {"kv_lora_rank", m.kv_lora_rank},
                {"qk_nope_head_dim", m.qk_nope_head_dim}, {"qk_rope_head_dim", m.qk_rope_head_dim},
                {"v_head_dim", m.v_head_dim}};
  const auto blocks = [&](char ch) { return std::count(m.hybrid_pattern.begin(), m.hybrid_pattern.end(), ch); };
  if (m.hybrid())
    j["hybrid"] = {{"pattern", m.hybrid_pattern},       {"mamba_layers", blocks('M')},   {"attention_layers", blocks('*')},
                   {"mlp_layers", blocks('-')},         {"mamba_heads", m.mamba_heads}, {"mamba_head_dim", m.mamba_head_dim},
                   {"ssm_state_size", m.mamba_state},   {"n_groups", m.mamba_groups},   {"conv_kernel", m.mamba_conv_kernel},
                   {"mamba_mixer_parameters", mamba_mixer_params(m)}};
  if (m.published_params) j["published_parameters"] = m.published_params;
  // Every model read is plannable (mixtures of experts under Megatron-LM's profile, issue 16) but a Mamba-2
  // hybrid, which is counted only (refuse_unplanned).
  j["plannable"] = !m.hybrid();
  j["source"] = m.source;
  if (f == Format::kJson) return j.dump(2) + "\n";
  const auto b = [](std::int64_t n) { return fmt::format("{:.3f} B ({})", double(n) / 1e9, n); };
  std::string o = fmt::format("{}: {} parameters", m.name, b(c.total));
  if (m.is_moe()) o += fmt::format(", {} active per token", b(c.active));
  if (c.mtp) o += fmt::format(" (+ {} in {} multi-token-prediction module(s), embedding and head shared)", b(c.mtp), m.mtp_layers);
  o += fmt::format("\n  {} layers, hidden {}, {} heads ({} kv), ffn {}, vocab {}\n", m.num_layers, m.hidden_size,
                   m.num_attention_heads, m.num_kv_heads, m.ffn_hidden_size, m.vocab_size);
  if (m.is_moe())
    o += fmt::format("  mixture of experts: {} routed experts of ffn {}, top {}{}, MoE from layer {} every {}\n",
                     m.num_experts, m.moe_ffn_hidden_size, m.experts_per_token,
                     m.num_shared_experts ? fmt::format(", {} shared", m.num_shared_experts) : "", m.first_dense_layers,
                     m.moe_layer_freq);
  if (m.mla())
    o += fmt::format("  multi-latent attention: q_lora_rank {}, kv_lora_rank {}, qk {} + {} (rope), v {}\n", m.q_lora_rank,
                     m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim);
  if (m.hybrid())
    o += fmt::format("  Mamba-2 hybrid: {} Mamba-2, {} attention and {} MLP blocks; Mamba-2 mixer of {} heads x {}, state {}, "
                     "{} groups, conv {} ({} parameters each); counted only: its memory and time are not modelled yet\n",
                     blocks('M'), blocks('*'), blocks('-'), m.mamba_heads, m.mamba_head_dim, m.mamba_state, m.mamba_groups,
                     m.mamba_conv_kernel, mamba_mixer_params(m));
  if (m.mla())
    o += "  planned as Megatron-core runs it (framework megatron, layout fields ep and etp); validate's executors run dense "
         "models only\n";
  else if (m.is_moe())
    o += "  planned as Megatron-core (framework megatron), torchtitan (fsdp, tp = 1) or DeepSpeed-MoE (deepspeed, tp = 1, "
         "top-k >= 2, no shared experts) runs it, layout fields ep and etp; validate's executors run dense models only\n";
  return o;
}

std::string render_gpus(Format f) {
  nlohmann::json j = nlohmann::json::array();
  for (const CatalogCluster& c : builtin_clusters()) {
    const Cluster& k = c.cluster;
    // The name --gpu takes for it: the GPU's short name where that picks this
    // cluster, else the cluster's file name (another cluster of the same GPU).
    const std::string short_name = gpu_short_name(k);
    j.push_back({{"name", find_builtin_cluster(short_name) == c.file ? short_name : std::string(c.file->name)},
                 {"cluster", c.file->name},
                 {"gpu", k.gpu.name},
                 {"memory_gib", k.gpu.memory_gib},
                 {"peak_tflops_bf16", k.gpu.peak_tflops_bf16},
                 {"bf16", k.gpu.bf16},
                 {"peak_tflops_fp8", k.gpu.peak_tflops_fp8},
                 {"hbm_bandwidth_gbs", k.gpu.hbm_bandwidth_gbs},
                 {"gpus_per_node", k.gpus_per_node},
                 {"intra_node_gbs_per_gpu", k.intra_node.bandwidth_gbs},
                 {"inter_node_gbs_per_gpu", k.inter_node.bandwidth_gbs},
                 {"file", c.file->path},
                 {"source", k.source}});
  }
  if (f == Format::kJson) return j.dump(2) + "\n";
  std::string o;
  const bool md = f == Format::kMarkdown, csv = f == Format::kCsv;
  if (csv) o = "name,cluster,gpu,memory_gib,peak_tflops_bf16,peak_tflops_fp8,hbm_bandwidth_gbs,gpus_per_node,intra_node_gbs_per_gpu,inter_node_gbs_per_gpu,source,bf16\n";
  else if (md) o = "| name | cluster | GPU | memory GiB | bf16 TFLOP/s | fp8 TFLOP/s | HBM GB/s | GPUs/node | NVLink GB/s/GPU | network GB/s/GPU |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  else o = fmt::format("{:<11} {:<18} {:<16} {:>8} {:>9} {:>8} {:>8} {:>6} {:>10} {:>10}\n", "name", "cluster", "gpu",
                       "mem GiB", "bf16 TF", "fp8 TF", "HBM GB/s", "/node", "intra GB/s", "inter GB/s");
  bool fp16_only = false;
  for (const nlohmann::json& g : j) {
    const auto num = [&](const char* k) { return g[k].get<double>(); };
    const bool bf16 = g["bf16"].get<bool>();
    fp16_only = fp16_only || !bf16;
    // The 16-bit peak, marked where it is FP16's (the GPU has no BF16).
    const std::string peak16 = fmt::format("{:g}{}", num("peak_tflops_bf16"), bf16 || csv ? "" : "*");
    if (csv)
      o += fmt::format("{},{},{},{:g},{:g},{:g},{:g},{},{:g},{:g},\"{}\",{}\n", g["name"].get<std::string>(),
                       g["cluster"].get<std::string>(), g["gpu"].get<std::string>(), num("memory_gib"), num("peak_tflops_bf16"),
                       num("peak_tflops_fp8"), num("hbm_bandwidth_gbs"), g["gpus_per_node"].get<int>(),
                       num("intra_node_gbs_per_gpu"), num("inter_node_gbs_per_gpu"), g["source"].get<std::string>(),
                       bf16 ? 1 : 0);
    else
      o += fmt::format(fmt::runtime(md ? "| `{}` | {} | {} | {:g} | {} | {:g} | {:g} | {} | {:g} | {:g} |\n"
                                       : "{:<11} {:<18} {:<16} {:>8g} {:>9} {:>8g} {:>8g} {:>6} {:>10g} {:>10g}\n"),
                       g["name"].get<std::string>(), g["cluster"].get<std::string>(), g["gpu"].get<std::string>(),
                       num("memory_gib"), peak16, num("peak_tflops_fp8"), num("hbm_bandwidth_gbs"),
                       g["gpus_per_node"].get<int>(), num("intra_node_gbs_per_gpu"), num("inter_node_gbs_per_gpu"));
  }
  if (!csv)
    o += fmt::format("\n{} built-in clusters: --gpu NAME (or the cluster's name), or cluster: NAME in a spec; "
                     "bandwidths are per GPU and per direction; sources are in each file{}\n", j.size(),
                     fp16_only ? "\n* FP16: the GPU has no BF16, so runs on it train in fp16 (the default there) or fp32"
                               : "");
  return o;
}

}  // namespace paraplan
