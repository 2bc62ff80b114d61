// The small-message fast path over real processes: fast_rank under strata-run
// (hard timeout) for several rank counts, a smaller size bound, waiters that
// sleep at once (so late members must nudge them), inline progress, the path
// switched off, two virtual hosts (no fast path: plans), the debug log that
// shows which path ran, and a member that dies.
#include <gtest/gtest.h>

#include <string>

#include "../common/launch.hpp"

namespace {

int run(const std::string& env, const std::string& launcher_args, const std::string& rank_args, std::string* out) {
  return launch::run("fast_rank", 120, env, launcher_args, rank_args, out);
}

using launch::count;

struct Case {
  const char* name;
  const char* env;
  const char* launcher;
};

class FastPath : public ::testing::TestWithParam<Case> {};

TEST_P(FastPath, MatchesSequentialReference) {
  std::string out;
  const int rc = run(GetParam().env, GetParam().launcher, "", &out);
  EXPECT_EQ(rc, 0) << out;
  const int n = GetParam().launcher[3] - '0';
  EXPECT_EQ(count(out, "fast_rank: OK"), n) << out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, FastPath,
                         ::testing::Values(Case{"n1", "", "-n 1"}, Case{"n2", "", "-n 2"}, Case{"n3", "", "-n 3"},
                                           Case{"n5", "", "-n 5"},
                                           Case{"n3_bytes256", "STRATA_FASTPATH_BYTES=256", "-n 3"},
                                           Case{"n2_sleeping_waiters", "STRATA_PROGRESS_WAIT_SPIN=0", "-n 2"},
                                           Case{"n3_inline", "STRATA_PROGRESS_THREADS=0", "-n 3"},
                                           Case{"n2_off", "STRATA_FASTPATH=off", "-n 2"},
                                           Case{"n4_hosts2", "", "-n 4 --hosts 2"}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// The debug log names the path: small calls on one host take the fast path,
// none do when it is off, and the world's calls do not when its members are on
// two hosts.
TEST(FastPathLog, ShowsWhichPathRan) {
  std::string on, off, hosts;
  EXPECT_EQ(run("STRATA_LOG_LEVEL=debug", "-n 2", "", &on), 0) << on;
  EXPECT_GT(count(on, "on comm 0: fast path"), 100) << on;
  EXPECT_EQ(run("STRATA_LOG_LEVEL=debug STRATA_FASTPATH=off", "-n 2", "", &off), 0) << off;
  EXPECT_EQ(count(off, "fast path"), 0) << off;
  EXPECT_EQ(run("STRATA_LOG_LEVEL=debug", "-n 2 --hosts 2", "", &hosts), 0) << hosts;
  EXPECT_EQ(count(hosts, "on comm 0: fast path"), 0) << hosts;  // the split's one-member halves may use it
}

class FastPathPeerDeath : public ::testing::TestWithParam<Case> {};

// The last rank exits with status 3 after a working round: every survivor's
// pending fast allreduce fails with peer_dead, and so does its next call.
TEST_P(FastPathPeerDeath, PendingCallsFailOnEverySurvivor) {
  std::string out;
  const int rc = run(std::string("STRATA_TIMEOUT=5000 ") + GetParam().env,
                     std::string(GetParam().launcher) + " --on-failure continue", "--death", &out);
  EXPECT_EQ(rc, 3) << out;  // the victim's status
  const int n = GetParam().launcher[3] - '0';
  EXPECT_EQ(count(out, "SURVIVOR rank"), n - 1) << out;
  EXPECT_EQ(count(out, "FAILED"), 0) << out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, FastPathPeerDeath,
                         ::testing::Values(Case{"n2", "", "-n 2"}, Case{"n3", "", "-n 3"},
                                           Case{"n3_sleeping_waiters", "STRATA_PROGRESS_WAIT_SPIN=0", "-n 3"}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
