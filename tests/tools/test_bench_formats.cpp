// strata-bench's output formats: bus bandwidth as nccl-tests defines it (unit),
// and `--format osu` / `--format nccl` / `--json` of a tiny 2-rank run under
// strata-run (integration).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../common/launch.hpp"
#include "common/bench_util.hpp"

namespace {

using strata::bench::Record;

std::string bin() {
  const char* b = std::getenv("STRATA_BIN");
  return b != nullptr ? b : "";
}

Record rec(const std::string& coll, std::size_t bytes, int ranks, double median_us) {
  Record r;
  r.library = "strata";
  r.collective = coll;
  r.bytes = bytes;
  r.ranks = ranks;
  r.median_us = median_us;
  return r;
}

TEST(BenchFormats, BusBandwidthFollowsNcclTests) {
  // 1 MB in 1000 us = 1 GB/s algorithm bandwidth.
  EXPECT_DOUBLE_EQ(strata::bench::algbw_GBps(rec("allreduce", 1000000, 4, 1000)), 1.0);
  EXPECT_DOUBLE_EQ(strata::bench::busbw_GBps(rec("allreduce", 1000000, 4, 1000)), 1.5);        // 2(n-1)/n
  EXPECT_DOUBLE_EQ(strata::bench::busbw_GBps(rec("reduce_scatter", 1000000, 4, 1000)), 0.75);  // (n-1)/n
  EXPECT_DOUBLE_EQ(strata::bench::busbw_GBps(rec("bcast", 1000000, 4, 1000)), 1.0);
  EXPECT_DOUBLE_EQ(strata::bench::busbw_GBps(rec("reduce", 1000000, 4, 1000)), 1.0);
  // allgather / alltoall: Record::bytes is one rank's block, nccl-tests counts the whole buffer.
  EXPECT_DOUBLE_EQ(strata::bench::algbw_GBps(rec("allgather", 250000, 4, 1000)), 1.0);
  EXPECT_DOUBLE_EQ(strata::bench::busbw_GBps(rec("allgather", 250000, 4, 1000)), 0.75);
  EXPECT_DOUBLE_EQ(strata::bench::busbw_GBps(rec("alltoall", 250000, 4, 1000)), 0.75);
  EXPECT_DOUBLE_EQ(strata::bench::busbw_GBps(rec("barrier", 0, 4, 10)), 0.0);
  EXPECT_DOUBLE_EQ(strata::bench::algbw_GBps(rec("allreduce", 1000, 4, 0)), 0.0);  // no time, no bandwidth
}

TEST(BenchFormats, JsonRecordsEscapeAndCarryBandwidths) {
  Record r = rec("allreduce", 1000000, 2, 1000);
  r.variant = "odd\"name\\\n";
  const auto j = strata::bench::to_json({r});
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["variant"], "odd\"name\\\n");
  EXPECT_DOUBLE_EQ(j[0]["busbw_GBps"].get<double>(), 1.0);  // 2(n-1)/n = 1 at n = 2
  // write_json's text parses back to the same records.
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  strata::bench::write_json(f, {r, rec("bcast", 8, 2, 1)});
  std::rewind(f);
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  const auto back = nlohmann::json::parse(text);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0]["variant"], r.variant);
  EXPECT_EQ(back[1]["collective"], "bcast");
}

// Numbers of a data line ("8   12.34 ..."), or empty for a comment / header line.
std::vector<double> numbers(const std::string& line) {
  std::vector<double> v;
  if (line.empty() || line[0] == '#') return v;
  std::istringstream in(line);
  std::string w;
  while (in >> w) {
    char* end = nullptr;
    const double x = std::strtod(w.c_str(), &end);
    if (*end != '\0') return {};
    v.push_back(x);
  }
  return v;
}

std::string run_bench(const std::string& args) {
  const std::string cmd = "env -u STRATA_RDV -u PMIX_RANK " + bin() + "/strata-run -n 2 --timeout 60 -- " + bin() +
                          "/strata-bench --coll allreduce,allgather --sizes 8,64 --iters 5 --warmup 1 --quiet " + args;
  const launch::ProcessResult r = launch::run_command(cmd, /*with_stderr=*/false);
  EXPECT_EQ(r.status, 0) << cmd << "\n" << r.out;
  return r.out;
}

TEST(BenchFormats, OsuLayoutUnderStrataRun) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  if (::access((bin() + "/strata-bench").c_str(), X_OK) != 0)
    GTEST_SKIP() << "strata-bench is not built here (-DSTRATA_BUILD_BENCH=OFF)";
  const std::string out = run_bench("--format osu -f");
  EXPECT_NE(out.find("# strata Allreduce Latency Test"), std::string::npos) << out;
  EXPECT_NE(out.find("# strata Allgather Latency Test"), std::string::npos) << out;
  EXPECT_NE(out.find("# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("library"), std::string::npos) << "no table header in --format osu:\n" << out;
  std::istringstream in(out);
  std::string line;
  std::vector<std::vector<double>> rows;
  while (std::getline(in, line))
    if (auto v = numbers(line); !v.empty()) rows.push_back(v);
  ASSERT_EQ(rows.size(), 4u) << out;  // 2 collectives x 2 sizes
  for (const auto& v : rows) {
    ASSERT_EQ(v.size(), 5u) << out;
    EXPECT_TRUE(v[0] == 8 || v[0] == 64) << out;
    EXPECT_GT(v[1], 0) << out;             // avg
    EXPECT_LE(v[2], v[1] + 0.011) << out;  // min <= avg (2-decimal rounding)
    EXPECT_GE(v[3] + 0.011, v[1]) << out;  // max >= avg
    EXPECT_EQ(v[4], 5) << out;             // iterations
  }
}

TEST(BenchFormats, NcclLayoutAndJsonUnderStrataRun) {
  if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
  if (::access((bin() + "/strata-bench").c_str(), X_OK) != 0)
    GTEST_SKIP() << "strata-bench is not built here (-DSTRATA_BUILD_BENCH=OFF)";
  const std::string json = ::testing::TempDir() + "strata_bench_formats_" + std::to_string(::getpid()) + ".json";
  const std::string out = run_bench("--format nccl --check --json " + json);
  EXPECT_NE(out.find("algbw"), std::string::npos) << out;
  EXPECT_NE(out.find("busbw"), std::string::npos) << out;
  std::istringstream in(out);
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    ++rows;
    std::istringstream w(line);
    std::string size, count, type, redop, root, time, algbw, busbw, wrong;
    w >> size >> count >> type >> redop >> root >> time >> algbw >> busbw >> wrong;
    EXPECT_EQ(type, "float") << line;
    EXPECT_EQ(wrong, "0") << "--check passed: " << line;
    EXPECT_GT(std::stod(time), 0) << line;
    // n = 2: allreduce busbw = algbw x 1, allgather busbw = algbw x 1/2 (3 decimals printed).
    const double factor = redop == "sum" ? 1.0 : 0.5;
    EXPECT_NEAR(std::stod(busbw), std::stod(algbw) * factor, 0.0011) << line;
  }
  EXPECT_EQ(rows, 4) << out;
  std::ifstream f(json);
  ASSERT_TRUE(f) << json;
  const auto j = nlohmann::json::parse(f);
  ASSERT_EQ(j.size(), 4u) << j.dump(1);
  for (const auto& r : j) {
    EXPECT_EQ(r["ranks"], 2);
    EXPECT_TRUE(r["check_ok"].get<bool>());
    EXPECT_GE(r["busbw_GBps"].get<double>(), 0.0);
  }
  std::remove(json.c_str());
}

}  // namespace
