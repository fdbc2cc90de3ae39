#include "planner/spec_inputs.hpp"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/catalog.hpp"
#include "planner/search.hpp"
#include "planner/spec_error.hpp"
#include "planner/spec_loader.hpp"

namespace paraplan {

int default_seq_length(const Model& m) { return std::min(kDefaultSeqLength, max_seq_length(m)); }

int default_global_batch(int seq_length, int num_gpus) {
  const std::int64_t seqs = std::int64_t(std::ceil(kDefaultBatchTokens / std::max(1, seq_length)));
  const std::int64_t g = std::max(1, num_gpus);
  const std::int64_t b = (std::max<std::int64_t>(seqs, 1) + g - 1) / g * g;
  return int(std::min<std::int64_t>(b, kMaxBatch / g * g));
}

namespace {

void check_seq(const Model& m, int seq) {
  if (seq > max_seq_length(m)) throw SpecError("--seq-length", 0, "", seq_length_limit_message(m));
}

// --gpus N on a cluster of G GPUs per node: N/G nodes; fewer than one node's
// worth is one node of N GPUs, unless --gpus-per-node fixed the node size.
void apply_gpus(Spec* s, int gpus, bool per_node_given) {
  const int g = s->cluster.gpus_per_node;
  if ((gpus < g && per_node_given) || !with_gpus(*s, gpus, s))
    throw SpecError("--gpus", 0, "",
                    fmt::format("expected a multiple of the {} GPUs per node of {} (or fewer than one node), got {}; "
                                "--gpus-per-node sets another node size",
                                g, s->cluster.name, gpus));
}

// A model file given where a plan spec goes (`paraplan plan config.json`):
// say what to run instead of "architectures: unknown key".
void refuse_model_as_spec(const std::string& path) {
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const SpecError&) {
    return;  // load_spec_file says why
  }
  // A HuggingFace config is JSON (quoted keys) with no `model:` of its own: a YAML flow-style spec
  // (`{cluster: ..., model: ...}`, issue 46) or a spec written as JSON is still a spec.
  bool json = false;
  if (nlohmann::json::accept(text)) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    json = j.is_object() && !j.contains("model");
  }
  const bool yaml_model = text.find("\nnum_layers:") != std::string::npos || text.rfind("num_layers:", 0) == 0;
  const bool has_model = text.find("\nmodel:") != std::string::npos || text.rfind("model:", 0) == 0;
  if (json || (yaml_model && !has_model))
    throw SpecError(path, 0, "", std::string("is a model (") + (json ? "a HuggingFace config.json" : "a model YAML") +
                                     "), not a plan spec; run e.g. paraplan plan --model " + path +
                                     " --gpus 8 --gpu h100 (paraplan gpus lists the GPUs)");
}

}  // namespace

