// Runs a rank program under strata-run with a hard timeout (strata-run
// --timeout) and returns its exit status (128 + signal if killed) with the
// combined output: the launcher of the multi-process test files.
#pragma once

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
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
  /// With @p survivors > 0 it also makes the exit barrier (TEST_EXIT_GATE,
  /// rank_check::exit_gate): a process-shared pthread barrier for that many
  /// survivors in a file, so that no survivor exits (and reads as a second
  /// dead peer to a survivor still failing its calls) before all reported.
  explicit DeathGate(int survivors = 0) {
    char tmpl[] = "/tmp/strata-gate-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) {
      dir_ = tmpl;
      path_ = dir_ + "/gate";
      if (::mkfifo(path_.c_str(), 0600) != 0) path_.clear();
    }
    if (survivors > 0 && !path_.empty() && !make_exit_barrier(survivors)) path_.clear();
  }
  ~DeathGate() {
    if (!exit_path_.empty()) ::unlink(exit_path_.c_str());
    ::unlink((dir_ + "/gate").c_str());
    if (!dir_.empty()) ::rmdir(dir_.c_str());
  }
  DeathGate(const DeathGate&) = delete;
  DeathGate& operator=(const DeathGate&) = delete;
  bool ok() const { return !path_.empty(); }
  std::string env() const {
    std::string e = "TEST_DEATH_GATE=" + path_ + " ";
    if (!exit_path_.empty()) e += "TEST_EXIT_GATE=" + exit_path_ + " ";
    return e;
  }

 private:
  bool make_exit_barrier(int survivors) {
    const std::string p = dir_ + "/exit";
    const int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    exit_path_ = p;
    const bool sized = ::ftruncate(fd, sizeof(pthread_barrier_t)) == 0;
    void* m =
        sized ? ::mmap(nullptr, sizeof(pthread_barrier_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    ::close(fd);
    if (m == MAP_FAILED) return false;
    pthread_barrierattr_t a;
    pthread_barrierattr_init(&a);
    pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    const bool ok = pthread_barrier_init(static_cast<pthread_barrier_t*>(m), &a, static_cast<unsigned>(survivors)) == 0;
    pthread_barrierattr_destroy(&a);
    ::munmap(m, sizeof(pthread_barrier_t));
    return ok;
  }

  std::string dir_, path_, exit_path_;
};

/// Occurrences of @p what in @p s (lines printed by the ranks).
inline int count(const std::string& s, const std::string& what) {
  int c = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++c;
  return c;
}

}  // namespace launch
