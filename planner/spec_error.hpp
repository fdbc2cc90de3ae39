// A bad input: which file, where, which field, and what was expected. Caught
// once at the top of the CLI and printed as one line; exit code 2.
#pragma once

#include <stdexcept>
#include <string>

namespace paraplan {

class SpecError : public std::runtime_error {
 public:
  SpecError(std::string file, int line, std::string field, const std::string& message)
      : std::runtime_error(message), file_(std::move(file)), line_(line), field_(std::move(field)) {}
  const std::string& file() const { return file_; }
  int line() const { return line_; }  // 1-based; 0 = unknown
  const std::string& field() const { return field_; }
  // "spec.yaml:12: training.seq_length: expected a positive integer, got -4"
  std::string one_line() const {
    std::string s = printable(file_, 256);
    if (line_ > 0) s += ":" + std::to_string(line_);
    if (!field_.empty()) s += (s.empty() ? "" : ": ") + printable(field_, 128);
    return s + ": " + printable(what(), 512);
  }

  // One printable line: control bytes (newlines included) as \xNN, and at most
  // `max` bytes of it (a value echoed from a binary or huge input is cut).
  static std::string printable(const std::string& text, std::size_t max) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (unsigned char c : text) {
      if (out.size() >= max) return out + "...";
      if (c < 0x20 || c == 0x7f) out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
      else out += char(c);
    }
    return out;
  }

 private:
  std::string file_;
  int line_;
  std::string field_;
};

// The known key closest to `key` by edit distance, or "" when none is close.
std::string closest_key(const std::string& key, const char* const* known, int n_known);

}  // namespace paraplan
