#include "planner/launch.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "planner/spec_error.hpp"

namespace paraplan {

namespace fs = std::filesystem;

void write_output(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".paraplan-tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw SpecError(path, 0, "--output", "cannot write file");
    f << text;
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      throw SpecError(path, 0, "--output", "write failed");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw SpecError(path, 0, "--output", "cannot write file: " + ec.message());
  }
}

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("paraplan") : p.string();
}

namespace {

volatile sig_atomic_t g_child_group = 0;

void forward_signal(int sig) {
  if (g_child_group > 0) {
    kill(-g_child_group, SIGTERM);  // mpirun forwards it to the ranks
    const timespec one_second{1, 0};
    nanosleep(&one_second, nullptr);
    kill(-g_child_group, SIGKILL);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

pid_t start_mpirun(int ranks, const std::string& extra_mpirun_args, std::vector<std::string> rank_args,
                   const std::string& log) {
  std::vector<std::string> args{PARAPLAN_MPIRUN, "-np", std::to_string(ranks), "--bind-to", "none"};
  if (ranks > int(std::thread::hardware_concurrency())) args.push_back("--oversubscribe");
  std::istringstream extra(extra_mpirun_args);
  for (std::string w; extra >> w;) args.push_back(w);
  args.push_back(self_exe());
  args.insert(args.end(), rank_args.begin(), rank_args.end());
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    if (geteuid() == 0) setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1), setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    // Containers often forbid cross-memory attach; shared memory still works.
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    // Without a progress thread a rendezvous send waits for the sender's next
    // MPI call; messages of up to 64 KiB go eagerly instead.
    setenv("OMPI_MCA_btl_vader_eager_limit", "65536", 0);
    if (FILE* f = std::freopen(log.c_str(), "w", stdout)) (void)f;
    dup2(fileno(stdout), 2);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::perror("paraplan: cannot start mpirun");
    std::_Exit(127);
  }
  setpgid(pid, pid);
  g_child_group = pid;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) signal(sig, forward_signal);
  return pid;
}

void stop_mpirun(pid_t pid, int* wstatus) {
  kill(-pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(-pid, SIGKILL);
  waitpid(pid, wstatus, 0);
}

void mpirun_ended() { g_child_group = 0; }

}  // namespace paraplan
