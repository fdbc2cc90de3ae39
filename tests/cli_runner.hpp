// Runs the real `paraplan` binary for the CLI tests: a fresh temporary folder
// per case, stdout and stderr captured separately, crashes told apart from
// exit codes. @DIR@ in arguments is the case's folder, @SRC@ the repo root.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace paraplan::test {

namespace fs = std::filesystem;


// ---- running the binary -------------------------------------------------------

inline std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t i = s.find(from); i != std::string::npos; i = s.find(from, i + to.size()))
    s.replace(i, from.size(), to);
  return s;
}

inline std::string expand(const std::string& s, const fs::path& dir) {
  return replace_all(replace_all(s, "@DIR@", dir.string()), "@SRC@", PARAPLAN_SOURCE_DIR);
}

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) {
    if (c == '\'') q.append("'\\''");
    else q.push_back(c);
  }
  q.push_back('\'');
  return q;
}

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh folder under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "paraplan-cli-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

struct Result {
  int code = -1;         // exit code; -1 if killed by a signal
  int signal = 0;        // the signal that killed it (a crash)
  std::string out, err;  // stdout, stderr
};

// Runs `paraplan ARGS...` in `cwd`, stdout and stderr captured separately
// (into a folder of their own, so `cwd` only holds what the binary writes).
inline Result run_paraplan(const std::vector<std::string>& args, const fs::path& cwd) {
  TempDir capture;
  const fs::path out = capture.path() / "stdout", err = capture.path() / "stderr";
  // Built by appending: GCC 12 warns falsely (-Wrestrict) on `" " + std::string`.
  std::string cmd = "cd ";
  // Bounded: a hang (e.g. blocking on a FIFO) fails with exit 124, never stalls
  // the suite. PARAPLAN_TEST_CLI_TIMEOUT (seconds) raises it for slow builds (ASan).
  const char* limit = std::getenv("PARAPLAN_TEST_CLI_TIMEOUT");
  cmd.append(shell_quote(cwd.string()))
      .append(" && exec timeout ")
      .append(limit && *limit ? shell_quote(limit) : std::string("60"))
      .append(" ")
      .append(shell_quote(PARAPLAN_BINARY));
  for (const std::string& a : args) cmd.append(" ").append(shell_quote(expand(a, cwd)));
  cmd.append(" >").append(shell_quote(out.string()));
  cmd.append(" 2>").append(shell_quote(err.string())).append(" </dev/null");
  const int status = std::system(cmd.c_str());
  Result r;
  if (status != -1 && WIFEXITED(status)) r.code = WEXITSTATUS(status);
  if (status != -1 && WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

}  // namespace paraplan::test
