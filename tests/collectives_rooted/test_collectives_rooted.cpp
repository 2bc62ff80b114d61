// Gather / scatter (and v-variants) over real processes: runs rooted_rank under
// strata-run for several rank counts, host counts, a synthetic topology,
// algorithms, fragmentations and sync modes.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

std::string bin() {
  const char* b = std::getenv("STRATA_BIN");
  return b ? b : STRATA_BINARY_DIR "/bin";
}

// Runs rooted_rank under strata-run with a hard timeout; returns the exit status and output.
int run(const std::string& launcher_args, const std::string& rank_args, std::string* out) {
  const std::string cmd =
      bin() + "/strata-run " + launcher_args + " --timeout 400 -- " + bin() + "/rooted_rank " + rank_args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out->append(buf);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct Case {
  const char* launcher;
  const char* args;
};

class RootedOverProcesses : public ::testing::TestWithParam<Case> {};

TEST_P(RootedOverProcesses, MatchSequentialReference) {
  std::string out;
  const int rc = run(GetParam().launcher, GetParam().args, &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("rooted_rank: OK"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, RootedOverProcesses,
    ::testing::Values(Case{"-n 1", ""}, Case{"-n 2", ""}, Case{"-n 3", "--quick"}, Case{"-n 5", "--quick --algo ring"},
                      Case{"-n 5 --hosts 2", "--quick --algo tree"},
                      Case{"-n 8 --topology 'package:2 numa:2 core:2 pu:1'", "--quick --algo tree"},
                      Case{"-n 8 --topology 'package:2 numa:2 core:2 pu:1'", "--quick --algo flat"},
                      Case{"-n 4 --hosts 2", "--quick --algo tree --fragment fixed:4096 --strict"},
                      Case{"-n 3", "--quick --tree host:flat,numa:binary,core:3 --fragment halves:8192"},
                      Case{"-n 3 --hosts 2", "--quick --strict --algo ring"},
                      // Pull (receiver-reading) scatters: 11 ranks, two hosts (gets over libfabric), the
                      // three-level tree with mixed directions, the single-level tree, default algorithms.
                      Case{"-n 11", "--quick --algo tree --direction pull"},
                      Case{"-n 5 --hosts 2", "--quick --algo tree --direction pull --fragment halves:8192"},
                      Case{"-n 8 --topology 'package:2 numa:2 core:2 pu:1'",
                           "--quick --algo tree --direction host:pull,numa:push,core:pull --fragment fixed:4096"},
                      Case{"-n 3", "--quick --algo single --direction single:pull --strict"},
                      Case{"-n 4 --hosts 2", "--quick --skip-flight --direction pull"}));

}  // namespace
