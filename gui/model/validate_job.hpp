// Runs `paraplan validate` on one layout in the background: writes the GUI's
// current spec to a temporary YAML, starts the `paraplan` binary that sits
// next to paraplan-gui as a child process, and turns its exit code and JSON
// into a status the Validate view shows. Polled once per frame; never blocks.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/memory.hpp"
#include "gui/model/child_process.hpp"
#include "gui/model/validate_result.hpp"

namespace paraplan::gui {

struct ValidateOptions {
  int steps = 2;               // --steps; 0 = the validator's default
  bool backend_cpu = true;     // --backend cpu; false = the validator's default
  int max_full_ranks = 8;      // layouts with more ranks run one rank emulated
};

// The command line (argv) for one layout. Layouts with more than
// max_full_ranks ranks add --emulate-rank with the heaviest rank.
std::vector<std::string> validate_argv(const std::string& paraplan_exe, const std::string& spec_yaml,
                                       const Layout& layout, const MemoryEstimate& memory,
                                       const ValidateOptions& o);
// argv as one shell-quoted line (shown, so it can be re-run by hand).
std::string shell_line(const std::vector<std::string>& argv);

class ValidateJob {
 public:
  enum class Status { kIdle, kRunning, kPassed, kOutside, kFailed, kCancelled };

  ValidateJob();
  ~ValidateJob();  // removes the temporary folder
  ValidateJob(const ValidateJob&) = delete;
  ValidateJob& operator=(const ValidateJob&) = delete;

  // Starts a run, unless one is running. False with message() set when it
  // cannot start (spec not writable, binary missing).
  bool start(const std::string& paraplan_exe, const std::string& spec_yaml_text,
             const Layout& layout, const MemoryEstimate& memory, const ValidateOptions& o);
  // Reads output, and when the child has exited, parses it. Call once per frame.
  void poll();
  void cancel();
  // Blocks until the run ends or the timeout passes (screenshots, tests).
  bool wait(double timeout_s);

  Status status() const { return status_; }
  bool running() const { return status_ == Status::kRunning; }
  // One line for the user: what failed (the child's stderr line), or the verdict.
  const std::string& message() const { return message_; }
  const std::optional<ValidateResult>& result() const { return result_; }
  const std::string& command() const { return command_; }
  const std::string& layout_text() const { return layout_text_; }
  bool emulated() const { return emulated_; }
  double elapsed_s() const { return child_ ? child_->elapsed_s() : 0; }
  // The last non-empty line the child wrote to stderr (progress, while running).
  std::string last_stderr_line() const;

 private:
  void finish();

  std::unique_ptr<ChildProcess> child_;
  Status status_ = Status::kIdle;
  std::string message_, command_, layout_text_, tmp_dir_;
  bool emulated_ = false;
  std::optional<ValidateResult> result_;
};

const char* status_name(ValidateJob::Status s);

}  // namespace paraplan::gui
