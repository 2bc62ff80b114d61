// Behaviour of the real strata-run binary (exit codes, failures, timeouts,
// signals, bad arguments, orphans, authentication, allgather/barrier), with
// launcher-probe as the rank program. Every run has a deadline: on expiry the
// launcher is SIGKILLed (its ranks die with it through PR_SET_PDEATHSIG).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "strata/detail/rendezvous.hpp"

namespace {

// glibc 2.36 declares pidfd_open without C linkage for C++; use the syscall.
int pidfd_open(pid_t pid, unsigned flags) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, flags)); }

namespace rdv = strata::detail::rdv;
using Clock = std::chrono::steady_clock;

/// build/bin: STRATA_BIN (set by CTest), else the directory of this test binary.
std::string bin_dir() {
  if (const char* b = std::getenv("STRATA_BIN")) return b;
  char buf[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  const std::string self = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("bin/x");
  return self.substr(0, self.rfind('/'));
}
std::string launcher() { return bin_dir() + "/strata-run"; }
std::string probe() { return bin_dir() + "/launcher-probe"; }

struct Result {
  int status = -1;  // raw wait status
  bool timed_out = false;
  std::string out;
  std::string err;
  double seconds = 0;
  [[nodiscard]] int code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

/// A running launcher with its stdout/stderr captured.
class LauncherRun {
 public:
  explicit LauncherRun(const std::vector<std::string>& args) {
    int out[2];
    int err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) std::abort();
    start_ = Clock::now();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      _exit(126);
    }
    ::close(out[1]);
    ::close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
    pidfd_ = pidfd_open(pid_, 0);
  }
  ~LauncherRun() {
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
    for (int fd : {out_fd_, err_fd_, pidfd_}) {
      if (fd >= 0) ::close(fd);
    }
  }
  LauncherRun(const LauncherRun&) = delete;
  LauncherRun& operator=(const LauncherRun&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  /// Standard output received so far.
  [[nodiscard]] const std::string& output() const { return res_.out; }

  /// Reads output until @p pred(stdout so far) holds or @p timeout_s passes.
  bool wait_for_output(const std::function<bool(const std::string&)>& pred, double timeout_s) {
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    while (!pred(res_.out)) {
      if (!pump(deadline)) return pred(res_.out);
    }
    return true;
  }

  /// Waits for the launcher to exit (and its output to end) within @p timeout_s.
  Result finish(double timeout_s) {
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    while (!reaped_ || out_fd_ >= 0 || err_fd_ >= 0) {
      if (!pump(deadline)) {
        res_.timed_out = true;
        ::kill(pid_, SIGKILL);
        if (!reaped_) {
          ::waitpid(pid_, &res_.status, 0);
          reaped_ = true;
        }
        break;
      }
    }
    res_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return res_;
  }

 private:
  // One poll round; false on deadline.
  bool pump(Clock::time_point deadline) {
    std::vector<pollfd> fds;
    if (out_fd_ >= 0) fds.push_back({out_fd_, POLLIN, 0});
    if (err_fd_ >= 0) fds.push_back({err_fd_, POLLIN, 0});
    if (!reaped_) fds.push_back({pidfd_, POLLIN, 0});
    if (fds.empty()) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    if (::poll(fds.data(), fds.size(), static_cast<int>(left)) <= 0) return Clock::now() < deadline;
    for (const auto& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == pidfd_) {
        if (::waitpid(pid_, &res_.status, WNOHANG) == pid_) reaped_ = true;
        continue;
      }
      char buf[4096];
      const ssize_t n = ::read(p.fd, buf, sizeof buf);
      if (n > 0) {
        (p.fd == out_fd_ ? res_.out : res_.err).append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(p.fd);
        (p.fd == out_fd_ ? out_fd_ : err_fd_) = -1;
      }
    }
    return true;
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  int pidfd_ = -1;
  bool reaped_ = false;
  Clock::time_point start_;
  Result res_;
};

Result run(std::vector<std::string> args, double timeout_s = 30) {
  args.insert(args.begin(), launcher());
  LauncherRun r(args);
  return r.finish(timeout_s);
}

/// A fresh private directory for pid files, removed afterwards.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/strata-launcher-test.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

  /// Pids written by the probes (pid.R, and gpid.R for grandchildren).
  [[nodiscard]] std::vector<pid_t> pids(const std::string& prefix) const {
    std::vector<pid_t> out;
    for (int r = 0; r < 64; ++r) {
      std::ifstream f(path_ + "/" + prefix + "." + std::to_string(r));
      long p = 0;
      if (f >> p) out.push_back(static_cast<pid_t>(p));
    }
    return out;
  }

 private:
  std::string path_;
};

