// strata-info as a process: alone and under strata-run (STRATA_BIN from CTest).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "../common/launch.hpp"

namespace {

using launch::ProcessResult;

// Runs a shell command line, capturing stdout; stderr goes to the test log.
ProcessResult run_command(const std::string& command) { return launch::run_command(command, /*with_stderr=*/false); }

std::string bin() {
  const char* b = std::getenv("STRATA_BIN");
  return b != nullptr ? b : "";
}

TEST(StrataInfo, AloneWithASyntheticMachinePrintsItsSections) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const ProcessResult r = run_command("env -u STRATA_RDV -u PMIX_RANK STRATA_TOPOLOGY='package:2 numa:2 core:4 pu:1' " +
                                      bin() + "/strata-info");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("host 0: 2 packages, 4 NUMA, 16 cores, 16 PUs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("== leaders"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("== transports"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("STRATA_TOPOLOGY=package:2 numa:2 core:4 pu:1"), std::string::npos) << r.out;
}

TEST(StrataInfo, HidesSecretLookingVariables) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const ProcessResult r =
      run_command("env -u STRATA_RDV -u PMIX_RANK STRATA_TEST_SECRET=hunter2 " + bin() + "/strata-info --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("hunter2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"STRATA_TEST_SECRET\": \"(hidden, 7 chars)\""), std::string::npos) << r.out;
}

TEST(StrataInfo, BadTopologyFailsWithTheSpecNamed) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const ProcessResult r =
      run_command("env -u STRATA_RDV -u PMIX_RANK STRATA_TOPOLOGY='bogus:3' " + bin() + "/strata-info 2>&1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("STRATA_TOPOLOGY='bogus:3'"), std::string::npos) << r.out;
}

TEST(StrataInfo, UnknownArgumentExitsWithTwo) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const ProcessResult r = run_command(bin() + "/strata-info --no-such-flag 2>&1");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--no-such-flag"), std::string::npos) << r.out;
}

TEST(StrataInfo, UnderStrataRunFourRanksOnTwoVirtualHosts) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const ProcessResult r =
      run_command(bin() + "/strata-run -n 4 --hosts 2 --timeout 60 --topology 'package:2 core:2 pu:1' -- " + bin() +
                  "/strata-info --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\"ranks\": 4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"hosts\": 2"), std::string::npos) << r.out;
  // Block placement: host 0 = ranks 0,1 (cores 0,1, package 0); host 1 = ranks 2,3.
  EXPECT_NE(r.out.find("\"leaders\": {\"host\": [0,2], \"package\": [0,2], \"numa\": [0,2]}"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("{\"rank\": 3, \"host\": 1, \"package\": 0, \"numa\": 0, \"core\": 1"), std::string::npos)
      << r.out;
}

}  // namespace
