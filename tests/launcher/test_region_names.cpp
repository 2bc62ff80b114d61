// Mapped regions (communicator windows) must not leave names in /dev/shm:
// once a communicator exists its members mapped each other's windows and the
// names are gone, so a job killed together with its launcher (which then
// cannot sweep), or a rank killed under a launcher that does not sweep
// (mpirun), leaves nothing behind (docs/transport.md, "Mapped regions").
// Only this job's names are looked at ("strata-<tag>-"); other tests run
// concurrently.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "../common/launch.hpp"
#include "../common/shm_names.hpp"

namespace {

using launch::count;

class RegionNames : public ::testing::TestWithParam<const char*> {};

TEST_P(RegionNames, NoneLeftWhileCommunicatorsAreInUseAndDataStillMoves) {
  std::string out;
  const int rc = launch::run("region-names-rank", 60, GetParam(), "-n 4", "check", &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(count(out, "OK rank"), 4) << out;
  EXPECT_EQ(count(out, "FAIL"), 0) << out;
}

// Progress servers, and inline mode (every wait drives progress itself).
INSTANTIATE_TEST_SUITE_P(Progress, RegionNames,
                         ::testing::Values("STRATA_PROGRESS_THREADS=1", "STRATA_PROGRESS_THREADS=0"));

TEST(RegionNames, NoneLeftOnTwoHosts) {
  std::string out;
  const int rc = launch::run("region-names-rank", 60, "", "-n 4 --hosts 2", "check", &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(count(out, "OK rank"), 4) << out;
}

/// Reads @p fd into @p out until @p done(out) or end of file; false on timeout.
template <class Done>
bool read_until(int fd, std::string* out, Done done, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  char buf[1024];
  while (!done(*out)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) return true;  // every writer is gone
    if (n > 0) out->append(buf, static_cast<std::size_t>(n));
  }
  return true;
}

// Regression: `timeout -s KILL 2 strata-run -n 2 -- strata-bench ...` left
// the ranks' 4 MiB window regions in /dev/shm until reboot.
TEST(RegionNames, NothingLeftWhenTheLauncherIsKilled) {
  constexpr int kRanks = 3;
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  const std::string run = launch::bin() + "/strata-run";
  const std::string prog = launch::bin() + "/region-names-rank";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(fds[1], 1);  // the ranks inherit it: the pipe ends when all of them are gone
    ::execl(run.c_str(), run.c_str(), "-n", "3", "--timeout", "60", "--", prog.c_str(), "hold",
            static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(fds[1]);
  std::string out;
  const bool ready = read_until(
      fds[0], &out, [](const std::string& s) { return count(s, "READY ") == kRanks; }, std::chrono::seconds(40));
  // The launcher dies without a chance to sweep; its ranks die with it.
  ::kill(pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  const bool closed = read_until(
      fds[0], &out, [](const std::string&) { return false; }, std::chrono::seconds(30));
  ::close(fds[0]);
  ASSERT_TRUE(ready && count(out, "READY ") == kRanks) << out;
  ASSERT_TRUE(closed) << "the ranks outlived the launcher\n" << out;
  const std::size_t at = out.find("READY ") + 6;
  const std::string prefix = out.substr(at, out.find('\n', at) - at);
  ASSERT_EQ(prefix.rfind("strata-", 0), 0u) << out;
  const std::vector<std::string> left = shm_names::in_dev_shm(prefix);
  for (const std::string& n : left) {
    ADD_FAILURE() << "/dev/shm/" << n << " was left behind";
    ::shm_unlink(("/" + n).c_str());  // do not leave it to the next reboot
  }
}

}  // namespace