/// True if @p pid exists and is not a zombie.
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno != ESRCH;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  const auto rp = line.rfind(')');
  return rp == std::string::npos || rp + 2 >= line.size() || line[rp + 2] != 'Z';
}

void expect_all_gone(const std::vector<pid_t>& pids, const char* what) {
  for (pid_t p : pids) EXPECT_FALSE(alive(p)) << what << " pid " << p << " survived the launcher";
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// ------------------------------------------------------------------ exit codes

TEST(Launcher, AllRanksExitZeroGivesExitZero) {
  const auto r = run({"-n", "3", "--", probe(), "exit", "-1", "0"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.code(), 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST(Launcher, OneRankExitingNonZeroFailsTheJobAndIsNamed) {
  const auto r = run({"-n", "3", "--", probe(), "exit", "1", "5"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.code(), 5) << r.err;
  EXPECT_NE(r.err.find("strata-run: rank 1 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited with status 5"), std::string::npos) << r.err;
}

TEST(Launcher, RankKilledBySignalIsReportedAndOthersTerminated) {
  TempDir d;
  const auto r = run({"-n", "3", "--", probe(), "hang", d.path(), "--segv", "1"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.code(), 128 + SIGSEGV) << r.err;
  EXPECT_NE(r.err.find("rank 1 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("killed by signal SIGSEGV"), std::string::npos) << r.err;
  const auto pids = d.pids("pid");
  EXPECT_EQ(pids.size(), 3u);
  expect_all_gone(pids, "rank");
  EXPECT_LT(r.seconds, 10.0);
}

// ------------------------------------------------------------------ timeout, grace, signals

TEST(Launcher, TimeoutKillsHungJobWithGrandchildren) {
  TempDir d;
  const auto r = run({"-n", "2", "--timeout", "1", "--", probe(), "hang", d.path(), "--grandchild"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.code(), 124) << r.err;
  EXPECT_NE(r.err.find("timed out after 1 s"), std::string::npos) << r.err;
  EXPECT_EQ(d.pids("pid").size(), 2u);
  EXPECT_EQ(d.pids("gpid").size(), 2u);
  expect_all_gone(d.pids("pid"), "rank");
  expect_all_gone(d.pids("gpid"), "grandchild");
  EXPECT_GE(r.seconds, 0.9);
  EXPECT_LT(r.seconds, 10.0);
}

TEST(Launcher, RanksIgnoringSigtermAreKilledAfterTheGracePeriod) {
  TempDir d;
  const auto r =
      run({"-n", "2", "--timeout", "0.5", "--grace", "0.5", "--", probe(), "hang", d.path(), "--ignore-term"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.code(), 124) << r.err;
  EXPECT_NE(r.err.find("sending SIGKILL"), std::string::npos) << r.err;
  expect_all_gone(d.pids("pid"), "rank");
  EXPECT_GE(r.seconds, 0.9);
  EXPECT_LT(r.seconds, 10.0);
}

void signal_test(int sig, bool ignore) {
  TempDir d;
  std::vector<std::string> args = {launcher(), "-n",    "3",    "--grace", "0.5",
                                   "--",       probe(), "hang", d.path(),  "--grandchild"};
  if (ignore) args.emplace_back("--ignore-term");
  LauncherRun run(args);
  ASSERT_TRUE(run.wait_for_output([](const std::string& o) { return o.find("READY") != std::string::npos; }, 20))
      << "ranks never got ready";
  ASSERT_EQ(::kill(run.pid(), sig), 0);
  const auto r = run.finish(20);
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.code(), 128 + sig) << r.err;
  EXPECT_NE(r.err.find(std::string("received SIG") + sigabbrev_np(sig)), std::string::npos) << r.err;
  EXPECT_EQ(d.pids("pid").size(), 3u);
  expect_all_gone(d.pids("pid"), "rank");
  expect_all_gone(d.pids("gpid"), "grandchild");
}

TEST(Launcher, SigintIsForwardedAndNothingSurvives) { signal_test(SIGINT, false); }
TEST(Launcher, SigtermIsForwardedAndEscalatesWhenIgnored) { signal_test(SIGTERM, true); }

// ------------------------------------------------------------------ bad arguments

struct BadArgs {
  std::vector<std::string> args;
  std::string expect;  // substring of the one-line message
};

TEST(Launcher, BadArgumentsGiveOneLineAndExitTwo) {
  const std::string p = probe();
  TempDir d;
  const std::string not_exec = d.path() + "/not-executable";
  { std::ofstream(not_exec) << "#!/bin/sh\n"; }
  ASSERT_EQ(::chmod(not_exec.c_str(), 0644), 0);
  const std::vector<BadArgs> cases = {
      {{"-n", "0", "--", p}, "-n must be >= 1"},
      {{"-n", "-3", "--", p}, "-n must be >= 1"},
      {{"-n", "two", "--", p}, "-n expects an integer"},
      {{"--", p}, "missing -n"},
      {{"-n", "2"}, "missing program"},
      {{"-n", "2", "--"}, "missing program"},
      {{"-n", "2", "--frobnicate", "--", p}, "unknown option '--frobnicate'"},
      {{"-n", "2", "--", "/nonexistent/strata/prog"}, "/nonexistent/strata/prog"},
      {{"-n", "2", "--", "strata-no-such-program-xyz"}, "not found in PATH"},
      {{"-n", "2", "--", not_exec}, "is not executable"},
      {{"-n", "2", "--", "/tmp"}, "is a directory"},
      {{"-n", "2", "--hosts", "0", "--", p}, "--hosts must be in [1, n=2]"},
      {{"-n", "2", "--hosts", "3", "--", p}, "--hosts must be in [1, n=2]"},
      {{"-n", "2", "--bind", "socket", "--", p}, "--bind expects core, numa or none"},
      {{"-n", "2", "--timeout", "-1", "--", p}, "--timeout expects"},
      {{"-n", "2", "--timeout", "0", "--", p}, "--timeout expects"},
      {{"-n", "2", "--on-failure", "ignore", "--", p}, "--on-failure expects kill or continue"},
      {{"-n", "2", "--timeout"}, "--timeout needs a value"},
  };
  for (const auto& c : cases) {
    const auto r = run(c.args, 10);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    ASSERT_FALSE(r.timed_out) << joined;
    EXPECT_EQ(r.code(), 2) << joined << "\n" << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << joined << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("strata-run: error: ", 0), 0u) << joined << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << joined << "\n" << r.err;
    EXPECT_EQ(r.out, "") << joined;
  }
}

// ------------------------------------------------------------------ rendezvous

/// Lines of @p out that contain @p needle.
std::vector<std::string> lines_with(const std::string& out, const std::string& needle) {
  std::vector<std::string> v;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(needle) != std::string::npos) v.push_back(line);
  }
  return v;
}

class AllgatherSizes : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(AllgatherSizes, BlobsArriveInRankOrderAndHostsAreBlockPlaced) {
  const int n = GetParam().first;
  const int hosts = GetParam().second;
  const auto r = run({"-n", std::to_string(n), "--hosts", std::to_string(hosts), "--", probe(), "allgather", "6"}, 60);
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.code(), 0) << r.out << r.err;
  const auto ok = lines_with(r.out, "allgather-ok");
  ASSERT_EQ(ok.size(), static_cast<std::size_t>(n)) << r.out;
  // Expected placement, computed independently of rdv::block_placement.
  std::string placement;
  std::vector<int> host_of(static_cast<std::size_t>(n));
  std::vector<int> local_of(static_cast<std::size_t>(n));
  std::vector<int> local_size(static_cast<std::size_t>(hosts));
  {
    int rank = 0;
    for (int h = 0; h < hosts; ++h) {
      const int cnt = n / hosts + (h < n % hosts ? 1 : 0);
      local_size[static_cast<std::size_t>(h)] = cnt;
      for (int l = 0; l < cnt; ++l, ++rank) {
        host_of[static_cast<std::size_t>(rank)] = h;
        local_of[static_cast<std::size_t>(rank)] = l;
        placement += " " + std::to_string(h) + ":" + std::to_string(l);
      }
    }
  }
  for (int q = 0; q < n; ++q) {
    const auto i = static_cast<std::size_t>(q);
    const std::string want =
        "rank=" + std::to_string(q) + " size=" + std::to_string(n) + " host=" + std::to_string(host_of[i]) +
        " nhosts=" + std::to_string(hosts) + " local_rank=" + std::to_string(local_of[i]) +
        " local_size=" + std::to_string(local_size[static_cast<std::size_t>(host_of[i])]) + " launcher=strata-run";
    EXPECT_EQ(lines_with(r.out, want + " ").size(), 1u) << "missing: " << want << "\n" << r.out;
  }
  for (const auto& l : ok) EXPECT_NE(l.find("placement=" + placement), std::string::npos) << l;
}

INSTANTIATE_TEST_SUITE_P(Launcher, AllgatherSizes,
                         ::testing::Values(std::make_pair(1, 1), std::make_pair(3, 1), std::make_pair(8, 1),
                                           std::make_pair(4, 2), std::make_pair(5, 2), std::make_pair(7, 3)));

TEST(Launcher, EnvironmentAndRendezvousDirectory) {
  const auto r = run({"-n", "2", "--bind", "none", "--topology", "package:2 core:2 pu:1", "--", probe(), "info"});
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.code(), 0) << r.out << r.err;
  const auto lines = lines_with(r.out, "launcher=strata-run");
  ASSERT_EQ(lines.size(), 2u) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(lines[0], m, std::regex("rdv=(\\S+)"))) << lines[0];
  const std::string sock = m[1];
  EXPECT_NE(lines[0].find("bind=none"), std::string::npos);
  EXPECT_NE(lines[0].find("topology=package:2 core:2 pu:1"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("secret_len=64"), std::string::npos) << lines[0];
  // The private directory (and socket) are gone once the launcher exits.
  struct stat st {};
  EXPECT_NE(::stat(sock.c_str(), &st), 0) << sock;
  EXPECT_NE(::stat(sock.substr(0, sock.rfind('/')).c_str(), &st), 0);
}

/// The CPUs (comma list) a probe line reports.
std::string cpus_of(const std::string& line) {
  std::smatch m;
  return std::regex_search(line, m, std::regex("cpus=(\\S+)")) ? std::string(m[1]) : std::string();
}

TEST(Launcher, BindCorePinsRanksToDisjointCores) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  if (CPU_COUNT(&mine) < 2) GTEST_SKIP() << "needs at least 2 allowed CPUs";
  const auto r = run({"-n", "2", "--bind", "core", "--", probe(), "info"});
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.code(), 0) << r.out << r.err;
  const auto l0 = lines_with(r.out, "rank=0 ");
  const auto l1 = lines_with(r.out, "rank=1 ");
  ASSERT_EQ(l0.size(), 1u);
  ASSERT_EQ(l1.size(), 1u);
  EXPECT_NE(l0[0].find("bind=core"), std::string::npos) << l0[0];
  const std::string c0 = cpus_of(l0[0]);
  const std::string c1 = cpus_of(l1[0]);
  ASSERT_FALSE(c0.empty());
  // Each core's PUs; disjoint sets for the two ranks.
  std::set<std::string> s0;
  std::istringstream a(c0);
  for (std::string t; std::getline(a, t, ',');) s0.insert(t);
  std::istringstream b(c1);
  for (std::string t; std::getline(b, t, ',');) EXPECT_EQ(s0.count(t), 0u) << c0 << " vs " << c1;
  EXPECT_LT(static_cast<int>(s0.size()), CPU_COUNT(&mine)) << "rank 0 was not narrowed: " << c0;

  const auto none = run({"-n", "2", "--bind", "none", "--", probe(), "info"});
  ASSERT_EQ(none.code(), 0) << none.err;
  for (const auto& l : lines_with(none.out, "launcher=strata-run")) {
    EXPECT_NE(l.find("bind=none"), std::string::npos) << l;
    const std::string cpus = cpus_of(l);
    EXPECT_EQ(std::count(cpus.begin(), cpus.end(), ',') + 1, CPU_COUNT(&mine)) << l;
  }
}

TEST(Launcher, RanksDieWhenTheLauncherIsKilledHard) {
  TempDir d;
  LauncherRun job({launcher(), "-n", "2", "--", probe(), "hang", d.path()});
  ASSERT_TRUE(job.wait_for_output([](const std::string& o) { return o.find("READY") != std::string::npos; }, 20));
  const auto pids = d.pids("pid");
  ASSERT_EQ(pids.size(), 2u);
  std::vector<int> fds;
  for (pid_t p : pids) fds.push_back(pidfd_open(p, 0));
  ASSERT_EQ(::kill(job.pid(), SIGKILL), 0);
  const auto r = job.finish(20);
  EXPECT_TRUE(WIFSIGNALED(r.status));
  // PR_SET_PDEATHSIG: the kernel kills every rank; wait for each with a deadline.
  for (int fd : fds) {
    ASSERT_GE(fd, 0);
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 10000), 1) << "a rank survived its launcher";
    ::close(fd);
  }
}

