#include "gui/model/validate_result.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <stdexcept>

#include "costmodel/memory.hpp"

namespace paraplan::gui {

using nlohmann::json;

std::optional<double> relative_error(std::int64_t predicted, std::int64_t measured) {
  if (predicted == 0) return measured == 0 ? std::optional<double>(0.0) : std::nullopt;
  return double(measured - predicted) / double(predicted);
}

namespace {

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw std::runtime_error("validate output: " + where + ": " + what);
}

const json& need(const json& j, const char* key, const std::string& where) {
  if (!j.is_object()) fail(where, "expected an object");
  auto it = j.find(key);
  if (it == j.end()) fail(where.empty() ? key : where + "." + key, "missing");
  return *it;
}

double number(const json& j, const char* key, const std::string& where) {
  const json& v = need(j, key, where);
  if (!v.is_number()) fail(where.empty() ? key : where + "." + key, "expected a number");
  return v.get<double>();
}

std::int64_t bytes(const json& v, const std::string& where) {
  if (!v.is_number()) fail(where, "expected a number of bytes");
  return v.is_number_integer() ? v.get<std::int64_t>() : std::int64_t(v.get<double>());
}

// Categories in the memory model's order, then any others the validator
// reports, then the total.
std::vector<CategoryRow> category_rows(const json& pred, const json& meas, const std::string& where) {
  if (!pred.is_object()) fail(where + ".predicted", "expected an object");
  if (!meas.is_object()) fail(where + ".measured", "expected an object");
  std::vector<std::string> names;
  for (int c = 0; c < kNumCategories; ++c) names.push_back(category_name(Category(c)));
  for (const json* m : {&pred, &meas})
    for (auto it = m->begin(); it != m->end(); ++it)
      if (it.key() != "total" && std::find(names.begin(), names.end(), it.key()) == names.end())
        names.push_back(it.key());
  names.push_back("total");
  std::vector<CategoryRow> rows;
  for (const std::string& n : names) {
    const auto p = pred.find(n), m = meas.find(n);
    if (p == pred.end() && m == meas.end()) continue;
    CategoryRow r;
    r.name = n;
    if (p != pred.end()) r.predicted = bytes(*p, where + ".predicted." + n);
    if (m != meas.end()) r.measured = bytes(*m, where + ".measured." + n);
    r.error = relative_error(r.predicted, r.measured);
    rows.push_back(r);
  }
  return rows;
}

}  // namespace

ValidateResult parse_validate_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw std::runtime_error(std::string("validate output is not JSON: ") + e.what());
  }
  if (!j.is_object()) fail("(top level)", "expected an object");
  ValidateResult r;
  const json& layout = need(j, "layout", "");
  if (!layout.is_string()) fail("layout", "expected a string");
  r.layout = layout.get<std::string>();
  if (auto b = j.find("backend"); b != j.end() && b->is_string()) r.backend = b->get<std::string>();
  const json& ranks = need(j, "ranks", "");
  if (!ranks.is_array()) fail("ranks", "expected a list");
  for (size_t i = 0; i < ranks.size(); ++i) {
    const std::string where = "ranks[" + std::to_string(i) + "]";
    const json& k = ranks[i];
    RankResult rr;
    rr.rank = int(number(k, "rank", where));
    rr.stage = int(number(k, "stage", where));
    rr.error = number(k, "error", where);
    rr.rows = category_rows(need(k, "predicted", where), need(k, "measured", where), where);
    r.ranks.push_back(std::move(rr));
  }
  r.max_error = number(j, "max_error", "");
  if (auto l = j.find("loss"); l != j.end()) {
    if (!l->is_array()) fail("loss", "expected a list");
    for (const json& v : *l) {
      if (!v.is_number()) fail("loss", "expected numbers");
      r.loss.push_back(v.get<double>());
    }
  }
  if (auto t = j.find("tolerance"); t != j.end() && t->is_number()) r.tolerance = t->get<double>();
  if (auto t = j.find("steps"); t != j.end() && t->is_number_integer()) r.steps = t->get<int>();
  if (auto t = j.find("step_time_s"); t != j.end() && !t->is_null()) {
    r.step_predicted_s = number(*t, "predicted", "step_time_s");
    r.step_measured_s = number(*t, "measured", "step_time_s");
  }
  return r;
}

}  // namespace paraplan::gui
