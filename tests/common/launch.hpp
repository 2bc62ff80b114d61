// Runs a rank program under strata-run with a hard timeout (strata-run
// --timeout) and returns its exit status (128 + signal if killed) with the
// combined output: the launcher of the multi-process test files.
#pragma once

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace launch {

/// Directory of the built binaries (STRATA_BIN, set by CTest, else the build tree's bin/).
inline std::string bin() {
  const char* b = std::getenv("STRATA_BIN");
  return b ? b : STRATA_BINARY_DIR "/bin";
}

/// `env strata-run <launcher_args> --timeout <timeout_s> -- <program> <rank_args>`.
inline int run(const std::string& program, int timeout_s, const std::string& env, const std::string& launcher_args,
               const std::string& rank_args, std::string* out) {
  const std::string cmd = "env " + env + " " + bin() + "/strata-run " + launcher_args + " --timeout " +
                          std::to_string(timeout_s) + " -- " + bin() + "/" + program + " " + rank_args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out->append(buf);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/// Exit status (-1 if not exited) and output of a shell command line: stdout
/// and stderr combined, or stdout alone (stderr to the test log) without @p with_stderr.
struct ProcessResult {
  int status = -1;
  std::string out;
};
inline ProcessResult run_command(const std::string& command, bool with_stderr = true) {
  ProcessResult r;
  FILE* p = popen((with_stderr ? command + " 2>&1" : command).c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

/// The FIFO of a peer-death test (rank_check::death_gate_wait/pass): made in
/// a fresh temporary directory, removed with it; env() is the variable to pass.
class DeathGate {
 public:
  DeathGate() {
    char tmpl[] = "/tmp/strata-gate-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) {
      dir_ = tmpl;
      path_ = dir_ + "/gate";
      if (::mkfifo(path_.c_str(), 0600) != 0) path_.clear();
    }
  }
  ~DeathGate() {
    if (!path_.empty()) ::unlink(path_.c_str());
    if (!dir_.empty()) ::rmdir(dir_.c_str());
  }
  DeathGate(const DeathGate&) = delete;
  DeathGate& operator=(const DeathGate&) = delete;
  bool ok() const { return !path_.empty(); }
  std::string env() const { return "TEST_DEATH_GATE=" + path_ + " "; }

 private:
  std::string dir_, path_;
};

/// Occurrences of @p what in @p s (lines printed by the ranks).
inline int count(const std::string& s, const std::string& what) {
  int c = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++c;
  return c;
}

}  // namespace launch