TEST(Launcher, RankDeathBeforeRendezvousFailsPendingAllgatherPromptly) {
  const auto r = run({"-n", "3", "--on-failure", "continue", "--", probe(), "die-early", "1", "5"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.code(), 5) << r.err;
  for (int q : {0, 2}) {
    const auto l = lines_with(r.out, "rank " + std::to_string(q) + ": allgather failed");
    ASSERT_EQ(l.size(), 1u) << r.out;
    EXPECT_NE(l[0].find("rank 1 exited with status 5"), std::string::npos) << l[0];
  }
  EXPECT_LT(r.seconds, 10.0);
}

TEST(Launcher, DeathEventsReachSurvivorsWithOnFailureContinue) {
  const auto r = run({"-n", "3", "--on-failure", "continue", "--", probe(), "watch-death", "1"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.code(), 9) << r.out << r.err;
  EXPECT_EQ(lines_with(r.out, "rank 0 saw dead ranks: 1").size(), 1u) << r.out;
  EXPECT_EQ(lines_with(r.out, "rank 2 saw dead ranks: 1").size(), 1u) << r.out;
  EXPECT_EQ(lines_with(r.out, "barrier after death failed").size(), 2u) << r.out;
  EXPECT_NE(r.err.find("rank 1 (pid "), std::string::npos) << r.err;
}

TEST(Launcher, TagOutputPrefixesEveryLine) {
  const auto r = run({"-n", "2", "--tag-output", "--", probe(), "print"});
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.code(), 0) << r.err;
  for (int q : {0, 1}) {
    const std::string t = "[" + std::to_string(q) + "] ";
    EXPECT_EQ(lines_with(r.out, t + "hello from rank " + std::to_string(q)).size(), 1u) << r.out;
    EXPECT_EQ(lines_with(r.out, t + "second line").size(), 1u) << r.out;
    EXPECT_EQ(lines_with(r.out, t + "tail without newline").size(), 1u) << r.out;
    EXPECT_EQ(lines_with(r.err, t + "err from rank " + std::to_string(q)).size(), 1u) << r.err;
  }
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) EXPECT_EQ(line[0], '[') << line;
}

