// strata-info as a process: alone and under strata-run (STRATA_BIN from CTest).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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
  EXPECT_NE(r.out.find("STRATA_TOPOLOGY=package:2 numa:2 core:4 pu:1\n"), std::string::npos) << r.out;
}

// --plan of an automatic 1 MiB broadcast on 4 ranks over 2 hosts: the
// same-host edges read single copy out of the parent's buffer (docs/algorithms.md,
// "Single copy across hosts"), the edge between the hosts pushes; with
// STRATA_SINGLE_COPY=off every edge pushes.
TEST(StrataInfo, PlanMarksTheSingleCopyEdgesOfAMultiHostBroadcast) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const std::string cmd = bin() + "/strata-info --plan broadcast --bytes 1048576 --ranks 4 --hosts 2";
  const ProcessResult r = run_command("env -u STRATA_TOPOLOGY -u STRATA_SINGLE_COPY " + cmd);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\n  -> 2  host 1 package 0 numa 0  [host, push]\n    -> 3  host 1 package 0 numa 0  [core, "
                       "single copy]\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\n  -> 1  host 0 package 0 numa 0  [core, single copy]\n"), std::string::npos) << r.out;
  const ProcessResult off = run_command("env -u STRATA_TOPOLOGY STRATA_SINGLE_COPY=off " + cmd);
  ASSERT_EQ(off.status, 0) << off.out;
  EXPECT_EQ(off.out.find("single copy"), std::string::npos) << off.out;
  EXPECT_NE(off.out.find("\n  -> 1  host 0 package 0 numa 0  [core, push]\n"), std::string::npos) << off.out;
}

// --plan on a synthetic two-package machine (STRATA_TOPOLOGY, ranks placed as
// the engine places them): the tree is printed, one edge a line, and the
// package level shows: 0 -> 4 crosses the packages of host 0, 8 -> 12 those of
// host 1, and the NUMA regions of package 1 hang off its leader 4, not off 0.
TEST(StrataInfo, PlanPrintsTheTreeWithItsPackageLevelOnATwoPackageMachine) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const ProcessResult r =
      run_command("STRATA_TOPOLOGY='package:2 numa:2 core:2 pu:1' " + bin() +
                  "/strata-info --plan broadcast --bytes 4096 --ranks 16 --hosts 2 --direction package:pull");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("broadcast 4096 B on 16 ranks, 2 hosts, each host 2 packages, 4 NUMA, 8 cores, 8 PUs: tree\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("tree: host:binomial,package:binomial,numa:binomial,core:flat\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n0  host 0 package 0 numa 0  (root)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  -> 8  host 1 package 0 numa 0  [host, push]\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n    -> 12  host 1 package 1 numa 2  [package, pull]\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  -> 4  host 0 package 1 numa 2  [package, pull]\n    -> 6  host 0 package 1 numa 3  "
                       "[numa, push]\n"),
            std::string::npos)
      << r.out;
  std::size_t edges = 0;
  for (std::size_t at = r.out.find("-> "); at != std::string::npos; at = r.out.find("-> ", at + 1)) ++edges;
  EXPECT_EQ(edges, 15u) << r.out;

  // --topology names the machine; a flat package level over 4 packages; the
  // extra hop of a root that leads nothing.
  const ProcessResult f = run_command("env -u STRATA_TOPOLOGY " + bin() +
                                      "/strata-info --plan reduce --ranks 4 --algo tree --topology 'package:4 core:1 "
                                      "pu:1' --tree package:flat");
  ASSERT_EQ(f.status, 0) << f.out;
  EXPECT_NE(f.out.find("tree: host:binomial,package:flat,numa:binomial,core:flat\n"), std::string::npos) << f.out;
  for (const char* e : {"\n  -> 1  host 0 package 1", "\n  -> 2  host 0 package 2", "\n  -> 3  host 0 package 3"})
    EXPECT_NE(f.out.find(e), std::string::npos) << e << "\n" << f.out;

  // One package per host (no topology): no package edge.
  const ProcessResult one =
      run_command("env -u STRATA_TOPOLOGY " + bin() + "/strata-info --plan broadcast --ranks 8 --hosts 2 --bytes 4096");
  ASSERT_EQ(one.status, 0) << one.out;
  EXPECT_NE(one.out.find("[host, push]"), std::string::npos) << one.out;
  EXPECT_EQ(one.out.find("[package"), std::string::npos) << one.out;
}

