#include "planner/plan_report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "planner/spec_inputs.hpp"

namespace paraplan {

using nlohmann::json;

json time_json(const StepTime& t) {
  return {{"step_s", t.step_s},
          {"clamped_step_s", t.clamped_step_s},
          {"compute_s", t.compute_s},
          {"tp_comm_s", t.tp_comm_s},
          {"pp_comm_s", t.pp_comm_s},
          {"cp_comm_s", t.cp_comm_s},
          {"ep_comm_s", t.ep_comm_s},
          {"dp_comm_s", t.dp_comm_s},
          {"bubble_s", t.bubble_s},
          {"optimizer_s", t.optimizer_s},
          {"host_wait_s", t.host_wait_s},
          {"dp_comm_total_s", t.dp_comm_total_s},
          {"microbatch_s", t.microbatch_s},
          {"microbatches", t.microbatches},
          {"critical_stage", t.critical_stage},
          {"bubble_fraction", t.bubble_fraction},
          {"bubble_fraction_of_ideal", t.bubble_fraction_of_ideal},
          {"bubble_definition", StepTime::kBubbleDefinition},
          {"exposed_comm_fraction", t.exposed_comm_fraction}};
}

json throughput_json(const StepTime& t) {
  return {{"tokens_per_s", t.tokens_per_s},
          {"tflops_per_gpu", t.tflops_per_gpu},
          {"mfu", t.mfu},
          {"hfu", t.hfu}};
}

json flops_json(const StepTime& t) {
  return {{"model_per_step", t.model_flops_per_step},
          {"hardware_per_step", t.hardware_flops_per_step}};
}

void add_time_json(json* j, const StepTime& t, const std::string& memory_warning) {
  (*j)["time"] = time_json(t);
  (*j)["throughput"] = throughput_json(t);
  (*j)["flops"] = flops_json(t);
  std::vector<std::string> w = warning_messages(t);
  if (!memory_warning.empty()) w.insert(w.begin(), memory_warning);
  (*j)["warnings"] = w;
}

std::vector<std::string> candidate_warnings(const Plan& plan, const Candidate& c) {
  std::vector<std::string> w = warning_messages(c.time);
  if (c.flush_risk) w.insert(w.begin(), memory_warning_message(c.peak_bytes, c.with_held_bytes, plan.usable_bytes));
  return w;
}

std::string time_text(const StepTime& t, const Layout& l) {
  const auto pct = [&](double x) { return t.step_s > 0 ? 100.0 * x / t.step_s : 0.0; };
  std::string o = fmt::format(
      "step {:.3f} s = compute {:.3f} ({:.0f}%) + tp comm {:.3f} ({:.0f}%) + pp comm {:.3f} "
      "({:.0f}%){}{} + exposed dp comm {:.3f} ({:.0f}%) + bubble {:.3f} ({:.0f}%) + optimizer {:.3f} "
      "({:.0f}%){}\n",
      t.step_s, t.compute_s, pct(t.compute_s), t.tp_comm_s, pct(t.tp_comm_s), t.pp_comm_s,
      pct(t.pp_comm_s),
      l.cp > 1 ? fmt::format(" + exposed cp ring {:.3f} ({:.0f}%)", t.cp_comm_s, pct(t.cp_comm_s)) : std::string(),
      t.ep_comm_s > 0 ? fmt::format(" + expert all-to-all {:.3f} ({:.0f}%)", t.ep_comm_s, pct(t.ep_comm_s)) : std::string(),
      t.dp_comm_s, pct(t.dp_comm_s), t.bubble_s, pct(t.bubble_s), t.optimizer_s, pct(t.optimizer_s),
      t.host_wait_s > 0 ? fmt::format(" + host dispatch wait {:.3f} ({:.0f}%)", t.host_wait_s, pct(t.host_wait_s))
                        : std::string());
  o += fmt::format(
      "     {:.0f} tokens/s, {:.1f} TFLOP/s per GPU, MFU {:.1f}% (HFU {:.1f}%); {} micro-batches of "
      "{:.3f} s on stage {}",
      t.tokens_per_s, t.tflops_per_gpu, 100 * t.mfu, 100 * t.hfu, t.microbatches, t.microbatch_s,
      t.critical_stage);
  if (l.pp > 1)
    o += fmt::format("; bubble {:.1f}% of the pipeline time ((p-1)/(v*m+p-1)), {:.1f}% of ideal "
                     "((p-1)/(v*m))",
                     100 * t.bubble_fraction, 100 * t.bubble_fraction_of_ideal);
  o += "\n";
  for (const std::string& w : warning_messages(t)) o += "warning: " + w + "\n";
  return o;
}

std::string why_recommended(const Plan& plan) {
  if (plan.feasible == 0) return "no layout fits";
  const Candidate& a = plan.candidates[0];
  if (plan.feasible == 1) return "it is the only layout that fits";
  return why_faster(a, plan.candidates[1], "the runner-up", plan.fastest_ranked_s, plan.usable_bytes);
}

PassedOver passed_over(const Plan& plan) {
  PassedOver r;
  const Candidate* a = plan.recommended();
  if (!a || a->warned()) return r;  // every fitting layout warned: the fastest is recommended
  for (const Candidate& c : plan.candidates) {
    if (!c.fits) break;
    // Faster beyond the band: a warned layout within it would tie on time anyway.
    if (c.warned() && c.ranked_step_s() * (1 + kTieBand) < a->ranked_step_s()) {
      ++r.count;
      if (!r.fastest || c.ranked_step_s() < r.fastest->ranked_step_s()) r.fastest = &c;
    }
  }
  return r;
}

std::string passed_over_text(const Plan& plan) {
  const PassedOver p = passed_over(plan);
  if (!p.fastest) return "";
  const Candidate& a = *plan.recommended();
  const std::vector<std::string> w = candidate_warnings(plan, *p.fastest);
  return fmt::format("{} fitting layout{} predicted faster beyond the band rank{} after it for a warning; the fastest, {}, is predicted "
                     "{:.1f}% faster ({:.3f} s), but {}",
                     p.count, p.count == 1 ? "" : "s", p.count == 1 ? "s" : "", to_string(p.fastest->layout),
                     100 * (a.ranked_step_s() / p.fastest->ranked_step_s() - 1), p.fastest->ranked_step_s(),
                     w.empty() ? std::string("carries a warning") : w[0]);
}

std::string why_expert_parallel(const Plan& plan) {
  const Candidate* a = plan.recommended();
  if (!a) return "";
  // Against the fastest fitting layout of the other kind: ep = 1 for an
  // expert-parallel pick, ep > 1 for a pick that keeps every expert on every rank.
  const bool ep = a->layout.ep > 1;
  for (const Candidate& c : plan.candidates) {
    if (!c.fits) break;
    if ((c.layout.ep > 1) != ep)
      return why_faster(*a, c, ep ? "the best ep = 1 layout" : "the best ep > 1 layout", plan.fastest_ranked_s,
                        plan.usable_bytes);
  }
  if (ep) return "no layout with ep = 1 fits: every expert on every rank of a stage outgrows the memory";
  return "no layout with ep > 1 is among the candidates compared (--top)";
}

namespace {

std::string dimension_names(const Layout& l) {
  std::string o;
  const auto add = [&](bool on, const char* n) {
    if (on) o += (o.empty() ? "" : ", ") + std::string(n);
  };
  add(l.tp > 1, "tp"), add(l.cp > 1, "cp"), add(l.pp > 1, "pp"), add(l.vpp > 1, "vpp"), add(l.ep > 1, "ep");
  return o.empty() ? "data parallelism only" : o;
}

// What criterion t compares, for a against b.
std::string criterion_values(TieBreak t, const Candidate& a, const Candidate& b) {
  switch (t) {
    case TieBreak::kExposedComm:
      return fmt::format("{:.3f} s vs {:.3f} s exposed", a.exposed_comm_s(), b.exposed_comm_s());
    case TieBreak::kDimensions:
      return fmt::format("{} vs {}", dimension_names(a.layout), dimension_names(b.layout));
    case TieBreak::kModelParallel:
      return fmt::format("tp x cp x pp = {} vs {}", a.model_parallel_size(), b.model_parallel_size());
    case TieBreak::kZero: return fmt::format("ZeRO-{} vs ZeRO-{}", a.layout.zero, b.layout.zero);
    case TieBreak::kMemory:
    case TieBreak::kLessMemory: return fmt::format("{} vs {} GiB peak", gib(a.peak_bytes), gib(b.peak_bytes));
    case TieBreak::kStep:
    case TieBreak::kTime: return fmt::format("{:.3f} s vs {:.3f} s", a.ranked_step_s(), b.ranked_step_s());
    case TieBreak::kSame: break;
  }
  return "";
}

}  // namespace

std::string why_faster(const Candidate& a, const Candidate& b, const char* what, double fastest, std::int64_t usable) {
  struct Term {
    const char* name;
    double a, b;
  };
  const Term terms[] = {{"compute", a.time.compute_s, b.time.compute_s},
                        {"tensor-parallel communication", a.time.tp_comm_s, b.time.tp_comm_s},
                        {"pipeline communication", a.time.pp_comm_s, b.time.pp_comm_s},
                        {"context-parallel ring exchange", a.time.cp_comm_s, b.time.cp_comm_s},
                        {"expert-parallel all-to-all", a.time.ep_comm_s, b.time.ep_comm_s},
                        {"exposed data-parallel communication", a.time.dp_comm_s, b.time.dp_comm_s},
                        {"pipeline bubble", a.time.bubble_s, b.time.bubble_s},
                        {"optimizer time", a.time.optimizer_s, b.time.optimizer_s},
                        {"waiting for the host's dispatch", a.time.host_wait_s, b.time.host_wait_s}};
  const Term* best = &terms[0];
  for (const Term& t : terms)
    if (t.b - t.a > best->b - best->a) best = &t;
  const double sa = a.ranked_step_s(), sb = b.ranked_step_s();
  const double gain = sb > 0 ? 100.0 * (sb - sa) / sb : 0;
  const bool judged = a.fits && b.fits && !a.warned() && !b.warned() && fastest > 0;
  const TieBreak t = judged ? deciding_criterion(a, b, fastest, usable) : TieBreak::kTime;
  const std::string clamp = a.time.clamped() || b.time.clamped()
                                ? "; a step predicted above the best published utilization is held to what it allows"
                                : "";
  if (t != TieBreak::kTime) {
    // Within one band of the model's uncertainty: the rule's tie-breaks decide.
    const std::string why = t == TieBreak::kSame ? "; the two are equal on every criterion"
                                                 : fmt::format("; picked for {} ({})", tie_break_name(t),
                                                               criterion_values(t, a, b));
    return fmt::format("it ties with {} {}: their ranked steps, {:.3f} s and {:.3f} s, lie in one {:.0f}% band of the "
                       "fastest ({:.3f} s), within the model's uncertainty{}{}",
                       what, to_string(b.layout), sa, sb, 100 * kTieBand, fastest, clamp, why);
  }
  const std::string beyond = judged ? fmt::format(", beyond the model's {:.0f}% band", 100 * kTieBand) : clamp;
  if (best->b - best->a <= 0 || gain <= 0)
    return fmt::format("it ranks before {} {} ({:.3f} s vs {:.3f} s{}), at {} GiB peak memory vs {} GiB", what,
                       to_string(b.layout), sa, sb, beyond, gib(a.peak_bytes), gib(b.peak_bytes));
  return fmt::format(
      "it is {:.1f}% faster per step than {} {}{}, mostly through less {} ({:.3f} s vs "
      "{:.3f} s), at {} GiB peak memory vs {} GiB",
      gain, what, to_string(b.layout), beyond, best->name, best->a, best->b, gib(a.peak_bytes), gib(b.peak_bytes));
}

namespace {

json candidate_json(const Plan& p, const Candidate& c) {
  json j = {{"layout", to_string(c.layout)},
            {"fits", c.fits},
            {"peak_memory_bytes", c.peak_bytes},
            {"with_held_bytes", c.with_held_bytes},
            {"flush_risk", c.flush_risk},
            {"heaviest_stage", c.peak_stage}};
  add_time_json(&j, c.time);
  j["warnings"] = candidate_warnings(p, c);
  j["ranked_step_s"] = c.ranked_step_s();
  j["exposed_comm_s"] = c.exposed_comm_s();
  j["parallel_dimensions"] = c.parallel_dimensions();
  j["warned"] = c.warned();
  if (c.fits && !c.warned() && p.fastest_ranked_s > 0) j["band"] = time_band(c.ranked_step_s(), p.fastest_ranked_s);
  return j;
}

json rejected_json(const Plan& p) {
  json r = json::object();
  for (int i = 0; i < kNumRejectReasons; ++i) r[reject_name(i)] = p.rejected[i];
  return r;
}

template <class T, class Name>
json list_json(const std::vector<T>& v, Name name) {
  json a = json::array();
  for (const T& x : v) a.push_back(name(x));
  return a;
}

json constraints_json(const SearchSpace& q) {
  json c = json::object();
  const auto ints = [&](const char* k, const std::vector<int>& v) {
    if (!v.empty()) c[k] = list_json(v, [](int x) { return x; });
  };
  ints("dp", q.dp), ints("tp", q.tp), ints("cp", q.cp), ints("pp", q.pp), ints("vpp", q.vpp), ints("sp", q.sp);
  ints("zero", q.zero), ints("mbs", q.mbs), ints("ep", q.ep), ints("etp", q.etp);
  if (!q.recompute.empty()) c["recompute"] = list_json(q.recompute, [](Recompute r) { return recompute_name(r); });
  if (!q.schedule.empty())
    c["schedule"] = list_json(q.schedule, [](Schedule x) { return x == Schedule::kGPipe ? "gpipe" : "1f1b"; });
  if (q.allow_tp_across_nodes) c["allow_tp_across_nodes"] = true;
  return c;
}

// "search limited by the spec: tp [4, 8], pp [2, 4, 8]" ("" when the spec constrains nothing).
std::string constraints_text(const SearchSpace& q) {
  const json c = constraints_json(q);
  if (c.empty()) return "";
  std::string o;
  for (const auto& [k, v] : c.items()) {
    if (k == "allow_tp_across_nodes") continue;
    std::string vals;
    for (const json& x : v) vals += (vals.empty() ? "" : ", ") + (x.is_string() ? x.get<std::string>() : x.dump());
    o += fmt::format("{}{} [{}]", o.empty() ? "" : ", ", k, vals);
  }
  if (q.allow_tp_across_nodes) o += std::string(o.empty() ? "" : "; ") + "tp may span nodes";
  return "search limited by the spec's search: " + o + " (other values not tried)";
}

std::string spec_line(const Spec& s) {
  return fmt::format("{} on {} x {} = {} x {} ({:.2f} GiB), seq {}, global batch {}, {}", s.model.name,
                     s.num_nodes, s.cluster.name, s.num_gpus(), s.cluster.gpu.name,
                     s.cluster.gpu.memory_gib, s.training.seq_length, s.training.global_batch_size,
                     framework_name(s.training.framework));
}

}  // namespace

json plan_json(const Spec& s, const Plan& p, int top, const json& defaults) {
  json j;
  j["model"] = s.model.name;
  j["cluster"] = s.cluster.name;
  j["num_gpus"] = s.num_gpus();
  j["framework"] = framework_name(s.training.framework);
  j["network"] = network_json(s.cluster);
  j["defaults"] = defaults;
  j["enumerated"] = p.enumerated();
  j["evaluated"] = p.evaluated;
  j["invalid"] = p.invalid();
  j["feasible"] = p.feasible;
  j["constraints"] = constraints_json(s.search);
  j["rejected"] = rejected_json(p);
  j["search_seconds"] = p.search_seconds;
  j["decision_rule"] = {{"tie_band", kTieBand},
                        {"fastest_ranked_step_s", p.fastest_ranked_s},
                        {"order",
                         {"fits", "no warning", "band of the fastest ranked step", tie_break_name(TieBreak::kExposedComm),
                          tie_break_name(TieBreak::kDimensions), tie_break_name(TieBreak::kModelParallel),
                          tie_break_name(TieBreak::kZero),
                          tie_break_name(TieBreak::kMemory), tie_break_name(TieBreak::kStep)}}};
  json cands = json::array();
  const int n = std::min<int>(top, int(p.candidates.size()));
  for (int i = 0; i < n; ++i) cands.push_back(candidate_json(p, p.candidates[i]));
  j["candidates"] = cands;
  json pareto = json::array();
  for (int i : p.pareto) pareto.push_back(candidate_json(p, p.candidates[i]));
  j["pareto"] = pareto;
  if (const Candidate* r = p.recommended()) {
    Layout l = r->layout;
    const MemoryEstimate me = estimate_memory(s, l);
    json rec = layout_json(s, l, me);
    add_time_json(&rec, r->time, memory_warning_message(me));
    rec["why"] = why_recommended(p);
    rec["ranked_step_s"] = r->ranked_step_s();
    if (p.feasible > 1)
      rec["deciding_criterion"] =
          tie_break_name(deciding_criterion(*r, p.candidates[1], p.fastest_ranked_s, p.usable_bytes));
    if (const PassedOver po = passed_over(p); po.fastest)
      rec["passed_over"] = {{"count", po.count},
                            {"fastest", to_string(po.fastest->layout)},
                            {"step_s", po.fastest->time.step_s},
                            {"warnings", candidate_warnings(p, *po.fastest)}};
    if (s.model.is_moe()) rec["why_expert_parallel"] = why_expert_parallel(p);
    j["recommended"] = rec;
  } else {
    j["recommended"] = nullptr;
    if (p.evaluated > 0) {
      const Enough e = smallest_fitting_gpus(s);
      j["nothing_fits"] = {{"closest", to_string(p.candidates[0].layout)},
                           {"closest_peak_memory_bytes", p.candidates[0].peak_bytes},
                           {"usable_memory_bytes", usable_memory_bytes(s)},
                           {"smallest_gpus_that_fit", e.gpus ? json(e.gpus) : json(nullptr)},
                           {"layout_there", e.gpus ? json(to_string(e.layout)) : json(nullptr)}};
    }
  }
  return j;
}

std::string render_plan(Format f, const Spec& s, const Plan& p, int top, const json& defaults) {
  if (f == Format::kJson) return plan_json(s, p, top, defaults).dump(2) + "\n";
  const int n = std::min<int>(top, int(p.candidates.size()));
  if (f == Format::kCsv) {
    std::string o =
        "rank,layout,fits,peak_bytes,step_s,tokens_per_s,tflops_per_gpu,mfu,bubble_fraction,exposed_comm_fraction,"
        "with_held_bytes,flush_risk,warned,ranked_step_s\n";
    for (int i = 0; i < n; ++i) {
      const Candidate& c = p.candidates[i];
      o += fmt::format("{},\"{}\",{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{},{:.6g}\n", i + 1,
                       to_string(c.layout), c.fits ? 1 : 0, c.peak_bytes, c.time.step_s,
                       c.time.tokens_per_s, c.time.tflops_per_gpu, c.time.mfu,
                       c.time.bubble_fraction, c.time.exposed_comm_fraction, c.with_held_bytes, c.flush_risk ? 1 : 0,
                       c.warned() ? 1 : 0, c.ranked_step_s());
    }
    return o;
  }
  const bool md = f == Format::kMarkdown;
  std::string o = md ? "## paraplan plan\n\n" + spec_line(s) + "\n\n" : "plan: " + spec_line(s) + "\n";
  o += (md ? "" : "  ") + network_text(s.cluster) + "\n" + (md ? "\n" : "");
  if (const std::string d = defaults_text(defaults); !d.empty()) o += (md ? "" : "  ") + d + "\n" + (md ? "\n" : "");
  if (const std::string c = constraints_text(s.search); !c.empty()) o += (md ? "" : "  ") + c + "\n" + (md ? "\n" : "");
  if (!md) o += "\n";
  if (const Candidate* r = p.recommended()) {
    const MemoryEstimate e = estimate_memory(s, r->layout);
    const MemoryBreakdown& m = e.heaviest();
    o += md ? fmt::format("**Recommended:** `{}`\n\n", to_string(r->layout))
            : fmt::format("recommended: {}\n", to_string(r->layout));
    o += md ? "```\n" : "";
    o += fmt::format("  memory (stage {}, heaviest): {} GiB of {} GiB usable =", e.heaviest_stage,
                     gib(e.peak_bytes), gib(e.usable_bytes));
    for (int c = 0; c < kNumCategories; ++c)
      if (m.bytes[c]) o += fmt::format(" {} {}", category_name(Category(c)), gib(m.bytes[c]));
    o += "\n  " + time_text(r->time, r->layout);
    o += md ? "```\n\n" : "";
    o += fmt::format("{}Why: {}.\n", md ? "" : "  ", why_recommended(p));
    if (const std::string po = passed_over_text(p); !po.empty())
      o += fmt::format("{}Passed over: {}.\n", md ? "" : "  ", po);
    if (const std::string e = s.model.is_moe() ? why_expert_parallel(p) : std::string(); !e.empty())
      o += fmt::format("{}Expert parallelism: {}.\n", md ? "" : "  ", e);
    o += "\n";
  } else {
    if (p.evaluated == 0) {
      o += "no valid layout: every layout the search tried is invalid for this spec (see the counts below).\n\n";
    } else {
      const Candidate& c = p.candidates[0];
      const std::int64_t usable = usable_memory_bytes(s);
      o += fmt::format("no layout fits: the closest, {}, needs {} GiB of {} GiB usable (over by {} GiB).\n",
                       to_string(c.layout), gib(c.peak_bytes), gib(usable), gib(c.peak_bytes - usable));
      const Enough e = smallest_fitting_gpus(s);
      if (e.gpus)
        o += fmt::format("The smallest GPU count that fits: {} GPUs{} (--gpus {}), e.g. {}.\n", e.gpus,
                         e.gpus >= s.cluster.gpus_per_node
                             ? fmt::format(" = {} nodes of {}", e.gpus / s.cluster.gpus_per_node, s.cluster.gpus_per_node)
                             : std::string(" on one node"),
                         e.gpus, to_string(e.layout));
      else
        o += "No GPU count tried fits either: a shorter sequence (--seq-length), a smaller global batch or a GPU with "
             "more memory would.\n";
      o += "The table lists the closest first, by peak memory.\n\n";
    }
  }
  if (md) o += "| # | layout | fits | peak GiB | step s | tokens/s | MFU | bubble % | exposed comm % | band |\n|---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  size_t width = 72;  // the layout column: as wide as the longest layout shown
  for (int i = 0; i < n; ++i) width = std::max(width, to_string(p.candidates[i].layout).size());
  if (!md)
    o += fmt::format("{:>4}  {:<{}} {:>4} {:>9} {:>10} {:>11} {:>6} {:>8} {:>8} {:>5}\n", "#", "layout", width, "fits",
                     "peak GiB", "step s", "tokens/s", "MFU%", "bubble%", "comm%", "band");
  bool any_clamped = false;
  for (int i = 0; i < n; ++i) {
    const Candidate& c = p.candidates[i];
    // The ranked step (held to the best published utilization: marked ^) and the throughput it gives.
    const double r = c.time.step_s > 0 ? c.time.step_s / c.ranked_step_s() : 1;
    any_clamped |= c.time.clamped();
    const std::string step = fmt::format("{:.3f}{}", c.ranked_step_s(), c.time.clamped() ? "^" : md ? "" : " ");
    const std::string band = c.fits && !c.warned() && p.fastest_ranked_s > 0
                                 ? std::to_string(time_band(c.ranked_step_s(), p.fastest_ranked_s))
                                 : "-";
    const std::string row = md ? "| {} | `{:<{}}` | {} | {} | {} | {:.0f} | {:.1f} | {:.1f} | {:.1f} | {} |\n"
                               : "{:>4}  {:<{}} {:>4} {:>9} {:>10} {:>11.0f} {:>6.1f} {:>8.1f} {:>8.1f} {:>5}\n";
    o += fmt::format(fmt::runtime(row), i + 1, to_string(c.layout), md ? 0 : width, c.fits ? "yes" : "OOM",
                     gib(c.peak_bytes), step, c.time.tokens_per_s * r, 100 * c.time.mfu * r,
                     100 * c.time.bubble_fraction, 100 * c.time.exposed_comm_fraction, band);
  }
  if (any_clamped)
    o += fmt::format("{}^ predicted above the GPU's best published utilization: the step, tokens/s and MFU shown are what "
                     "that utilization allows (the raw prediction: --format json, time.step_s)\n",
                     md ? "\n" : "");
  std::string warned;
  for (int i = 0; i < n; ++i) {  // the cap is the ^ above: the other warnings, row by row
    Candidate c = p.candidates[i];
    c.time.warnings &= ~StepTime::kWarnMfuAboveBest;
    for (const std::string& w : candidate_warnings(p, c)) warned += fmt::format("{}#{}: warning: {}\n", md ? "- " : "", i + 1, w);
  }
  if (!warned.empty())
    o += fmt::format("\n{}Layouts with these warnings rank after those without; the recommendation has none when "
                     "one that fits has none.\n{}",
                     md ? "" : "", warned);
  o += fmt::format("\nenumerated {} layouts in {:.3f} s: {} evaluated ({} fit, {} out of memory), {} invalid", p.enumerated(),
                   p.search_seconds, p.evaluated, p.feasible, p.rejected[kRejectOom], p.invalid());
  std::string rej;
  for (int i = 0; i < kNumRejectReasons; ++i)
    if (p.rejected[i] && i != kRejectOom) rej += fmt::format("{}{} {}", rej.empty() ? "" : ", ", reject_name(i), p.rejected[i]);
  o += rej.empty() ? "\n" : " (" + rej + ")\n";
  o += fmt::format("{}bubble % = (p-1)/(v*m+p-1) of the pipeline time; comm % = exposed TP+PP+CP+EP+DP "
                   "communication / step; MFU = model FLOPs (no recompute) / (step x GPUs x peak "
                   "bf16); band k = ranked step within [{}k, {}(k+1))% of the fastest, ties broken by less exposed "
                   "communication + bubble, fewer parallel dimensions, smaller tp x cp x pp, lower ZeRO, more memory "
                   "margin\n",
                   md ? "\n" : "", int(100 * kTieBand), int(100 * kTieBand));
  return o;
}

}  // namespace paraplan
