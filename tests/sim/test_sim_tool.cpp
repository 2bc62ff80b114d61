// strata-sim as a process (STRATA_BIN from CTest): output, CSV, determinism,
// bad input named with a non-zero exit.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "../common/launch.hpp"

namespace {

using launch::ProcessResult;
using launch::run_command;

std::string sim() {
  const char* b = std::getenv("STRATA_BIN");
  return b != nullptr ? std::string(b) + "/strata-sim" : std::string();
}

// The output without the wall-time line (compile / simulate seconds vary).
std::string stable(const std::string& out) {
  std::istringstream in(out);
  std::string line, kept;
  while (std::getline(in, line))
    if (line.find("compile ") == std::string::npos) kept += line + "\n";
  return kept;
}

TEST(SimTool, PrintsCompletionAndCriticalPathAndWritesCsv) {
  if (sim().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const std::string csv = ::testing::TempDir() + "strata_sim_tool.csv";
  const ProcessResult r = run_command(sim() + " --hosts 4 --topology 'package:2 numa:1 core:2 pu:1' --coll allreduce" +
                                      " --bytes 256K --critical 5 --csv " + csv);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("allreduce 262144 B on 16 ranks (4 hosts"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("algorithm rabenseifner"), std::string::npos) << r.out;  // the automatic choice at 256 KiB
  EXPECT_NE(r.out.find("completion us: min "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("critical path (latest first; 5 steps shown)"), std::string::npos) << r.out;
  std::ifstream f(csv);
  std::string line;
  int lines = 0;
  std::getline(f, line);
  EXPECT_EQ(line, "rank,host,numa,finish_us");
  while (std::getline(f, line)) ++lines;
  EXPECT_EQ(lines, 16);
  std::remove(csv.c_str());
}

TEST(SimTool, SameArgumentsSameOutput) {
  if (sim().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const std::string cmd = sim() + " --hosts 3 --topology 'package:2 numa:2 core:2 pu:1' --bytes 3M --root 7 --calls 3" +
                          " --nonblocking --critical 20";
  const ProcessResult a = run_command(cmd);
  const ProcessResult b = run_command(cmd);
  ASSERT_EQ(a.status, 0) << a.out;
  EXPECT_EQ(stable(a.out), stable(b.out));
}

TEST(SimTool, BadInputIsNamedAndFails) {
  if (sim().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  struct Case {
    const char* args;
    const char* named;
  };
  for (const Case& c :
       {Case{"--coll frobnicate", "--coll 'frobnicate'"}, Case{"--bytes 12X", "--bytes"}, Case{"--hosts 0", "--hosts"},
        Case{"--nic-gbit fast", "nic_gbit"}, Case{"--topology 'bogus:3'", "topology 'bogus:3'"},
        Case{"--hosts 2 --root 99", "--root 99"}, Case{"--machine /nonexistent/m.txt", "/nonexistent/m.txt"},
        Case{"--algo nonsense", "algorithm 'nonsense'"}, Case{"--no-such-flag", "--no-such-flag"}}) {
    const ProcessResult r = run_command(sim() + " " + c.args);
    EXPECT_NE(r.status, 0) << c.args << ": " << r.out;
    EXPECT_NE(r.out.find(c.named), std::string::npos) << c.args << ": " << r.out;
  }
}

}  // namespace