TEST(StrataInfo, FlagsSetVariablesStrataDoesNotRead) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const ProcessResult r =
      run_command("env -u STRATA_RDV -u PMIX_RANK STRATA_TIMOUT=5 STRATA_TIMEOUT=6 " + bin() + "/strata-info");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("STRATA_TIMOUT=5  (not read by strata: a typo?)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("STRATA_TIMEOUT=6\n"), std::string::npos) << r.out;
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

TEST(StrataInfo, ConfigListsEveryVariableWithTypeDefaultAndValue) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  for (const char* flag : {"-c", "--config"}) {
    const ProcessResult r = run_command("env STRATA_TIMEOUT=4321 " + bin() + "/strata-info " + flag);
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("STRATA_TIMEOUT  [integer 1..86400000 (ms); default 30000; transport]\n    = 4321\n"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("STRATA_LOG_FILE  [path; default stderr; log]"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("STRATA_FI_DOORBELL  ["), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("STRATA_RANK  [integer; default -; launcher; set by strata-run]"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("== machine"), std::string::npos) << r.out;  // the listing only
  }
}

TEST(StrataInfo, VersionPrintsTheBuildConfiguration) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const ProcessResult r = run_command(bin() + "/strata-info --version");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* line : {"strata-info (strata ", "\nbuild type: ", "\ncompiler: ", "\nsanitizers: ",
                           "\nPMIx bootstrap: ", "\nMPI interop: ", "\nlibfabric: ", "\nfabric providers with RMA: "})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
}

TEST(StrataInfo, MalformedTuningFileExitsWithOne) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const std::string path =
      (std::filesystem::temp_directory_path() / ("strata-info-bad-tuning." + std::to_string(::getpid()) + ".json"))
          .string();
  std::ofstream(path) << "{ \"version\": ";
  const ProcessResult r =
      run_command("env -u STRATA_RDV -u PMIX_RANK STRATA_TUNING=" + path + " " + bin() + "/strata-info 2>&1");
  std::filesystem::remove(path);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("strata-info: the tuning table in effect is unusable: tuning file " + path), std::string::npos)
      << r.out;
}

TEST(StrataInfo, UnderStrataRunFourRanksOnTwoVirtualHosts) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const ProcessResult r =
      run_command(bin() + "/strata-run -n 4 --hosts 2 --timeout 60 --topology 'package:2 core:2 pu:1' -- " + bin() +
                  "/strata-info --json");
  ASSERT_EQ(r.status, 0) << r.out;
  // Rank 0 prints one JSON document; launcher lines may surround it.
  const std::size_t a = r.out.find("{\n");
  const std::size_t b = r.out.find("\n}", a);
  ASSERT_TRUE(a != std::string::npos && b != std::string::npos) << r.out;
  const nlohmann::json doc = nlohmann::json::parse(r.out.substr(a, b + 2 - a), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  EXPECT_EQ(doc["ranks"], 4) << r.out;
  EXPECT_EQ(doc["hosts"], 2) << r.out;
  // Block placement: host 0 = ranks 0,1 (cores 0,1, package 0); host 1 = ranks 2,3.
  const std::vector<int> leaders{0, 2};
  EXPECT_EQ(doc["leaders"]["host"].get<std::vector<int>>(), leaders) << r.out;
  EXPECT_EQ(doc["leaders"]["package"].get<std::vector<int>>(), leaders) << r.out;
  EXPECT_EQ(doc["leaders"]["numa"].get<std::vector<int>>(), leaders) << r.out;
  const nlohmann::json& p3 = doc["places"][3];
  EXPECT_EQ(p3["rank"], 3);
  EXPECT_EQ(p3["host"], 1);
  EXPECT_EQ(p3["package"], 0);
  EXPECT_EQ(p3["numa"], 0);
  EXPECT_EQ(p3["core"], 1);
}

}  // namespace
