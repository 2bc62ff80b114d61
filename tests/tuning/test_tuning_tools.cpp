// The tuning table end to end, as processes: strata-tune --smoke writes a file
// that engines on 2 ranks (strata-run, real transports) load and strata-info
// shows, printing its progress and a table with a reason per decision; a tuned table runs collectives correctly; ranks
// with different tables agree on the defaults; a malformed file stops the engine naming the field; a file for another
// machine means defaults with one info line (STRATA_BIN from CTest).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "strata/collectives/tuning.hpp"

#include "../common/launch.hpp"

namespace {

using launch::ProcessResult;
using launch::run_command;

std::string bin() {
  const char* b = std::getenv("STRATA_BIN");
  return b != nullptr ? b : "";
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

class TuningTools : public ::testing::Test {
 protected:
  void SetUp() override {
    if (bin().empty()) GTEST_SKIP() << "STRATA_BIN not set (run through ctest)";
    std::string t = (std::filesystem::temp_directory_path() / "strata-tuning-tools.XXXXXX").string();
    dir_ = mkdtemp(t.data());
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  std::string table(const std::string& name, void (*edit)(strata::coll::TuningFile&)) const {
    strata::coll::TuningFile f;
    f.machine = strata::coll::Fingerprint::here();
    f.tool = "test";
    edit(f);
    const std::string path = dir_ + "/" + name;
    strata::coll::write_tuning_file(path, f);
    return path;
  }
  std::string ranks(int n, const std::string& args, const std::string& env = "", const std::string& launch = "") const {
    return "env -u STRATA_RDV -u PMIX_RANK -u STRATA_TUNING " + env + " " + bin() + "/strata-run -n " +
           std::to_string(n) + " " + launch + " --timeout 60 -- " + bin() + "/tuning_rank " + args;
  }
  std::string dir_;
};

TEST_F(TuningTools, SmokeRunWritesAFileThatEnginesLoadAndStrataInfoShows) {
  const std::string path = dir_ + "/smoke.json";
  const ProcessResult t = run_command(bin() + "/strata-tune --smoke -o " + path);
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_NE(t.out.find("strata-tune: wrote " + path), std::string::npos) << t.out;
  const strata::coll::TuningFile f = strata::coll::read_tuning_file(path);
  EXPECT_TRUE(f.machine.difference(strata::coll::Fingerprint::here()).empty());
  const auto meas = nlohmann::json::parse(f.measurements);
  ASSERT_TRUE(meas.contains("searches"));
  ASSERT_TRUE(meas["searches"].contains("pipeline_fragment"));
  const nlohmann::json& pf = meas["searches"]["pipeline_fragment"];
  EXPECT_EQ(pf["candidates"].size(), 2u);  // 64 KiB and the default, each measured
  // Placement control: every measurement bracketed by strata-handoff-probe (two probes each).
  ASSERT_TRUE(pf.contains("placement")) << "no placement record in the search";
  const nlohmann::json& pl = pf["placement"];
  ASSERT_TRUE(pl.contains("probes_us"));
  EXPECT_GE(pl["probes_us"].size(), 4u);
  for (const nlohmann::json& v : pl["probes_us"]) EXPECT_GT(v.get<double>(), 0.0);
  EXPECT_TRUE(meas["memcpy"].contains("hot"));

  const ProcessResult r = run_command(ranks(2, path));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("rank 0: tuning " + path + " (STRATA_TUNING)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1: tuning " + path + " (STRATA_TUNING)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tuning_rank: OK"), std::string::npos) << r.out;

  const ProcessResult i =
      run_command("env -u STRATA_RDV -u PMIX_RANK STRATA_TUNING=" + path + " " + bin() + "/strata-info");
  ASSERT_EQ(i.status, 0) << i.out;
  EXPECT_NE(i.out.find("in effect: " + path + " (STRATA_TUNING)"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("pipeline_fragment"), std::string::npos) << i.out;
}

// A tiny real tuning run (--smoke: one search, 3 interleaved rounds, a few
// seconds): progress lines as it goes, then a table whose every row parses and
// carries a decision and its reason; the file records the rounds behind it.
TEST_F(TuningTools, SmokeRunPrintsProgressAndATableWithReasons) {
  const std::string path = dir_ + "/rounds.json";
  const ProcessResult t = run_command(bin() + "/strata-tune --smoke -o " + path, /*with_stderr=*/false);
  ASSERT_EQ(t.status, 0) << t.out;
  std::istringstream lines(t.out);
  std::string line;
  bool progress = false, header = false;
  int rows = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("[ 1/1 ", 0) == 0) {
      progress = true;  // the decision line: candidates, ratios, decision
      EXPECT_NE(line.find("pipeline_fragment: default 128K vs 64K "), std::string::npos) << line;
      EXPECT_NE(line.find("of 3 rounds; placement probe "), std::string::npos) << line;
      EXPECT_FALSE(header) << "progress after the table:\n" << t.out;
    }
    if (line.rfind("field ", 0) == 0) {
      header = true;
      continue;
    }
    if (!header || line.empty() || line[0] == '(') continue;
    std::istringstream row(line);
    std::string field, decision, reason;
    unsigned long long value = 0, def = 0;
    double probe_us = -1;
    ASSERT_TRUE(static_cast<bool>(row >> field >> value >> def >> probe_us >> decision)) << line;
    EXPECT_GE(probe_us, 0.0) << line;
    std::getline(row, reason);
    EXPECT_TRUE(decision == "kept" || decision == "changed" || decision == "skipped") << line;
    EXPECT_EQ(decision == "kept", value == def) << line;
    EXPECT_GT(reason.size(), 10u) << line;
    EXPECT_NE(reason.find("over 3 rounds"), std::string::npos) << line;
    ++rows;
  }
  EXPECT_TRUE(progress) << t.out;
  EXPECT_EQ(rows, 1) << t.out;
  const auto meas = nlohmann::json::parse(strata::coll::read_tuning_file(path).measurements);
  EXPECT_EQ(meas["rule"]["rounds"], 3);
  for (const auto& [name, s] : meas["searches"].items()) {
    EXPECT_FALSE(s["reason"].get<std::string>().empty()) << name;
    EXPECT_EQ(s["rounds"], 3) << name;
    for (const nlohmann::json& c : s["candidates"]) {
      for (const nlohmann::json& p : c["times"]) EXPECT_EQ(p["rounds_us"].size(), 3u) << name;
      if (c["value"] == s["default"]) continue;
      EXPECT_EQ(c["round_ratios"].size(), 3u) << name;
      EXPECT_LE(c["ratio_min"].get<double>(), c["ratio_median"].get<double>()) << name;
      EXPECT_LE(c["ratio_median"].get<double>(), c["ratio_max"].get<double>()) << name;
      EXPECT_FALSE(c["verdict"].get<std::string>().empty()) << name;
    }
  }
}

TEST_F(TuningTools, TunedTableRunsCollectivesCorrectly) {
  const std::string path = table("tuned.json", [](strata::coll::TuningFile& f) {
    f.table.pipeline_fragment = 64 << 10;
    f.table.mapped_max_bytes = 16384;
    f.table.allreduce_rd_max_bytes = 65536;
    f.table.inline_bytes = 4096;
    // Tree decisions (docs/tuning.md): a chain with pull inside the host.
    f.table.broadcast_tree_core = 1;
    f.table.broadcast_pull_core = 1;
    f.table.reduce_tree_core = 1;
    f.table.allreduce_tree_core = 3;
  });
  for (int n : {2, 3}) {
    const ProcessResult r = run_command(ranks(n, path));
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(count(r.out, "(STRATA_TUNING) pipeline_fragment=65536 mapped_max_bytes=16384"),
              static_cast<std::size_t>(n))
        << r.out;
    EXPECT_NE(r.out.find("tuning_rank: OK"), std::string::npos) << r.out;
  }
}

// fabric_prefer_net: ranks on two (virtual) hosts take libfabric's net
// provider when the table says so and the machine has it, tcp;ofi_rxm (the
// usual order) otherwise; STRATA_PROVIDER still wins. Collectives stay correct.
TEST_F(TuningTools, PreferNetPicksTheNetProviderAcrossHosts) {
  if (run_command("fi_info -p net -t FI_EP_RDM >/dev/null 2>&1").status != 0)
    GTEST_SKIP() << "libfabric has no net provider here (fi_info -p net)";
  if (run_command("fi_info -p 'tcp;ofi_rxm' -t FI_EP_RDM >/dev/null 2>&1").status != 0)
    GTEST_SKIP() << "libfabric has no tcp;ofi_rxm provider here";
  const std::string net = table("net.json", [](strata::coll::TuningFile& f) { f.table.fabric_prefer_net = 1; });
  const std::string usual = table("usual.json", [](strata::coll::TuningFile& f) { f.table.fabric_prefer_net = 0; });
  const ProcessResult a = run_command(ranks(2, net, "", "--hosts 2"));
  ASSERT_EQ(a.status, 0) << a.out;
  EXPECT_EQ(count(a.out, "ofi:net+waitfd)"), 2u) << a.out;
  EXPECT_NE(a.out.find("tuning_rank: OK"), std::string::npos) << a.out;
  const ProcessResult b = run_command(ranks(2, usual, "", "--hosts 2"));
  ASSERT_EQ(b.status, 0) << b.out;
  EXPECT_EQ(count(b.out, "ofi:tcp;ofi_rxm"), 2u) << b.out;
  EXPECT_NE(b.out.find("tuning_rank: OK"), std::string::npos) << b.out;
  const ProcessResult c = run_command(ranks(2, net, "STRATA_PROVIDER='tcp;ofi_rxm'", "--hosts 2"));
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(count(c.out, "ofi:tcp;ofi_rxm"), 2u) << c.out;
}

TEST_F(TuningTools, RanksWithDifferentTablesAgreeOnTheDefaults) {
  const std::string a = table("a.json", [](strata::coll::TuningFile& f) { f.table.pipeline_fragment = 64 << 10; });
  const std::string b = table("b.json", [](strata::coll::TuningFile& f) { f.table.pipeline_fragment = 256 << 10; });
  const ProcessResult r = run_command(ranks(2, a + " " + b));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(count(r.out, "tuning built-in defaults (the ranks' tables differ"), 2u) << r.out;
  EXPECT_EQ(count(r.out, "pipeline_fragment=131072"), 2u) << r.out;
  EXPECT_NE(r.out.find("tuning_rank: OK"), std::string::npos) << r.out;
}

TEST_F(TuningTools, MalformedFileStopsTheEngineNamingTheField) {
  const std::string path = dir_ + "/bad.json";
  std::string text;
  {
    strata::coll::TuningFile f;
    f.machine = strata::coll::Fingerprint::here();
    text = f.to_json();
  }
  const std::string key = "\"mapped_max_bytes\": 4096";
  ASSERT_NE(text.find(key), std::string::npos);
  text.replace(text.find(key), key.size(), "\"mapped_max_bytes\": true");
  std::ofstream(path) << text;
  const ProcessResult r = run_command(ranks(2, path));
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("tuning file " + path +
                       ": field 'decisions.mapped_max_bytes': expected an unsigned integer, got boolean"),
            std::string::npos)
      << r.out;
}

TEST_F(TuningTools, AnotherMachinesFileMeansDefaultsWithOneInfoLine) {
  const std::string path = table("other.json", [](strata::coll::TuningFile& f) {
    f.machine.cpu_model = "Some Other CPU";
    f.table.pipeline_fragment = 64 << 10;
  });
  const ProcessResult r = run_command(ranks(2, path, "STRATA_LOG_LEVEL=info"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(count(r.out, "is for another machine (cpu_model: 'Some Other CPU' in the file"), 3u)
      << r.out;  // the info line (rank 0 only) and both ranks' tuning_source()
  EXPECT_EQ(count(r.out, "tuning: built-in defaults"), 1u) << r.out;
  EXPECT_EQ(count(r.out, "pipeline_fragment=131072"), 2u) << r.out;
}

}  // namespace
