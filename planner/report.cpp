#include "planner/report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "costmodel/frameworks/profile.hpp"
#include "costmodel/schedule.hpp"
#include "costmodel/time.hpp"

namespace paraplan {

using nlohmann::json;

bool parse_format(const std::string& s, Format* out) {
  if (s == "table") *out = Format::kTable;
  else if (s == "json") *out = Format::kJson;
  else if (s == "markdown" || s == "md") *out = Format::kMarkdown;
  else if (s == "csv") *out = Format::kCsv;
  else return false;
  return true;
}

std::string gib(std::int64_t bytes, int decimals) {
  return fmt::format("{:.{}f}", double(bytes) / kGiB, decimals);
}

json memory_json(const MemoryBreakdown& m) {
  json j = json::object();
  for (int c = 0; c < kNumCategories; ++c) j[category_name(Category(c))] = m.bytes[c];
  j["total"] = m.total();
  // The three figures a run reports (torch.cuda.max_memory_allocated,
  // max_memory_reserved, and nvidia-smi's used memory = what must fit).
  j["held_for_streams_bytes"] = m.held_for_streams;
  j["held_wanted_bytes"] = m.held_wanted;
  j["allocated_bytes"] = m.allocated();
  j["reserved_bytes"] = m.reserved();
  j["device_bytes"] = m.device();
  return j;
}

json layout_json(const Spec& s, const Layout& l, const MemoryEstimate& e) {
  json j;
  j["layout"] = to_string(l);
  j["fits"] = e.fits;
  j["gpu_memory_bytes"] = e.gpu_bytes;
  j["peak_memory_bytes"] = e.peak_bytes;
  j["allocated_bytes"] = e.allocated_bytes;
  j["reserved_bytes"] = e.reserved_bytes;
  j["device_bytes"] = e.device_bytes;
  j["headroom_bytes"] = e.headroom_bytes;
  j["usable_memory_bytes"] = e.usable_bytes;
  j["margin_bytes"] = e.margin_bytes;
  j["with_held_bytes"] = e.with_held_bytes;
  j["flush_risk"] = e.flush_risk;
  j["heaviest_stage"] = e.heaviest_stage;
  j["heaviest_rank"] = e.heaviest_rank;
  j["memory"] = memory_json(e.heaviest());
  json stages = json::array();
  for (size_t i = 0; i < e.stages.size(); ++i)
    stages.push_back({{"stage", i},
                      {"layers", stage_layers(s.model, l, int(i))},
                      {"memory", memory_json(e.stages[i])}});
  j["stages"] = stages;
  j["params"] = {{"total", e.params_total}, {"per_rank", e.params_per_rank}};
  j["model"] = s.model.name;
  j["cluster"] = s.cluster.name;
  j["network"] = network_json(s.cluster);
  j["framework"] = framework_name(s.training.framework);
  j["num_gpus"] = s.num_gpus();
  j["num_microbatches"] = num_microbatches(s, l);
  return j;
}

std::string network_text(const Cluster& c) {
  const Link& n = c.inter_node;
  if (n.nics_per_node > 0)
    return fmt::format("network {:.4g} GB/s per GPU per direction ({} x {:g} Gb/s NICs per node / {} GPUs)", n.bandwidth_gbs,
                       n.nics_per_node, n.nic_gbps, c.gpus_per_node);
  return fmt::format("network {:.4g} GB/s per GPU per direction (inter_node.bandwidth_gbs; a node's NICs / its GPUs)",
                     n.bandwidth_gbs);
}

nlohmann::json network_json(const Cluster& c) {
  nlohmann::json j = {{"inter_node_gbs_per_gpu", c.inter_node.bandwidth_gbs}};
  if (c.inter_node.nics_per_node > 0) {
    j["nics_per_node"] = c.inter_node.nics_per_node;
    j["nic_gbps"] = c.inter_node.nic_gbps;
  }
  return j;
}

namespace {

const char* kShort[kNumCategories] = {"weights", "grads", "optim", "activ",
                                      "transient", "comm", "runtime", "frag"};

// The gradient buffer the framework keeps (its first gradient buffer), e.g.
// Megatron's fp32 main_grad whatever grad_dtype says when the spec leaves it out.
std::string grad_buffer_text(const Spec& s, const Layout& l) {
  StateBuffers b;
  profile(s.training.framework).state_buffers(s.training, l, &b);
  for (const StateBuffer& x : b)
    if (x.category == Category::kGradients) return fmt::format("grads: {} ({:g} B/param)", x.name, x.bytes_per_param);
  return "no gradient buffer";
}

std::string header(const Spec& s, const Layout& l, const MemoryEstimate& e) {
  std::string o;
  o += fmt::format("model    {} ({:.3g}B params)\n", s.model.name, double(e.params_total) / 1e9);
  o += fmt::format("cluster  {} x {} = {} GPUs ({}, {:.2f} GiB); {}\n", s.num_nodes, s.cluster.name,
                   s.num_gpus(), s.cluster.gpu.name, s.cluster.gpu.memory_gib, network_text(s.cluster));
  o += fmt::format("layout   {}\n", to_string(l));
  o += fmt::format("framework {} ({})\n", framework_name(s.training.framework), profile(s.training.framework).description);
  o += fmt::format("training seq {}, global batch {} = {} micro-batches of {} per dp rank, {}, "
                   "{}, {} ({:g} B/param){}\n",
                   s.training.seq_length, s.training.global_batch_size, num_microbatches(s, l),
                   l.mbs, dtype_name(s.training.precision), grad_buffer_text(s, l),
                   optimizer_name(s.training.optimizer), s.training.optimizer_state_bytes,
                   s.training.flash_attention ? ", flash attention" : "");
  return o;
}

// Blocks held only for a stream count in reserved but not on the
// device: a failed cudaMalloc frees them first (MemoryBreakdown). Said where the
// figures would otherwise read as reserved > what must fit.
static std::string held_text(const MemoryEstimate& e) {
  const std::int64_t held = e.heaviest().held_for_streams;
  return held > 0 ? fmt::format(", {} of them blocks held for the NCCL stream, which a failed allocation frees first",
                                gib(held))
                  : std::string();
}

// The allocator-flush warning as a line of its own ("" when none).
static std::string flush_text(const MemoryEstimate& e) {
  const std::string w = memory_warning_message(e);
  return w.empty() ? w : "warning: " + w + "\n";
}

std::string verdict(const Spec& s, const MemoryEstimate& e) {
  return fmt::format(
      "GPU {} GiB - headroom {:g}% ({} GiB) = usable {} GiB; heaviest rank {} (stage {}): {} GiB on the device "
      "(allocated {}, reserved {}{}) -> {} (margin {} GiB)\n",
      gib(e.gpu_bytes), s.memory_headroom * 100, gib(e.headroom_bytes), gib(e.usable_bytes),
      e.heaviest_rank, e.heaviest_stage, gib(e.device_bytes), gib(e.allocated_bytes), gib(e.reserved_bytes),
      held_text(e), e.fits ? "FITS" : "DOES NOT FIT",
      gib(e.margin_bytes)) + flush_text(e);
}

std::string formulas_text(const Spec& s, const Layout& l, int stage, bool markdown) {
  std::string o = markdown ? fmt::format("\n### Stage {} terms\n\n| category | term | formula | GiB | source |\n|---|---|---|---:|---|\n", stage)
                           : fmt::format("\nstage {} terms:\n", stage);
  for (const Term& t : stage_terms(s, l, stage)) {
    if (markdown)
      o += fmt::format("| {} | {} | `{}` | {} | {} |\n", category_name(t.category), t.name, t.formula,
                       gib(t.bytes), t.source);
    else
      o += fmt::format("  {:<13} {:<36} {} = {} GiB\n", category_name(t.category), t.name,
                       t.formula, gib(t.bytes, 3)) +
           (t.source.empty() ? "" : fmt::format("  {:<13} {:<36}   source: {}\n", "", "", t.source));
  }
  // The time of one micro-batch on the same stage, term by term.
  const std::vector<TimeTerm> terms = stage_time_terms(s, l, stage);
  double sum = 0;
  for (const TimeTerm& t : terms) sum += t.seconds;
  o += markdown ? fmt::format("\n### Stage {} time, one micro-batch ({:.3f} ms)\n\n| term | formula | ms | source |\n|---|---|---:|---|\n",
                              stage, sum * 1e3)
                : fmt::format("\nstage {} time, one micro-batch ({:.3f} ms):\n", stage, sum * 1e3);
  const auto rows = [&](const std::vector<TimeTerm>& list) {
    for (const TimeTerm& t : list) {
      if (markdown)
        o += fmt::format("| {} | `{}` | {:.3f} | {} |\n", t.name, t.formula, t.seconds * 1e3, t.source);
      else
        o += fmt::format("  {:<32} {} = {:.3f} ms\n", t.name, t.formula, t.seconds * 1e3) +
             (t.source.empty() ? "" : fmt::format("  {:<32}   source: {}\n", "", t.source));
    }
  };
  rows(terms);
  // Its data-parallel collectives over the whole step.
  const std::vector<TimeTerm> dp = stage_dp_terms(s, l, stage);
  if (!dp.empty())
    o += markdown ? fmt::format("\n### Stage {} data-parallel collectives, one step\n\n| term | formula | ms | source |\n|---|---|---:|---|\n", stage)
                  : fmt::format("\nstage {} data-parallel collectives, one step:\n", stage);
  rows(dp);
  return o;
}

}  // namespace

json explain_json(const Spec& s, const Layout& l, const MemoryEstimate& e, const ExplainOptions& opt) {
  json j = layout_json(s, l, e);
  if (opt.formulas) {
    const int st = opt.stage >= 0 ? opt.stage : e.heaviest_stage;
    json terms = json::array();
    for (const Term& t : stage_terms(s, l, st))
      terms.push_back({{"category", category_name(t.category)},
                       {"term", t.name},
                       {"formula", t.formula},
                       {"bytes", t.bytes},
                       {"source", t.source},
                       {"held_for_streams", t.held_for_streams}});
    j["terms"] = {{"stage", st}, {"items", terms}};
    const auto items = [](const std::vector<TimeTerm>& list) {
      json a = json::array();
      for (const TimeTerm& t : list)
        a.push_back({{"term", t.name}, {"formula", t.formula}, {"seconds", t.seconds}, {"source", t.source}});
      return a;
    };
    j["time_terms"] = {{"stage", st}, {"per", "micro-batch"}, {"items", items(stage_time_terms(s, l, st))}};
    j["dp_time_terms"] = {{"stage", st}, {"per", "step"}, {"items", items(stage_dp_terms(s, l, st))}};
  }
  return j;
}

std::string render_explain(Format f, const Spec& s, const Layout& l, const MemoryEstimate& e,
                           const ExplainOptions& opt) {
  if (f == Format::kJson) return explain_json(s, l, e, opt).dump(2) + "\n";
  const int st = opt.stage >= 0 ? opt.stage : e.heaviest_stage;
  std::string o;
  if (f == Format::kMarkdown || f == Format::kCsv) {
    const bool md = f == Format::kMarkdown;
    if (md) {
      o += "## paraplan explain\n\n```\n" + header(s, l, e) + "```\n\n| stage | layers |";
      for (auto c : kShort) o += fmt::format(" {} |", c);
      o += " total (GiB) |\n|---:|---:|";
      for (int i = 0; i <= kNumCategories; ++i) o += "---:|";
      o += "\n";
    } else {
      o += "stage";
      for (int c = 0; c < kNumCategories; ++c) o += fmt::format(",{}_bytes", category_name(Category(c)));
      o += ",total_bytes,layers\n";
    }
    for (size_t i = 0; i < e.stages.size(); ++i) {
      const int layers = stage_layers(s.model, l, int(i));
      o += md ? fmt::format("| {}{} | {} |", i, int(i) == e.heaviest_stage ? " *" : "", layers) : fmt::format("{}", i);
      for (auto b : e.stages[i].bytes) o += md ? fmt::format(" {} |", gib(b)) : fmt::format(",{}", b);
      o += md ? fmt::format(" **{}** |\n", gib(e.stages[i].total()))
              : fmt::format(",{},{}\n", e.stages[i].total(), layers);
    }
    if (md) {
      o += "\n";
      o += verdict(s, e);
      if (opt.formulas) o += formulas_text(s, l, st, true);
    }
    return o;
  }
  o += header(s, l, e) + "\n";
  // GiB for real models, MiB for the small ones tests and the CPU backend use.
  const bool mib = e.peak_bytes < std::int64_t(kGiB);
  const double unit = mib ? 1024.0 * 1024.0 : kGiB;
  const auto cell = [&](std::int64_t b) { return fmt::format("{:.2f}", double(b) / unit); };
  o += fmt::format("{:>5} {:>6}", "stage", "layers");
  for (auto c : kShort) o += fmt::format(" {:>9}", c);
  o += fmt::format(" {:>9}   ({})\n", "total", mib ? "MiB" : "GiB");
  for (size_t i = 0; i < e.stages.size(); ++i) {
    o += fmt::format("{:>5} {:>6}", i, stage_layers(s.model, l, int(i)));
    for (auto b : e.stages[i].bytes) o += fmt::format(" {:>9}", cell(b));
    o += fmt::format(" {:>9}{}\n", cell(e.stages[i].total()), int(i) == e.heaviest_stage ? "  <- heaviest" : "");
  }
  o += "\n";
      o += verdict(s, e);
  if (opt.formulas) o += formulas_text(s, l, st, false);
  return o;
}

std::string check_summary(const Spec& s, const Layout& l, const MemoryEstimate& e) {
  const MemoryBreakdown& m = e.heaviest();
  int top = 0;
  for (int c = 1; c < kNumCategories; ++c)
    if (m.bytes[c] > m.bytes[top]) top = c;
  const std::string dominant = fmt::format("{} {} GiB ({:.0f}%)", category_name(Category(top)),
                                           gib(m.bytes[top]), 100.0 * double(m.bytes[top]) / double(m.total()));
  if (e.fits)
    return fmt::format("fits: {} peak {} GiB on the device (allocated {}, reserved {}{}) of {} GiB usable on {} (stage {}), "
                       "margin {} GiB; largest term {}",
                       to_string(l), gib(e.peak_bytes), gib(e.allocated_bytes), gib(e.reserved_bytes), held_text(e), gib(e.usable_bytes),
                       s.cluster.gpu.name, e.heaviest_stage, gib(e.margin_bytes), dominant);
  return fmt::format("does not fit: {} needs {} GiB on rank {} (stage {}) but {} GiB are usable "
                     "({} GiB GPU, {:g}% headroom): over by {} GiB; largest term {}",
                     to_string(l), gib(e.peak_bytes), e.heaviest_rank, e.heaviest_stage,
                     gib(e.usable_bytes), gib(e.gpu_bytes), s.memory_headroom * 100,
                     gib(-e.margin_bytes), dominant);
}

}  // namespace paraplan
