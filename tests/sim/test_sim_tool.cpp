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
  // The automatic choice at 256 KiB with 4 ranks on every host: single copy inside each host.
  EXPECT_NE(r.out.find("algorithm hier-single-copy"), std::string::npos) << r.out;
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
        Case{"--algo nonsense", "argument 'algorithm' = 'nonsense'"}, Case{"--no-such-flag", "--no-such-flag"}}) {
    const ProcessResult r = run_command(sim() + " " + c.args);
    EXPECT_NE(r.status, 0) << c.args << ": " << r.out;
    EXPECT_NE(r.out.find(c.named), std::string::npos) << c.args << ": " << r.out;
  }
}

std::string tune() {
  const char* b = std::getenv("STRATA_BIN");
  return b != nullptr ? std::string(b) + "/strata-tune" : std::string();
}

// The "decisions" object of a tuning file's text.
std::string decisions_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string t = ss.str();
  const std::size_t a = t.find("\"decisions\"");
  const std::size_t b = t.find('}', a);
  return a == std::string::npos || b == std::string::npos ? std::string() : t.substr(a, b - a);
}

TEST(SimTool, TuneSimulateWritesAValidDeterministicTableThatStrataSimApplies) {
  if (sim().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const std::string dir = ::testing::TempDir();
  const std::string f1 = dir + "strata_tune_sim_1.json", f2 = dir + "strata_tune_sim_2.json";
  const std::string cmd = tune() + " --simulate --smoke --hosts 4 --topology 'package:1 numa:1 core:4 pu:1' -o ";
  const ProcessResult a = run_command(cmd + f1);
  ASSERT_EQ(a.status, 0) << a.out;
  EXPECT_NE(a.out.find("broadcast_tree_host"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("speedup"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("wrote " + f1), std::string::npos) << a.out;
  const ProcessResult b = run_command(cmd + f2);
  ASSERT_EQ(b.status, 0) << b.out;
  const std::string d = decisions_of(f1);
  EXPECT_NE(d.find("\"broadcast_pull_core\""), std::string::npos) << d;
  EXPECT_EQ(d, decisions_of(f2));
  // strata-sim compiles under it (and STRATA_TUNING names it the same way).
  const ProcessResult s = run_command(sim() + " --hosts 4 --topology 'package:1 numa:1 core:4 pu:1' --bytes 64K " +
                                      "--quiet --tuning " + f1);
  ASSERT_EQ(s.status, 0) << s.out;
  EXPECT_NE(s.out.find(", tuning " + f1), std::string::npos) << s.out;
  const ProcessResult e = run_command("STRATA_TUNING=" + f1 + " " + sim() +
                                      " --hosts 4 --topology 'package:1 numa:1 core:4 pu:1' --bytes 64K --quiet");
  ASSERT_EQ(e.status, 0) << e.out;
  EXPECT_EQ(e.out, s.out);
  std::remove(f1.c_str());
  std::remove(f2.c_str());
}

TEST(SimTool, TuneSimulateRefusesMissingOrMisplacedMachineArguments) {
  if (sim().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  ProcessResult r = run_command(tune() + " --simulate -o /dev/null");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("--simulate needs --machine"), std::string::npos) << r.out;
  r = run_command(tune() + " --machine x.machine");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("need --simulate"), std::string::npos) << r.out;
  r = run_command(tune() + " --simulate --machine /nonexistent.machine");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("/nonexistent.machine"), std::string::npos) << r.out;
  r = run_command(sim() + " --tuning /nonexistent.json");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("/nonexistent.json"), std::string::npos) << r.out;
}

}  // namespace
