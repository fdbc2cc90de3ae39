// Strict typed access to one YAML mapping: every key must be known (the
// closest known key is suggested), every value is type- and range-checked, and
// every error names file, line and dotted field.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "planner/spec_error.hpp"

namespace paraplan {

class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string file, std::string prefix,
            std::initializer_list<const char*> known);

  bool has(const char* key) const;
  const YAML::Node& node() const { return node_; }
  YAML::Node child(const char* key) const;
  std::string field(const char* key) const { return prefix_ + key; }
  int line(const char* key) const;  // of the value; the map's line when absent
  [[noreturn]] void fail(const char* key, const std::string& message) const;

  // Required values (missing -> error) and optional ones with a default.
  std::int64_t get_int(const char* key, std::int64_t min_value) const;
  std::int64_t opt_int(const char* key, std::int64_t def, std::int64_t min_value) const;
  double get_number(const char* key, double lo, double hi, bool hi_inclusive) const;
  double opt_number(const char* key, double def, double lo, double hi, bool hi_inclusive) const;
  bool get_bool(const char* key) const;
  bool opt_bool(const char* key, bool def) const;
  std::string get_string(const char* key) const;
  std::string opt_string(const char* key, const std::string& def) const;
  // Index of the value among `choices`.
  int get_choice(const char* key, std::initializer_list<const char*> choices) const;
  int opt_choice(const char* key, int def, std::initializer_list<const char*> choices) const;
  // A list of integers (a single scalar is a list of one).
  std::vector<std::int64_t> opt_int_list(const char* key, std::int64_t min_value) const;
  // A required non-empty list of numbers in (lo, hi].
  std::vector<double> get_number_list(const char* key, double lo, double hi) const;
  std::vector<int> opt_choice_list(const char* key, std::initializer_list<const char*> choices) const;

 private:
  YAML::Node require(const char* key) const;
  std::int64_t as_int(const YAML::Node& v, const char* key, std::int64_t min_value) const;
  int as_choice(const YAML::Node& v, const char* key, std::initializer_list<const char*> c) const;

  YAML::Node node_;
  std::string file_;
  std::string prefix_;
};

// Parses YAML text; syntax errors become SpecErrors with the line.
YAML::Node parse_yaml(const std::string& text, const std::string& file);

}  // namespace paraplan
