// A progress line for minutes-long work (validate, calibrate): rewritten in
// place on stderr when stderr is a terminal, nothing at all when it is not
// (logs and pipes stay clean). PARAPLAN_PROGRESS=0 turns it off on a terminal.
#pragma once

#include <chrono>
#include <string>

namespace paraplan {

class ProgressLine {
 public:
  explicit ProgressLine(std::string what);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }
  // "{what}: {text}, {elapsed} s": drawn at most 10 times a second, and when the text changes.
  void update(const std::string& text);
  // Clears the line (before the report is printed).
  void finish();

 private:
  std::string what_, last_;
  bool enabled_ = false, drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// A rank's heartbeat text "step 2 F chunk 0 mb 3" -> 2 (-1 if none).
int progress_step(const std::string& heartbeat);

}  // namespace paraplan
