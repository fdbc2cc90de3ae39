#include "costmodel/layout.hpp"

#include "costmodel/model.hpp"

#include <charconv>
#include <utility>
#include <vector>

namespace paraplan {

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

const char* recompute_method_name(RecomputeMethod m) { return m == RecomputeMethod::kBlock ? "block" : "uniform"; }

const char* schedule_name(Schedule s) { return s == Schedule::k1F1B ? "1f1b" : "gpipe"; }

bool parse_recompute(std::string_view t, Recompute* out) {
  if (t == "none") *out = Recompute::kNone;
  else if (t == "selective") *out = Recompute::kSelective;
  else if (t == "full") *out = Recompute::kFull;
  else return false;
  return true;
}

bool parse_schedule(std::string_view t, Schedule* out, bool* interleaved) {
  *interleaved = false;
  if (t == "1f1b") *out = Schedule::k1F1B;
  else if (t == "gpipe") *out = Schedule::kGPipe;
  else if (t == "interleaved") { *out = Schedule::k1F1B; *interleaved = true; }
  else return false;
  return true;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The value of `key`, in [min_value, max_value]; the caps (costmodel/model.hpp
// kMax*) keep every product of layout fields inside 64 bits.
int parse_positive(std::string_view key, std::string_view v, int min_value, int max_value) {
  std::int64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec == std::errc::result_out_of_range)
    throw LayoutError(std::string(key), "expected at most " + std::to_string(max_value) + ", got a larger number");
  if (ec != std::errc() || p != v.data() + v.size())
    throw LayoutError(std::string(key), "expected an integer, got '" + std::string(v.substr(0, 40)) + "'");
  if (x < min_value)
    throw LayoutError(std::string(key), "expected an integer >= " + std::to_string(min_value) +
                                            ", got " + std::string(v));
  if (x > max_value)
    throw LayoutError(std::string(key), "expected at most " + std::to_string(max_value) + ", got " + std::string(v));
  return int(x);
}

}  // namespace

void parse_layout_into(std::string_view text, Layout* out, LayoutFields* set) {
  LayoutFields local;
  if (!set) set = &local;
  bool want_interleaved = false;
  std::vector<std::pair<std::string_view, std::string_view>> seen;  // the fields of this text, as given
  text = trim(text);
  if (text.empty()) throw LayoutError("layout", "empty layout; expected e.g. 'tp=8,pp=4,mbs=1'");
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      throw LayoutError(std::string(item), "expected key=value, got '" + std::string(item) + "'");
    const std::string_view key = trim(item.substr(0, eq)), val = trim(item.substr(eq + 1));
    // A field given twice is an error, not the last value silently (issue 46: tp=2,tp=4 took 4).
    for (const auto& [k, v] : seen)
      if (k == key)
        throw LayoutError(std::string(key), "given twice ('" + std::string(key) + "=" + std::string(v) + "' and '" +
                                                std::string(item) + "'); give each field once");
    seen.push_back({key, val});
    if (key == "dp") { out->dp = parse_positive(key, val, 1, kMaxGpus); set->dp = true; }
    else if (key == "tp") { out->tp = parse_positive(key, val, 1, kMaxGpus); set->tp = true; }
    else if (key == "cp") { out->cp = parse_positive(key, val, 1, kMaxGpus); set->cp = true; }
    else if (key == "ep") { out->ep = parse_positive(key, val, 1, kMaxGpus); set->ep = true; }
    else if (key == "etp") { out->etp = parse_positive(key, val, 1, kMaxGpus); set->etp = true; }
    else if (key == "pp") { out->pp = parse_positive(key, val, 1, kMaxGpus); set->pp = true; }
    else if (key == "vpp") { out->vpp = parse_positive(key, val, 1, kMaxLayers); set->vpp = true; }
    else if (key == "mbs") { out->mbs = parse_positive(key, val, 1, kMaxBatch); set->mbs = true; }
    else if (key == "sp") {
      if (val == "1" || val == "true") out->sp = true;
      else if (val == "0" || val == "false") out->sp = false;
      else throw LayoutError("sp", "expected 0 or 1, got '" + std::string(val) + "'");
      set->sp = true;
    } else if (key == "zero") {
      const int z = parse_positive(key, val, 0, 1 << 30);
      if (z > 3) throw LayoutError("zero", "expected a ZeRO stage 0-3, got " + std::string(val));
      out->zero = z;
      set->zero = true;
    } else if (key == "recompute") {
      if (!parse_recompute(val, &out->recompute))
        throw LayoutError("recompute",
                          "expected none, selective or full, got '" + std::string(val) + "'");
      set->recompute = true;
    } else if (key == "schedule") {
      if (!parse_schedule(val, &out->schedule, &want_interleaved))
        throw LayoutError("schedule",
                          "expected 1f1b, interleaved or gpipe, got '" + std::string(val) + "'");
      set->schedule = true;
    } else if (key == "recompute_method") {
      if (val == "uniform") out->recompute_method = RecomputeMethod::kUniform;
      else if (val == "block") out->recompute_method = RecomputeMethod::kBlock;
      else throw LayoutError("recompute_method", "expected uniform or block, got '" + std::string(val) + "'");
      set->recompute_method = true;
    } else if (key == "recompute_layers") {
      out->recompute_layers = parse_positive(key, val, 1, kMaxLayers);
      set->recompute_layers = true;
    } else if (key == "first_stage_layers") {
      out->first_stage_layers = parse_positive(key, val, 1, kMaxLayers);
      set->first_stage_layers = true;
    } else if (key == "last_stage_layers") {
      out->last_stage_layers = parse_positive(key, val, 1, kMaxLayers);
      set->last_stage_layers = true;
    } else if (key == "microbatch_group") {
      out->microbatch_group = parse_positive(key, val, 1, 1 << 24);
      set->microbatch_group = true;
    } else if (key == "balance") {
      if (val == "layers") out->balance = StageBalance::kLayers;
      else if (val == "cost") out->balance = StageBalance::kCost;
      else throw LayoutError("balance", "expected layers or cost, got '" + std::string(val) + "'");
      set->balance = true;
    } else {
      throw LayoutError(std::string(key),
                        "unknown layout field '" + std::string(key) +
                            "'; known: dp, tp, cp, pp, vpp, ep, etp, sp, zero, recompute, mbs, schedule, "
                            "first_stage_layers, last_stage_layers, recompute_method, recompute_layers, balance, "
                            "microbatch_group");
    }
  }
  if (want_interleaved && out->vpp < 2)
    throw LayoutError("schedule", "schedule=interleaved needs vpp > 1");
}

