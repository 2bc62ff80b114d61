// Every command-line tool parses with CLI11 (tools/common/strata_cli.hpp):
// --help prints the options to stdout and exits 0; a bad value exits 2 with
// one line on stderr that names the option.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/launch.hpp"

namespace {

std::string bin() {
  const char* b = std::getenv("STRATA_BIN");
  return b != nullptr ? b : "";
}

struct ToolCase {
  std::string tool;       ///< binary in STRATA_BIN
  std::string help_has;   ///< an option the --help text lists
  std::string bad_args;   ///< arguments with one bad value
  std::string bad_names;  ///< what stderr must contain (the option)
};

void PrintTo(const ToolCase& c, std::ostream* os) { *os << c.tool << " " << c.bad_args; }

class ToolCli : public ::testing::TestWithParam<ToolCase> {};

// Without a launcher (no STRATA_RDV / PMIx), so the tools run as one process and parse before anything else.
std::string clean_env() { return "env -u STRATA_RDV -u PMIX_RANK -u STRATA_RANK "; }

TEST_P(ToolCli, HelpExitsZeroAndBadValueNamesTheOption) {
  const ToolCase& c = GetParam();
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const std::string exe = bin() + "/" + c.tool;
  if (::access(exe.c_str(), X_OK) != 0) GTEST_SKIP() << exe << " is not built here";

  const launch::ProcessResult help = launch::run_command(clean_env() + exe + " --help 2>/dev/null", false);
  EXPECT_EQ(help.status, 0) << help.out;
  EXPECT_NE(help.out.find("Usage:"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find(c.help_has), std::string::npos) << help.out;

  // stderr alone (stdout to /dev/null).
  const launch::ProcessResult bad =
      launch::run_command(clean_env() + exe + " " + c.bad_args + " 2>&1 >/dev/null", false);
  EXPECT_EQ(bad.status, 2) << c.bad_args << "\n" << bad.out;
  EXPECT_NE(bad.out.find(c.bad_names), std::string::npos) << c.bad_args << "\n" << bad.out;
  EXPECT_EQ(bad.out.rfind(c.tool + ": error: ", 0), 0u) << bad.out;
  EXPECT_EQ(launch::count(bad.out, "\n"), 1) << "one line: " << bad.out;
}

INSTANTIATE_TEST_SUITE_P(
    Tools, ToolCli,
    ::testing::Values(ToolCase{"strata-demo", "--bytes", "--bytes abc", "--bytes expects a positive integer"},
                      ToolCase{"strata-trace-merge", "--prefix", "in.json -o", "-o,--output needs a value"},
                      ToolCase{"strata-run", "--on-failure", "-n two -- true", "-n expects an integer"},
                      ToolCase{"strata-run", "--tag-output", "-n 2 --frobnicate -- true", "'--frobnicate'"},
                      ToolCase{"strata-run", "--net-stats", "-n 1 --tag-output=3 -- true",
                               "--tag-output takes no value"},
                      ToolCase{"strata-net", "--slots", "--hosts 0 -- true", "--hosts expects an integer in [1, 200]"},
                      ToolCase{"strata-tune", "--ranks", "--ranks 1", "--ranks expects an integer in [2, 64]"},
                      ToolCase{"strata-sim", "--nic-gbit", "--bytes 12Q", "--bytes expects a size"},
                      ToolCase{"strata-sim", "--ppn", "--credits 0", "--credits expects an integer in [1, 64]"},
                      ToolCase{"strata-bench", "--format", "--coll allreduce --iters abc", "--iters expects"},
                      ToolCase{"strata-bench", "--shared-buffers", "--coll allreduce --format xml",
                               "--format expects table, json, osu or nccl, got 'xml'"},
                      ToolCase{"strata-bench", "--window", "--coll allreduce --sizes 8:x", "--sizes expects"},
                      ToolCase{"strata-idle", "seconds", "0.01", "seconds expects a number in [0.1, 3600]"},
                      ToolCase{"strata-trace-demo", "--rounds", "--rounds 0", "--rounds expects an integer"},
                      ToolCase{"asp", "--density", "--mode fast", "--mode expects blocking, pipelined or both"},
                      ToolCase{"fft3d", "--decomp", "--grid 3y4", "--grid,--n expects N or N1xN2xN3"},
                      ToolCase{"multigrid", "--cycles", "--levels 99", "--levels expects an integer in [0, 20]"}));

// strata-trace-merge parses every event line as JSON: escaped names survive, the
// ranks get process names, and a line that only looks like an object is refused.
TEST(TraceMerge, ParsesEventsAndRejectsALineThatIsNotJson) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  const std::string prefix = ::testing::TempDir() + "strata_tools_merge_" + std::to_string(::getpid());
  {
    std::ofstream(prefix + ".0.json") << R"({"name":"all\"re\\duce\u000a","ph":"X","pid":0,"tid":1,"ts":1.5,"dur":2})"
                                      << "\n";
    std::ofstream(prefix + ".1.json") << R"({"name":"wait","ph":"X","pid":1,"tid":1,"ts":2,"dur":1})"
                                      << "\n\n";
  }
  const launch::ProcessResult ok =
      launch::run_command(bin() + "/strata-trace-merge -o " + prefix + ".merged.json --prefix " + prefix);
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("2 events from 2 files (2 ranks)"), std::string::npos) << ok.out;
  std::ifstream in(prefix + ".merged.json");
  const auto merged = nlohmann::json::parse(in);
  ASSERT_TRUE(merged["traceEvents"].is_array());
  ASSERT_EQ(merged["traceEvents"].size(), 4u) << merged.dump(1);  // 2 events + 2 process names
  EXPECT_EQ(merged["traceEvents"][0]["name"], "all\"re\\duce\n");
  EXPECT_EQ(merged["traceEvents"][3]["args"]["name"], "rank 1");

  std::ofstream(prefix + ".1.json") << "{\"name\":\"wait\",\"pid\":1}\n{not json}\n";
  const launch::ProcessResult bad =
      launch::run_command(bin() + "/strata-trace-merge -o " + prefix + ".merged.json --prefix " + prefix);
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find(prefix + ".1.json:2: not a trace event object"), std::string::npos) << bad.out;
  for (const char* f : {".0.json", ".1.json", ".merged.json"}) std::remove((prefix + f).c_str());
}

}  // namespace
