// strata::Window over real processes: win_rank under strata-run (hard
// timeout), over shared memory (-n 2) and shm + libfabric (-n 4 --hosts 2),
// and a member that dies with a window open.
#include <gtest/gtest.h>

#include "../common/launch.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>

namespace {

using launch::bin;

int run(const std::string& env, const std::string& launcher_args, const std::string& rank_args, std::string* out) {
  return launch::run("win_rank", 100, env, launcher_args, rank_args, out);
}

using launch::count;

struct Case {
  const char* name;
  const char* launcher;
  const char* args;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class WindowOverProcesses : public ::testing::TestWithParam<Case> {};

TEST_P(WindowOverProcesses, EveryScenarioPasses) {
  std::string out;
  const int rc = run("", GetParam().launcher, GetParam().args, &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(count(out, "win_rank: OK"), 1) << out;
  EXPECT_EQ(count(out, "FAILED"), 0) << out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, WindowOverProcesses,
                         ::testing::Values(Case{"n2", "-n 2", ""}, Case{"n4_hosts2", "-n 4 --hosts 2", "--quick"},
                                           Case{"n3", "-n 3", "--quick"}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

class WindowPeerDeath : public ::testing::TestWithParam<Case> {};

// The last rank exits with status 3 while the others wait on the window:
// every survivor's wait fails with peer_dead (launcher report), nobody hangs.
TEST_P(WindowPeerDeath, PendingWaitsFailOnEverySurvivor) {
  std::string out;
  const launch::DeathGate gate;
  ASSERT_TRUE(gate.ok());
  const int rc = run(gate.env() + "STRATA_TIMEOUT=5000", std::string(GetParam().launcher) + " --on-failure continue",
                     "--death", &out);
  EXPECT_EQ(rc, 3) << out;  // the victim's status
  const int n = GetParam().launcher[3] - '0';
  EXPECT_EQ(count(out, "SURVIVOR rank"), n - 1) << out;
  EXPECT_EQ(count(out, "FAILED"), 0) << out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, WindowPeerDeath,
                         ::testing::Values(Case{"n2", "-n 2", ""}, Case{"n4_hosts2", "-n 4 --hosts 2", ""}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