ResolvedSpec resolve_spec(const SpecInputs& in) {
  ResolvedSpec r;
  Spec& s = r.spec;
  if (in.spec.empty()) {
    std::string missing;
    if (in.model.empty()) missing += " --model";
    if (!in.gpus) missing += " --gpus";
    if (in.gpu.empty()) missing += " --gpu";
    if (!missing.empty())
      throw SpecError("SPEC", 0, "",
                      "expected a SPEC file, or --model, --gpus and --gpu (missing:" + missing +
                          "); e.g. --model llama-3.1-70b --gpus 64 --gpu h100 (paraplan models, paraplan gpus list the names)");
    s.model = resolve_model(in.model, "--model");
    refuse_unplanned(s.model, "--model");
    s.cluster = resolve_cluster(in.gpu, "--gpu");
    s.num_nodes = 1;
    s.training = default_training(s.model);
  } else {
    refuse_model_as_spec(in.spec);
    s = load_spec_file(in.spec);
    if (!in.model.empty()) {
      s.model = resolve_model(in.model, "--model");
      refuse_unplanned(s.model, "--model");
    }
    if (!in.gpu.empty()) s.cluster = resolve_cluster(in.gpu, "--gpu");
  }
  if (!s.cluster.gpu.bf16) {
    // A GPU without BF16 (Volta, Turing) trains in fp16 unless told fp32; a
    // spec that asks for bf16 on it is refused, naming the flag that chose it.
    const std::string why = no_bf16_reason(s.cluster.gpu);
    if (s.training.precision == DType::kBf16 && s.training.precision_given)
      throw SpecError("--gpu", 0, "", why + "; the spec's training.precision is bf16: expected fp16 or fp32");
    if (s.training.grad_dtype_given && s.training.grad_dtype == DType::kBf16)
      throw SpecError("--gpu", 0, "", why + "; the spec's training.grad_dtype is bf16: expected fp16 or fp32");
    if (s.training.grad_reduce_dtype_given && s.training.grad_reduce_dtype == DType::kBf16)
      throw SpecError("--gpu", 0, "", why + "; the spec's training.grad_reduce_dtype is bf16: expected fp16 or fp32");
    if (s.training.precision == DType::kBf16) set_precision(&s.training, DType::kFp16);
  }
  if (in.gpus_per_node) {
    if (*in.gpus_per_node < 1 || *in.gpus_per_node > 1024)
      throw SpecError("--gpus-per-node", 0, "", "expected 1 to 1024 GPUs per node, got " + std::to_string(*in.gpus_per_node));
    s.cluster.gpus_per_node = *in.gpus_per_node;
  }
  if (in.gpus && in.nodes) throw SpecError("--gpus", 0, "", "give --gpus or --nodes, not both");
  if (in.gpus) apply_gpus(&s, *in.gpus, bool(in.gpus_per_node));
  if (in.nodes) {
    if (std::int64_t(*in.nodes) * s.cluster.gpus_per_node > kMaxGpus)
      throw SpecError("--nodes", 0, "",
                      "expected at most " + std::to_string(kMaxGpus / s.cluster.gpus_per_node) + " nodes of " +
                          std::to_string(s.cluster.gpus_per_node) + " GPUs");
    s.num_nodes = *in.nodes;
  }
  if (std::int64_t(s.num_nodes) * s.cluster.gpus_per_node > kMaxGpus)
    throw SpecError(in.gpus ? "--gpus" : "--gpus-per-node", 0, "", "expected at most " + std::to_string(kMaxGpus) + " GPUs");
  if (in.seq) {
    check_seq(s.model, *in.seq);
    s.training.seq_length = *in.seq;
  }
  if (in.gbs) s.training.global_batch_size = *in.gbs;
  if (in.spec.empty()) {
    s.training.seq_length_given = s.training.global_batch_size_given = false;
    if (!in.seq) s.training.seq_length = default_seq_length(s.model);
  }
  // Sequence and batch no spec or flag gave: the defaults, said in the report.
  if (!in.seq && !s.training.seq_length_given) r.defaults["seq_length"] = s.training.seq_length;
  if (!in.gbs && !s.training.global_batch_size_given) {
    // After --gpus / --nodes: a multiple of the GPU count the run has.
    s.training.global_batch_size = default_global_batch(s.training.seq_length, s.num_gpus());
    r.defaults["global_batch_size"] = s.training.global_batch_size;
  }
  if (in.spec.empty()) {
    r.defaults["precision"] = dtype_name(s.training.precision);
    r.defaults["optimizer"] = optimizer_name(s.training.optimizer);
    r.defaults["framework"] = framework_name(s.training.framework);
    r.defaults["memory_headroom"] = s.memory_headroom;
  } else if (!in.model.empty() && s.training.seq_length > max_seq_length(s.model)) {
    throw SpecError("--model", 0, "", "the spec's training.seq_length " + std::to_string(s.training.seq_length) + " is " +
                                          seq_length_limit_message(s.model));
  }
  return r;
}

std::string defaults_text(const nlohmann::json& d) {
  if (d.empty()) return "";
  std::string o;
  const auto add = [&](const std::string& part) { o += (o.empty() ? "" : ", ") + part; };
  if (d.contains("seq_length")) add(fmt::format("seq_length {} (--seq-length)", d["seq_length"].get<int>()));
  if (d.contains("global_batch_size")) {
    const int b = d["global_batch_size"].get<int>();
    add(fmt::format("global_batch_size {} (--global-batch-size; about 4M tokens, a multiple of the GPU count)", b));
  }
  if (d.contains("precision")) add("precision " + d["precision"].get<std::string>());
  if (d.contains("optimizer")) add("optimizer " + d["optimizer"].get<std::string>());
  if (d.contains("framework")) add("framework " + d["framework"].get<std::string>() + " (--framework)");
  if (d.contains("memory_headroom")) add(fmt::format("memory headroom {:g}%", 100 * d["memory_headroom"].get<double>()));
  if (d.contains("framework_defaults"))
    for (const auto& f : d["framework_defaults"]) add(f.get<std::string>());
  return "defaults used: " + o;
}

}  // namespace paraplan
