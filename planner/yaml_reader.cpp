#include "planner/yaml_reader.hpp"

#include <yaml-cpp/depthguard.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace paraplan {

std::string closest_key(const std::string& key, const char* const* known, int n_known) {
  std::string best;
  size_t best_d = std::string::npos;
  for (int i = 0; i < n_known; ++i) {
    const std::string k = known[i];
    // Levenshtein distance.
    std::vector<size_t> prev(k.size() + 1), cur(k.size() + 1);
    for (size_t j = 0; j <= k.size(); ++j) prev[j] = j;
    for (size_t a = 1; a <= key.size(); ++a) {
      cur[0] = a;
      for (size_t j = 1; j <= k.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (key[a - 1] != k[j - 1])});
      std::swap(prev, cur);
    }
    if (prev[k.size()] < best_d) best_d = prev[k.size()], best = k;
  }
  // Close enough to be a typo: at most a third of the key's letters differ.
  return best_d <= std::max<size_t>(2, key.size() / 3) ? best : "";
}

YAML::Node parse_yaml(const std::string& text, const std::string& file) {
  try {
    return YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {  // yaml-cpp says only "bad file"
    throw SpecError(file, e.mark.line + 1, "",
                    "YAML nested more than " + std::to_string(e.depth() - 1) + " levels deep; a spec needs a few");
  } catch (const YAML::ParserException& e) {
    throw SpecError(file, e.mark.line + 1, "", "YAML syntax error: " + e.msg);
  }
}

namespace {
std::string scalar_text(const YAML::Node& v) {
  if (v.IsScalar()) return "'" + v.Scalar() + "'";
  if (v.IsSequence()) return "a list";
  if (v.IsMap()) return "a mapping";
  return "nothing";
}
std::string join(std::initializer_list<const char*> c, const char* sep) {
  std::string s;
  for (const char* x : c) s += (s.empty() ? "" : sep) + std::string(x);
  return s;
}
}  // namespace

MapReader::MapReader(const YAML::Node& node, std::string file, std::string prefix,
                     std::initializer_list<const char*> known)
    : node_(node), file_(std::move(file)), prefix_(std::move(prefix)) {
  const std::string where = prefix_.empty() ? "" : prefix_.substr(0, prefix_.size() - 1);
  if (!node_.IsMap())
    throw SpecError(file_, node_.IsDefined() && !node_.IsNull() ? node_.Mark().line + 1 : 0,
                    where.empty() ? "(top level)" : where,
                    "expected a mapping of keys, got " + scalar_text(node_));
  std::vector<const char*> k(known);
  std::vector<std::pair<std::string, int>> seen;  // key, line: a duplicate is an error, not "first wins"
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const int line = it->first.Mark().line + 1;
    if (!it->first.IsScalar())
      throw SpecError(file_, line, where.empty() ? "(top level)" : where,
                      "expected a plain key, got a " + std::string(it->first.IsMap() ? "mapping" : "sequence") +
                          " as a key");
    const std::string key = it->first.Scalar();
    for (const auto& [prev, prev_line] : seen)
      if (prev == key)
        throw SpecError(file_, line, prefix_ + key, "duplicate key (first given on line " + std::to_string(prev_line) + ")");
    seen.emplace_back(key, line);
    if (std::find_if(k.begin(), k.end(), [&](const char* x) { return key == x; }) != k.end())
      continue;
    const std::string near = closest_key(key, k.data(), int(k.size()));
    throw SpecError(file_, it->first.Mark().line + 1, prefix_ + key,
                    "unknown key" + (near.empty() ? "; known keys: " + join(known, ", ")
                                                  : "; did you mean '" + near + "'?"));
  }
}

bool MapReader::has(const char* key) const {
  const YAML::Node v = node_[key];
  return v.IsDefined() && !v.IsNull();
}

YAML::Node MapReader::child(const char* key) const { return node_[key]; }

int MapReader::line(const char* key) const {
  const YAML::Node v = node_[key];
  return (v.IsDefined() ? v.Mark().line : node_.Mark().line) + 1;
}

void MapReader::fail(const char* key, const std::string& message) const {
  throw SpecError(file_, line(key), field(key), message);
}

YAML::Node MapReader::require(const char* key) const {
  if (!has(key)) fail(key, "missing required key");
  return node_[key];
}

std::int64_t MapReader::as_int(const YAML::Node& v, const char* key, std::int64_t min_value) const {
  long long x = 0;
  if (!v.IsScalar() || !YAML::convert<long long>::decode(v, x)) {
    // Accept 4.0e9-style integers written as floats, if integral.
    double d = 0;
    if (v.IsScalar() && YAML::convert<double>::decode(v, d) && std::isfinite(d) &&
        d == std::floor(d) && std::fabs(d) < 9.0e18)
      x = static_cast<long long>(d);
    else
      fail(key, "expected an integer, got " + scalar_text(v));
  }
  if (x < min_value)
    fail(key, (min_value == 1 ? std::string("expected a positive integer")
                              : "expected an integer >= " + std::to_string(min_value)) +
                  ", got " + std::to_string(x));
  return x;
}

