#include "gui/model/child_process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

extern char** environ;

namespace paraplan::gui {

namespace {

// Parent pid and start time from /proc/PID/stat (after the ')' that ends the name).
bool proc_stat(pid_t pid, pid_t* ppid, unsigned long long* start, char* state) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');
  if (!p) return false;
  // Fields after the name: 3 state, 4 ppid, ..., 22 starttime.
  char st = 0;
  int pp = 0;
  unsigned long long t = 0;
  if (std::sscanf(p + 1, " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &st, &pp,
                  &t) != 3)
    return false;
  if (ppid) *ppid = pid_t(pp);
  if (start) *start = t;
  if (state) *state = st;
  return true;
}

// Every process with its parent, from /proc.
std::vector<std::pair<pid_t, pid_t>> process_table() {
  std::vector<std::pair<pid_t, pid_t>> t;
  DIR* d = opendir("/proc");
  if (!d) return t;
  while (const dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    pid_t ppid = 0;
    if (*end == 0 && pid > 0 && proc_stat(pid_t(pid), &ppid, nullptr, nullptr)) t.emplace_back(pid_t(pid), ppid);
  }
  closedir(d);
  return t;
}

bool make_pipe(int fds[2]) {
  if (pipe(fds) != 0) return false;
  fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  fcntl(fds[1], F_SETFD, FD_CLOEXEC);
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return true;
}

}  // namespace

std::vector<pid_t> descendants(pid_t root) {
  const auto table = process_table();
  std::vector<pid_t> out, frontier = {root};
  while (!frontier.empty()) {
    std::vector<pid_t> next;
    for (const auto& [pid, ppid] : table)
      if (std::find(frontier.begin(), frontier.end(), ppid) != frontier.end()) next.push_back(pid);
    out.insert(out.end(), next.begin(), next.end());
    frontier = std::move(next);
  }
  return out;
}

ChildProcess::~ChildProcess() {
  if (state_ == State::kRunning) {
    signal_all(SIGKILL);
    waitpid(pid_, nullptr, 0);
  } else if (terminated_ && !killed_) {
    signal_all(SIGKILL);  // a cancelled run's descendants still owed their follow-up
  }
  close_pipes();
}

void ChildProcess::signal_all(int sig) {
  if (sig != SIGKILL || tree_.empty()) {
    // A fresh snapshot: the child and whatever runs under it now.
    tree_.clear();
    std::vector<pid_t> pids = {pid_};
    for (pid_t p : descendants(pid_)) pids.push_back(p);
    for (pid_t p : pids) {
      unsigned long long start = 0;
      if (proc_stat(p, nullptr, &start, nullptr)) tree_.push_back({p, start});
    }
  }
  if (state_ == State::kRunning) kill(-pid_, sig);  // the child's own group
  for (const Proc& p : tree_) {
    unsigned long long start = 0;
    char st = 0;
    // Only the same process (start time), and not a zombie waiting for its parent.
    if (proc_stat(p.pid, nullptr, &start, &st) && start == p.start && st != 'Z') kill(p.pid, sig);
  }
}

bool ChildProcess::start(const std::vector<std::string>& argv) {
  if (state_ == State::kRunning || argv.empty()) return false;
  out_.clear(), err_.clear(), error_.clear();
  exit_code_ = -1, signal_ = 0, terminated_ = false, killed_ = false;
  tree_.clear();
  close_pipes();
  int o[2], e[2];
  if (!make_pipe(o)) {
    error_ = std::string("pipe: ") + std::strerror(errno);
    state_ = State::kFailedToStart;
    return false;
  }
  if (!make_pipe(e)) {
    error_ = std::string("pipe: ") + std::strerror(errno);
    close(o[0]), close(o[1]);
    state_ = State::kFailedToStart;
    return false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, o[1], 1);
  posix_spawn_file_actions_adddup2(&fa, e[1], 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&at, 0);  // its own group: Cancel kills what it started too
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = posix_spawn(&pid_, argv[0].c_str(), &fa, &at, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(o[1]), close(e[1]);
  out_fd_ = o[0], err_fd_ = e[0];
  started_ = std::chrono::steady_clock::now();
  if (rc != 0) {
    error_ = "cannot run " + argv[0] + ": " + std::strerror(rc);
    close_pipes();
    state_ = State::kFailedToStart;
    return false;
  }
  state_ = State::kRunning;
  return true;
}

void ChildProcess::drain(int* fd, std::string* into) {
  if (*fd < 0) return;
  char buf[8192];
  for (;;) {
    const ssize_t n = read(*fd, buf, sizeof buf);
    if (n > 0) {
      into->append(buf, size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) close(*fd), *fd = -1;  // end of file: the writer is gone
    return;                            // EAGAIN: nothing more for now
  }
}

ChildProcess::State ChildProcess::poll() {
  follow_up();
  if (state_ != State::kRunning) return state_;
  drain(&out_fd_, &out_);
  drain(&err_fd_, &err_);
  // Peek without reaping: while the exited leader is a zombie its group id
  // cannot be reused, so killing the group (whatever it left behind) is safe.
  siginfo_t info{};
  if (waitid(P_PID, id_t(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_) {
    kill(-pid_, SIGKILL);  // what it left in its group
    int status = 0;
    waitpid(pid_, &status, 0);
    drain(&out_fd_, &out_);  // what is still buffered in the pipes
    drain(&err_fd_, &err_);
    if (WIFEXITED(status)) exit_code_ = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) signal_ = WTERMSIG(status);
    state_ = State::kExited;
    ended_ = std::chrono::steady_clock::now();
    close_pipes();
  }
  return state_;
}

void ChildProcess::follow_up() {
  if (terminated_ && !killed_ && std::chrono::steady_clock::now() - terminate_sent_ > std::chrono::seconds(1)) {
    signal_all(SIGKILL);  // the processes of the SIGTERM snapshot still alive
    killed_ = true;
  }
}

bool ChildProcess::wait(std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (poll() == State::kRunning) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return state_ == State::kExited;
}

void ChildProcess::terminate() {
  if (state_ != State::kRunning) return;
  terminated_ = true;
  killed_ = false;
  terminate_sent_ = std::chrono::steady_clock::now();
  signal_all(SIGTERM);
}

double ChildProcess::elapsed_s() const {
  if (state_ == State::kNotStarted || state_ == State::kFailedToStart) return 0;
  const auto end = state_ == State::kRunning ? std::chrono::steady_clock::now() : ended_;
  return std::chrono::duration<double>(end - started_).count();
}

void ChildProcess::close_pipes() {
  if (out_fd_ >= 0) close(out_fd_), out_fd_ = -1;
  if (err_fd_ >= 0) close(err_fd_), err_fd_ = -1;
}

}  // namespace paraplan::gui
