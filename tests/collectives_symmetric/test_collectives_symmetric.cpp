// Allgather(v), alltoall(v), reduce-scatter(_block), allreduce over real
// processes: runs sym_rank under strata-run (hard timeout) for several rank
// counts (up to 11), hosts, a synthetic multi-NUMA topology, fragmentations, a
// tiny window, strict sync, the alltoall throttle, the STRATA_CHECK=1
// detection of counts that disagree across ranks, and large blocks (4 MiB:
// split own-block copy, 128 KiB fragments, streaming copies) for n = 1, 2, 3, 5
// and across two virtual hosts.
#include <gtest/gtest.h>

#include "../common/launch.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

using launch::bin;

int run(const std::string& env, const std::string& launcher_args, const std::string& rank_args, std::string* out) {
  return launch::run("sym_rank", 280, env, launcher_args, rank_args, out);
}

struct Case {
  const char* name;
  const char* env;
  const char* launcher;
  const char* args;
};

class SymmetricOverProcesses : public ::testing::TestWithParam<Case> {};

TEST_P(SymmetricOverProcesses, MatchSequentialReference) {
  std::string out;
  const int rc = run(GetParam().env, GetParam().launcher, GetParam().args, &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("sym_rank: OK"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, SymmetricOverProcesses,
    ::testing::Values(Case{"n1", "", "-n 1", ""}, Case{"n2", "", "-n 2", ""}, Case{"n3", "", "-n 3", ""},
                      Case{"n5", "", "-n 5", ""},
                      Case{"n8_numa", "", "-n 8 --topology 'package:2 numa:2 core:2 pu:1'", "--quick"},
                      Case{"n4_hosts2", "", "-n 4 --hosts 2", "--quick"},
                      Case{"n3_hosts2_strict", "", "-n 3 --hosts 2", "--quick --strict"},
                      Case{"n3_fixed4096", "", "-n 3", "--quick --fragment fixed:4096"},
                      Case{"n5_halves8192", "", "-n 5", "--quick --fragment halves:8192"},
                      Case{"n4_slot8192", "STRATA_SLOT_BYTES=8192", "-n 4", "--quick"},
                      Case{"n11", "", "-n 11", "--quick"},
                      Case{"n8_hosts2_numa", "", "-n 8 --hosts 2 --topology 'package:2 numa:2 core:2 pu:1'", "--quick"},
                      Case{"n4_check_mismatch", "STRATA_CHECK=1", "-n 4", "--mismatch"},
                      Case{"n3_hosts2_check_mismatch", "STRATA_CHECK=1", "-n 3 --hosts 2", "--mismatch"},
                      Case{"n3_max_outstanding2", "STRATA_ALLTOALL_MAX_OUTSTANDING=2", "-n 3", "--quick"},
                      Case{"n1_large", "", "-n 1", "--large"}, Case{"n2_large", "", "-n 2", "--large"},
                      Case{"n3_large", "", "-n 3", "--large"}, Case{"n5_large", "", "-n 5", "--large"},
                      Case{"n3_hosts2_large", "", "-n 3 --hosts 2", "--large"},
                      // Single copy (publish / read_peer nodes over CMA) for every automatic
                      // allgather(v) and alltoall above the mapped plans; beside a second host the
                      // communicator agrees on the window protocol instead.
                      Case{"n3_single_copy", "STRATA_SINGLE_COPY=always", "-n 3", ""},
                      Case{"n2_single_copy_large", "STRATA_SINGLE_COPY=always", "-n 2", "--large"},
                      Case{"n4_hosts2_single_copy", "STRATA_SINGLE_COPY=always", "-n 4 --hosts 2", "--quick"}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace

namespace {

// The single-copy cases above must really run single-copy plans (a fallback
// to the window protocol would pass them too): the engine logs each compiled
// plan's algorithm. On one host with STRATA_SINGLE_COPY=always the plans of
// allgather(v) and alltoall above the mapped plans are "single-copy"; with =off
// none is; across two virtual hosts none is (the one-host plans need one
// host), but allgather(v) runs "hier-single-copy" there (2 + 2 members).
std::string plan_log(const std::string& env, const std::string& launcher) {
  std::string out;
  EXPECT_EQ(run(env + " STRATA_LOG_LEVEL=info", launcher, "--quick", &out), 0) << out;
  return out;
}

// Lines of @p log that contain @p a and then @p b.
int lines_with(const std::string& log, const std::string& a, const std::string& b) {
  int n = 0;
  std::size_t at = 0;
  while (at < log.size()) {
    std::size_t end = log.find('\n', at);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(at, end - at);
    const std::size_t i = line.find(a);
    if (i != std::string::npos && line.find(b, i) != std::string::npos) ++n;
    at = end + 1;
  }
  return n;
}

TEST(SingleCopy, PlansAreSingleCopyOnOneHostOnlyWhenEnabled) {
  EXPECT_GT(lines_with(plan_log("STRATA_SINGLE_COPY=always", "-n 3"), "", "algorithm single-copy"), 0);
  EXPECT_EQ(lines_with(plan_log("STRATA_SINGLE_COPY=off", "-n 3"), "", "algorithm single-copy"), 0);
  const std::string hosts2 = plan_log("STRATA_SINGLE_COPY=always", "-n 4 --hosts 2");
  EXPECT_EQ(lines_with(hosts2, "", "algorithm single-copy"), 0) << hosts2;
  EXPECT_GT(lines_with(hosts2, "plan: allgather of", "algorithm hier-single-copy"), 0) << hosts2;
  EXPECT_GT(lines_with(hosts2, "plan: allgatherv of", "algorithm hier-single-copy"), 0) << hosts2;
}

TEST(SingleCopy, BadSettingIsAnErrorNamingTheVariable) {
  std::string out;
  EXPECT_NE(run("STRATA_SINGLE_COPY=sometimes", "-n 2", "--quick", &out), 0);
  EXPECT_NE(out.find("STRATA_SINGLE_COPY='sometimes'"), std::string::npos) << out;
}

}  // namespace