// ------------------------------------------------------------------ authentication

/// Connects to the rendezvous at @p path, sends @p bytes, and returns what the
/// server sends back until it closes the connection (or 5 s pass: "timeout").
std::string impostor(const std::string& path, const std::vector<std::byte>& bytes, bool& closed) {
  closed = false;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    closed = true;
    return "connect failed";
  }
  rdv::write_all(fd, bytes.data(), bytes.size(), Clock::now() + std::chrono::seconds(5));
  std::string got;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    char buf[1024];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      closed = true;
      break;
    }
    got.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return got;
}

TEST(Launcher, RendezvousRefusesClientsWithoutTheSecret) {
  TempDir d;
  const std::string fifo = d.path() + "/go";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // O_RDWR never blocks on a FIFO; rank 1 blocks reading it until we write.
  const int go = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(go, 0);
  LauncherRun job({launcher(), "-n", "2", "--", probe(), "rdv-export", fifo});
  // Rank 0 prints the socket path and then waits in the allgather; rank 1's
  // slot is free for an impostor to take.
  std::smatch m;
  const std::regex rdv_line("RDV (\\S+)\n");
  ASSERT_TRUE(job.wait_for_output([&](const std::string& o) { return std::regex_search(o, m, rdv_line); }, 20));
  const std::string out = job.output();
  ASSERT_TRUE(std::regex_search(out, m, rdv_line));
  const std::string path = m[1];

  rdv::Secret wrong{};
  rdv::random_bytes(wrong.data(), wrong.size());
  const auto hello = rdv::frame(rdv::Type::hello, 1, wrong.data(), wrong.size());
  const std::string blob = "impostor";
  auto gather = rdv::frame(rdv::Type::allgather, 0, blob.data(), blob.size());
  std::vector<std::byte> wrong_then_gather = hello;
  wrong_then_gather.insert(wrong_then_gather.end(), gather.begin(), gather.end());
  std::vector<std::byte> garbage(100, std::byte{0x41});

  const std::vector<std::pair<std::string, std::vector<std::byte>>> attempts = {
      {"wrong secret, then allgather", wrong_then_gather},
      {"allgather without hello", gather},
      {"garbage bytes", garbage},
  };
  for (const auto& a : attempts) {
    bool closed = false;
    const std::string got = impostor(path, a.second, closed);
    EXPECT_TRUE(closed) << a.first << ": the launcher did not close the connection";
    EXPECT_EQ(got, "") << a.first << ": the launcher sent data to an unauthenticated client";
    EXPECT_EQ(got.find("endpoint-of-rank-0"), std::string::npos) << a.first;
  }

  // Release rank 1: the real job still completes with the right blobs.
  ASSERT_EQ(::write(go, "x", 1), 1);
  const auto r = job.finish(30);
  ::close(go);
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.code(), 0) << r.out << r.err;
  EXPECT_EQ(lines_with(r.out, "rdv-export ok").size(), 2u) << r.out;
  EXPECT_NE(r.err.find("refused 3 rendezvous connection(s)"), std::string::npos) << r.err;
}

}  // namespace
