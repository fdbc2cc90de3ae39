#include "planner/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace paraplan {

ProgressLine::ProgressLine(std::string what)
    : what_(std::move(what)), start_(std::chrono::steady_clock::now()), last_draw_(start_) {
  const char* env = std::getenv("PARAPLAN_PROGRESS");
  enabled_ = ::isatty(STDERR_FILENO) && !(env && std::strcmp(env, "0") == 0);
}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::update(const std::string& text) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (text == last_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_ = text;
  last_draw_ = now;
  const double s = std::chrono::duration<double>(now - start_).count();
  // \r and erase-to-end-of-line: one line, rewritten.
  const std::string line = fmt::format("\r{}: {}, {:.0f} s\x1b[K", what_, text, s);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressLine::finish() {
  if (!drawn_) return;
  std::fputs("\r\x1b[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

int progress_step(const std::string& heartbeat) {
  if (heartbeat.rfind("step ", 0) != 0) return -1;
  return std::atoi(heartbeat.c_str() + 5);
}

}  // namespace paraplan
