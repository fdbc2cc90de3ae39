#include "planner/launch.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "planner/spec_error.hpp"

namespace paraplan {

namespace fs = std::filesystem;

void write_output(const std::string& path, const std::string& text) {
  // Resolve a symlink to the file it names: that file is replaced, the link kept.
  std::error_code ec;
  fs::path target = path;
  if (fs::is_symlink(fs::symlink_status(target, ec))) {
    const fs::path resolved = fs::weakly_canonical(target, ec);
    if (ec) throw SpecError(path, 0, "--output", "cannot resolve the symbolic link: " + ec.message());
    target = resolved;
  }
  const fs::file_status st = fs::status(target, ec);
  if (fs::exists(st) && !fs::is_regular_file(st))
    throw SpecError(path, 0, "--output",
                    std::string("is a ") + (fs::is_directory(st) ? "directory" : fs::is_fifo(st) ? "FIFO" : "device or special file") +
                        "; expected a regular file or a new path (nothing written)");
  // A temporary file of our own next to the target (mkstemp: concurrent runs
  // never share one), written, flushed, then renamed over the target.
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string name = ".";  // appended, not `"." + s`: GCC 12 warns falsely (-Wrestrict) on that
  name.append(target.filename().string()).append(".paraplan-XXXXXX");
  std::string tmpl = (dir / name).string();
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) throw SpecError(path, 0, "--output", std::string("cannot write file: ") + std::strerror(errno));
  const mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      std::remove(tmpl.c_str());
      throw SpecError(path, 0, "--output", std::string("write failed: ") + std::strerror(err));
    }
    p += n, left -= std::size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    std::remove(tmpl.c_str());
    throw SpecError(path, 0, "--output", std::string("write failed: ") + std::strerror(err));
  }
  fs::rename(tmpl, target, ec);
  if (ec) {
    std::remove(tmpl.c_str());
    throw SpecError(path, 0, "--output", "cannot write file: " + ec.message());
  }
}

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("paraplan") : p.string();
}

char process_state(int pid) {
  if (pid <= 0) return '\0';
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string st((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = st.rfind(')');  // the command name may hold spaces and parentheses
  return close != std::string::npos && close + 2 < st.size() ? st[close + 2] : '\0';
}

namespace {

volatile sig_atomic_t g_child_group = 0;
// The run's temporary directory, removed when a signal ends paraplan (a fixed
// buffer: the handler may not allocate).
char g_cleanup_dir[4096] = {0};

void forward_signal(int sig) {
  if (g_child_group > 0) {
    kill(-g_child_group, SIGTERM);  // mpirun forwards it to the ranks
    const timespec one_second{1, 0};
    nanosleep(&one_second, nullptr);
    kill(-g_child_group, SIGKILL);
  }
  if (g_cleanup_dir[0]) {
    // fork, execve and waitpid are async-signal-safe; fs::remove_all is not.
    const pid_t rm = fork();
    if (rm == 0) {
      char* const argv[] = {const_cast<char*>("rm"), const_cast<char*>("-rf"), g_cleanup_dir, nullptr};
      char* const envp[] = {nullptr};
      execve("/bin/rm", argv, envp);
      _exit(127);
    }
    if (rm > 0) waitpid(rm, nullptr, 0);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

// The ranks' "--result-dir": it names this run's rank processes in /proc.
std::string g_result_dir;

// The processes (not zombies) whose command line holds "--result-dir DIR".
std::vector<pid_t> rank_processes(const std::string& dir) {
  std::vector<pid_t> found;
  if (dir.empty()) return found;
  const std::string needle = std::string("--result-dir") + '\0' + dir + '\0';
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // An exiting process's command line reads empty once its memory is gone.
    if (cmdline.find(needle) == std::string::npos) continue;
    const pid_t pid = pid_t(std::atol(name.c_str()));
    if (process_state(pid) != 'Z') found.push_back(pid);
  }
  return found;
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
  g_result_dir.clear();
  for (std::size_t i = 0; i + 1 < rank_args.size(); ++i)
    if (rank_args[i] == "--result-dir") g_result_dir = rank_args[i + 1];
  // Open MPI's shared-memory segments (btl/vader, one file per rank, /dev/shm by default) go in the
  // run's own directory, which paraplan removes however the run ends: an aborted, stalled or killed
  // run left vader_segment.* files in /dev/shm (issue 46), as its ranks never reached MPI_Finalize.
  std::string shm_dir;
  if (!g_result_dir.empty()) {
    shm_dir = g_result_dir + "/shm";
    if (mkdir(shm_dir.c_str(), 0700) != 0 && errno != EEXIST) shm_dir.clear();
  }
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    if (!shm_dir.empty()) setenv("OMPI_MCA_btl_vader_backing_directory", shm_dir.c_str(), 0);
    // mpirun (and through it every rank) ends when paraplan dies, even by SIGKILL.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1) std::_Exit(1);  // paraplan died before prctl took effect
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
  // The ranks die of SIGKILL (their group's, or their parent's death signal),
  // but a killed process lingers until the kernel has torn it down, and a rank
  // in a group of its own gets only the death signal: kill whatever of this
  // run is left and wait (up to 5 s) until none is, so that no rank outlives
  // paraplan. CI once found a SIGSTOPped rank still listed just after exit.
  for (int i = 0; i < 250; ++i) {
    const std::vector<pid_t> left = rank_processes(g_result_dir);
    if (left.empty()) break;
    for (pid_t p : left) kill(p, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void mpirun_ended() { g_child_group = 0; }

void remove_on_signal(const std::string& dir) {
  if (dir.size() >= sizeof g_cleanup_dir) return;  // too long to keep: left behind
  g_cleanup_dir[0] = '\0';
  std::memcpy(g_cleanup_dir + 1, dir.c_str() + 1, dir.size());  // the first byte last: the handler sees all or nothing
  g_cleanup_dir[0] = dir.empty() ? '\0' : dir[0];
}

}  // namespace paraplan