Layout parse_layout(std::string_view text) {
  Layout l;
  parse_layout_into(text, &l);
  return l;
}

std::string to_string(const Layout& l) {
  std::string s;
  s.reserve(96);
  s += "dp=" + std::to_string(l.dp) + ",tp=" + std::to_string(l.tp) +
       (l.cp > 1 ? ",cp=" + std::to_string(l.cp) : std::string()) +
       (l.ep > 1 || l.etp > 0 ? ",ep=" + std::to_string(l.ep) : std::string()) +
       (l.etp > 0 ? ",etp=" + std::to_string(l.etp) : std::string()) + ",pp=" + std::to_string(l.pp) + ",vpp=" + std::to_string(l.vpp) +
       ",sp=" + (l.sp ? "1" : "0") + ",zero=" + std::to_string(l.zero) +
       ",recompute=" + recompute_name(l.recompute) + ",mbs=" + std::to_string(l.mbs) +
       ",schedule=" + schedule_name(l.schedule);
  if (l.partial_recompute_set())
    s += std::string(",recompute_method=") + recompute_method_name(l.recompute_method) +
         ",recompute_layers=" + std::to_string(l.recompute_layers);
  if (l.first_stage_layers > 0) s += ",first_stage_layers=" + std::to_string(l.first_stage_layers);
  if (l.last_stage_layers > 0) s += ",last_stage_layers=" + std::to_string(l.last_stage_layers);
  if (l.balance == StageBalance::kCost) s += ",balance=cost";
  if (l.microbatch_group > 0) s += ",microbatch_group=" + std::to_string(l.microbatch_group);
  return s;
}

}  // namespace paraplan
