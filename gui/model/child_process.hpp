// A child process with its stdout and stderr captured through pipes, polled
// without blocking from the UI loop, and killable with everything it started.
// POSIX (posix_spawn); on Linux, terminate() also reaches descendants that left
// the child's process group (`paraplan validate` starts mpiexec in its own
// group, and mpiexec each rank in another), found through /proc.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace paraplan::gui {

// The descendants of `root` (not root itself), from /proc; empty where there is none.
std::vector<pid_t> descendants(pid_t root);

class ChildProcess {
 public:
  enum class State { kNotStarted, kRunning, kExited, kFailedToStart };

  ChildProcess() = default;
  ~ChildProcess();  // kills a child still running and reaps it
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // argv[0] is the program path (not searched on PATH). False (and `error()`
  // set) when it cannot be started.
  bool start(const std::vector<std::string>& argv);
  // Reads what the pipes hold and reaps the child when it has exited; after
  // terminate(), sends the SIGKILL follow-up when it is due. Returns state().
  State poll();
  // Blocks (polling) until the child exits or the timeout passes; true when it exited.
  bool wait(std::chrono::milliseconds timeout);
  // SIGTERM to the child, its process group and every descendant now; SIGKILL
  // from a later poll() to those still alive 1 s after.
  void terminate();

  State state() const { return state_; }
  bool cancelled() const { return terminated_; }
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }
  // Exit status when it exited normally; -1 when it died on a signal (see term_signal()).
  int exit_code() const { return exit_code_; }
  int term_signal() const { return signal_; }
  const std::string& error() const { return error_; }
  double elapsed_s() const;

 private:
  void drain(int* fd, std::string* into);
  void close_pipes();
  void signal_all(int sig);
  void follow_up();

  // A process met under the child: pid and start time (so a reused pid is never signalled).
  struct Proc {
    pid_t pid;
    unsigned long long start;
  };
  std::vector<Proc> tree_;  // the child and its descendants, as of the last snapshot
  bool killed_ = false;     // the SIGKILL follow-up was sent

  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  State state_ = State::kNotStarted;
  std::string out_, err_, error_;
  int exit_code_ = -1, signal_ = 0;
  bool terminated_ = false;
  std::chrono::steady_clock::time_point started_, terminate_sent_, ended_;
};

}  // namespace paraplan::gui
