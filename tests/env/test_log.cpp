// The logger on 2 ranks under strata-run (real transports, 2 virtual hosts so
// that the fabric backend opens): the line pattern (time, host, rank, pid),
// STRATA_LOG_FILE with and without %r, and the info lines of the bootstrap,
// topology, transport and compiled plans (STRATA_BIN from CTest).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../common/launch.hpp"

namespace {

using launch::ProcessResult;
using launch::run_command;

std::string bin() {
  const char* b = std::getenv("STRATA_BIN");
  return b != nullptr ? b : "";
}

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The pid log_rank printed for @p rank ("log_rank: rank R pid P sink ...").
std::string pid_of(const std::string& out, int rank) {
  const std::string key = "log_rank: rank " + std::to_string(rank) + " pid ";
  const std::size_t at = out.find(key);
  if (at == std::string::npos) return "?";
  const std::size_t from = at + key.size();
  return out.substr(from, out.find(' ', from) - from);
}

class Logging : public ::testing::Test {
 protected:
  void SetUp() override {
    if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
    std::string t = (std::filesystem::temp_directory_path() / "strata-log.XXXXXX").string();
    dir_ = mkdtemp(t.data());
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  ProcessResult run(const std::string& log_file) const {
    return run_command("env -u STRATA_RDV -u PMIX_RANK STRATA_LOG_LEVEL=info STRATA_LOG_FILE='" + log_file + "' " +
                       bin() + "/strata-run -n 2 --hosts 2 --timeout 60 -- " + bin() + "/log_rank");
  }
  std::string dir_;
};

TEST_F(Logging, PerRankFilesHaveTheStartUpLinesAndTheAlgorithmOfEachPlan) {
  const ProcessResult r = run(dir_ + "/rank.%r.log");
  ASSERT_EQ(r.status, 0) << r.out;
  ASSERT_NE(r.out.find("log_rank: OK"), std::string::npos) << r.out;
  for (int rank : {0, 1}) {
    const std::string log = slurp(dir_ + "/rank." + std::to_string(rank) + ".log");
    ASSERT_FALSE(log.empty()) << "no rank." << rank << ".log\n" << r.out;
    const std::string tag = " rank " + std::to_string(rank) + " pid " + pid_of(r.out, rank) + "] [info] ";
    EXPECT_EQ(log.rfind("[20", 0), 0u) << log;  // starts with the date
    EXPECT_NE(log.find(tag + "bootstrap: strata-run, rank " + std::to_string(rank) + " of 2 on 2 host(s)"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find(tag + "topology: "), std::string::npos) << log;
    EXPECT_NE(log.find(tag + "transport: router(shm"), std::string::npos) << log;
    EXPECT_NE(log.find(tag + "fabric: provider "), std::string::npos) << log;
    // The concrete algorithm, never "auto".
    EXPECT_NE(log.find(tag + "plan: allreduce of 8192 elements on comm 0 (2 ranks): algorithm "), std::string::npos)
        << log;
    EXPECT_NE(log.find(tag + "plan: allgather of 4096 elements on comm 0 (2 ranks): algorithm "), std::string::npos)
        << log;
    EXPECT_EQ(log.find("algorithm auto"), std::string::npos) << log;
    // Nothing of the other rank.
    EXPECT_EQ(log.find(" rank " + std::to_string(1 - rank) + " pid "), std::string::npos) << log;
  }
}

TEST_F(Logging, OneFileWithoutPercentRHasBothRanks) {
  const std::string path = dir_ + "/all.log";
  const ProcessResult r = run(path);
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string log = slurp(path);
  EXPECT_NE(log.find(" rank 0 pid " + pid_of(r.out, 0) + "] [info] plan: allreduce"), std::string::npos) << log;
  EXPECT_NE(log.find(" rank 1 pid " + pid_of(r.out, 1) + "] [info] plan: allreduce"), std::string::npos) << log;
}

}  // namespace
