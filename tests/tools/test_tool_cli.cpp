// Every command-line tool parses with CLI11 (engine/tools/common/strata_cli.hpp):
// --help prints the options to stdout and exits 0; a bad value exits 2 with
// one line on stderr that names the option.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
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

}  // namespace
