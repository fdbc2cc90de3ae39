#include "gui/model/validate_job.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

namespace paraplan::gui {

namespace fs = std::filesystem;

std::vector<std::string> validate_argv(const std::string& exe, const std::string& spec_yaml,
                                       const Layout& layout, const MemoryEstimate& memory,
                                       const ValidateOptions& o) {
  std::vector<std::string> a = {exe, "validate", spec_yaml, "--layout", to_string(layout),
                                "--format", "json"};
  if (o.steps > 0) a.insert(a.end(), {"--steps", std::to_string(o.steps)});
  if (o.backend_cpu) a.insert(a.end(), {"--backend", "cpu"});
  if (layout.gpus() > o.max_full_ranks)
    a.insert(a.end(), {"--emulate-rank", std::to_string(memory.heaviest_rank)});
  return a;
}

std::string shell_line(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) {
    if (!s.empty()) s += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-+=.,/:@%") == std::string::npos;
    if (plain) {
      s += a;
      continue;
    }
    s += '\'';
    for (char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
    s += '\'';
  }
  return s;
}

const char* status_name(ValidateJob::Status s) {
  switch (s) {
    case ValidateJob::Status::kIdle: return "not run";
    case ValidateJob::Status::kRunning: return "running";
    case ValidateJob::Status::kPassed: return "within tolerance";
    case ValidateJob::Status::kOutside: return "OUTSIDE tolerance";
    case ValidateJob::Status::kFailed: return "failed";
    case ValidateJob::Status::kCancelled: return "cancelled";
  }
  return "?";
}

ValidateJob::ValidateJob() = default;

ValidateJob::~ValidateJob() {
  child_.reset();  // kills a run still going
  if (!tmp_dir_.empty()) {
    std::error_code ec;
    fs::remove_all(tmp_dir_, ec);
  }
}

bool ValidateJob::start(const std::string& exe, const std::string& yaml, const Layout& layout,
                        const MemoryEstimate& memory, const ValidateOptions& o) {
  if (running()) return false;
  result_.reset();
  layout_text_ = to_string(layout);
  emulated_ = layout.gpus() > o.max_full_ranks;
  status_ = Status::kFailed;
  if (tmp_dir_.empty()) {
    std::string templ = (fs::temp_directory_path() / "paraplan-gui-XXXXXX").string();
    if (!mkdtemp(templ.data())) {
      message_ = "cannot create a temporary folder for the spec";
      return false;
    }
    tmp_dir_ = templ;
  }
  const std::string spec_path = (fs::path(tmp_dir_) / "spec.yaml").string();
  {
    std::ofstream f(spec_path, std::ios::trunc);
    f << yaml;
    if (!f) {
      message_ = "cannot write " + spec_path;
      return false;
    }
  }
  const std::vector<std::string> argv = validate_argv(exe, spec_path, layout, memory, o);
  command_ = shell_line(argv);
  std::error_code ec;
  if (!fs::exists(exe, ec)) {
    message_ = "paraplan not found at " + exe + " (it is built next to paraplan-gui)";
    return false;
  }
  child_ = std::make_unique<ChildProcess>();
  if (!child_->start(argv)) {
    message_ = child_->error();
    return false;
  }
  status_ = Status::kRunning;
  message_ = emulated_ ? fmt::format("emulating rank {} of {}", memory.heaviest_rank, layout.gpus())
                       : fmt::format("running {} ranks", layout.gpus());
  return true;
}

void ValidateJob::poll() {
  if (!child_) return;
  // Also after the run ended: a cancelled run's descendants get their SIGKILL follow-up here.
  const ChildProcess::State st = child_->poll();
  if (status_ != Status::kRunning || st == ChildProcess::State::kRunning) return;
  finish();
}

void ValidateJob::cancel() {
  if (running() && child_) child_->terminate();
}

bool ValidateJob::wait(double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (running()) {
    poll();
    if (!running()) break;
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::string ValidateJob::last_stderr_line() const {
  if (!child_) return "";
  const std::string& e = child_->err();
  size_t end = e.find_last_not_of(" \r\n\t");
  if (end == std::string::npos) return "";
  size_t begin = e.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  // Progress lines may be redrawn with '\r'.
  const size_t cr = e.rfind('\r', end);
  if (cr != std::string::npos && cr >= begin) begin = cr + 1;
  return e.substr(begin, end - begin + 1);
}

void ValidateJob::finish() {
  const int code = child_->exit_code();
  const std::string err = last_stderr_line();
  if (child_->cancelled()) {
    status_ = Status::kCancelled;
    message_ = fmt::format("cancelled after {:.1f} s", child_->elapsed_s());
    return;
  }
  if (code == 0 || code == 1) {
    try {
      result_ = parse_validate_json(child_->out());
      status_ = code == 0 ? Status::kPassed : Status::kOutside;
      message_ = fmt::format("{}: max error {:.1f}% ({:.1f} s)", status_name(status_),
                             100 * result_->max_error, child_->elapsed_s());
    } catch (const std::exception& e) {
      status_ = Status::kFailed;
      message_ = e.what();
    }
    return;
  }
  status_ = Status::kFailed;
  if (child_->term_signal())
    message_ = fmt::format("paraplan validate was killed by signal {} ({})", child_->term_signal(),
                           strsignal(child_->term_signal()));
  else
    message_ = fmt::format("paraplan validate exited with code {}", code);
  if (!err.empty()) message_ += ": " + err;
}

}  // namespace paraplan::gui
