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
                      Case{"n3_hosts2_large", "", "-n 3 --hosts 2", "--large"}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