std::int64_t MapReader::get_int(const char* key, std::int64_t min_value) const {
  return as_int(require(key), key, min_value);
}

std::int64_t MapReader::opt_int(const char* key, std::int64_t def, std::int64_t min_value) const {
  return has(key) ? get_int(key, min_value) : def;
}

double MapReader::get_number(const char* key, double lo, double hi, bool hi_inclusive) const {
  const YAML::Node v = require(key);
  double d = 0;
  if (!v.IsScalar() || !YAML::convert<double>::decode(v, d) || !std::isfinite(d))
    fail(key, "expected a number, got " + scalar_text(v));
  if (d < lo || d > hi || (!hi_inclusive && d == hi)) {
    // A lower bound of 1e-6 or less stands for "above zero": say (0, ...
    const bool above_zero = lo > 0 && lo <= 1e-6;
    std::string range = fmt::format("expected a number in {}{}, {}{}", above_zero ? "(" : "[",
                                    above_zero ? 0.0 : lo, hi, hi_inclusive ? "]" : ")");
    if (hi == HUGE_VAL) range = lo == 0 ? "expected a number >= 0" : "expected a positive number";
    fail(key, range + ", got " + v.Scalar());
  }
  return d;
}

double MapReader::opt_number(const char* key, double def, double lo, double hi,
                             bool hi_inclusive) const {
  return has(key) ? get_number(key, lo, hi, hi_inclusive) : def;
}

bool MapReader::get_bool(const char* key) const {
  const YAML::Node v = require(key);
  bool b = false;
  if (!v.IsScalar() || !YAML::convert<bool>::decode(v, b))
    fail(key, "expected true or false, got " + scalar_text(v));
  return b;
}

bool MapReader::opt_bool(const char* key, bool def) const { return has(key) ? get_bool(key) : def; }

std::string MapReader::get_string(const char* key) const {
  const YAML::Node v = require(key);
  if (!v.IsScalar()) fail(key, "expected a string, got " + scalar_text(v));
  return v.Scalar();
}

std::string MapReader::opt_string(const char* key, const std::string& def) const {
  return has(key) ? get_string(key) : def;
}

int MapReader::as_choice(const YAML::Node& v, const char* key,
                         std::initializer_list<const char*> c) const {
  if (v.IsScalar()) {
    int i = 0;
    for (const char* x : c) {
      if (v.Scalar() == x) return i;
      ++i;
    }
  }
  fail(key, "expected one of " + join(c, " | ") + ", got " + scalar_text(v));
}

int MapReader::get_choice(const char* key, std::initializer_list<const char*> c) const {
  return as_choice(require(key), key, c);
}

int MapReader::opt_choice(const char* key, int def, std::initializer_list<const char*> c) const {
  return has(key) ? get_choice(key, c) : def;
}

std::vector<std::int64_t> MapReader::opt_int_list(const char* key, std::int64_t min_value) const {
  std::vector<std::int64_t> out;
  if (!has(key)) return out;
  const YAML::Node v = node_[key];
  if (v.IsScalar()) return {as_int(v, key, min_value)};
  if (!v.IsSequence() || v.size() == 0) fail(key, "expected a non-empty list of integers");
  for (const auto& x : v) out.push_back(as_int(x, key, min_value));
  return out;
}

std::vector<double> MapReader::get_number_list(const char* key, double lo, double hi) const {
  const YAML::Node v = require(key);
  if (!v.IsSequence() || v.size() == 0) fail(key, "expected a non-empty list of numbers");
  std::vector<double> out;
  for (const auto& x : v) {
    double d = 0;
    if (!x.IsScalar() || !YAML::convert<double>::decode(x, d) || !std::isfinite(d))
      fail(key, "expected a list of numbers, got " + scalar_text(x));
    if (d <= lo || d > hi) fail(key, fmt::format("expected numbers in ({}, {}], got {}", lo, hi, x.Scalar()));
    out.push_back(d);
  }
  return out;
}

std::vector<int> MapReader::opt_choice_list(const char* key,
                                            std::initializer_list<const char*> c) const {
  std::vector<int> out;
  if (!has(key)) return out;
  const YAML::Node v = node_[key];
  if (v.IsScalar()) return {as_choice(v, key, c)};
  if (!v.IsSequence() || v.size() == 0)
    fail(key, "expected a non-empty list of " + join(c, " | "));
  for (const auto& x : v) out.push_back(as_choice(x, key, c));
  return out;
}

}  // namespace paraplan
