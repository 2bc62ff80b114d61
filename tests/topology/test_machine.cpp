// Machine: hwloc synthetic descriptions, XML files and this machine.
#include <gtest/gtest.h>
#include <hwloc.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "strata/transport/topology.hpp"

namespace strata {
namespace {

// A private temporary directory, removed with its files at scope exit.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base != nullptr ? base : "/tmp") + "/strata-topology-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) != nullptr) path_ = buf.data();
  }
  ~TempDir() {
    for (const std::string& f : files_) std::remove(f.c_str());
    if (!path_.empty()) rmdir(path_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }
  std::string file(const std::string& name) {
    files_.push_back(path_ + "/" + name);
    return files_.back();
  }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

// Exports the synthetic topology @p spec to an XML file at @p path.
bool export_synthetic_xml(const std::string& spec, const std::string& path) {
  hwloc_topology_t topo = nullptr;
  if (hwloc_topology_init(&topo) != 0) return false;
  const bool ok = hwloc_topology_set_synthetic(topo, spec.c_str()) == 0 && hwloc_topology_load(topo) == 0 &&
                  hwloc_topology_export_xml(topo, path.c_str(), 0) == 0;
  hwloc_topology_destroy(topo);
  return ok;
}

void expect_bad_spec(const std::string& spec) {
  try {
    const Machine m(spec);
    ADD_FAILURE() << "Machine accepted STRATA_TOPOLOGY='" << spec << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.errc(), Errc::invalid_argument) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("STRATA_TOPOLOGY"), std::string::npos) << what;
    EXPECT_NE(what.find("'" + spec + "'"), std::string::npos) << what;
  }
}

TEST(Machine, SyntheticCountsAndNumaThroughCpusetInclusion) {
  const Machine m("package:2 numa:2 core:4 pu:1");
  EXPECT_TRUE(m.synthetic());
  EXPECT_TRUE(m.emulated());
  EXPECT_EQ(m.num_packages(), 2);
  EXPECT_EQ(m.num_numa(), 4);
  EXPECT_EQ(m.num_cores(), 16);
  EXPECT_EQ(m.num_pus(), 16);
  EXPECT_EQ(m.summary(), "2 packages, 4 NUMA, 16 cores, 16 PUs");
  EXPECT_EQ(m.source(), "synthetic 'package:2 numa:2 core:4 pu:1'");
  for (int l = 0; l < 40; ++l) {
    const RankPlace p = m.place_local(l);
    const int core = l % 16;
    EXPECT_EQ(p.core, core) << "local rank " << l;
    EXPECT_EQ(p.package, core / 8) << "local rank " << l;
    EXPECT_EQ(p.numa, core / 4) << "local rank " << l;
    EXPECT_EQ(p.pu, -1);
    // Without a real binding, place_self on an emulated machine is place_local.
    EXPECT_EQ(m.place_self(l), p);
  }
}

TEST(Machine, NumaAbovePackagesAndMultiplePusPerCore) {
  const Machine m("numa:2 package:2 core:2 pu:2");
  EXPECT_EQ(m.num_numa(), 2);
  EXPECT_EQ(m.num_packages(), 4);
  EXPECT_EQ(m.num_cores(), 8);
  EXPECT_EQ(m.num_pus(), 16);
  const RankPlace p = m.place_local(5);
  EXPECT_EQ(p.core, 5);
  EXPECT_EQ(p.package, 2);
  EXPECT_EQ(p.numa, 1);
}

TEST(Machine, TopologyWithoutCoresUsesPus) {
  const Machine m("package:2 pu:3");
  EXPECT_EQ(m.num_cores(), 6);
  EXPECT_EQ(m.place_local(4).package, 1);
  EXPECT_EQ(m.place_local(4).core, 4);
}

TEST(Machine, SyntheticWithoutPuLevelGetsSinglePuCores) {
  const Machine m("package:2 core:3");
  EXPECT_EQ(m.num_cores(), 6);
  EXPECT_EQ(m.num_pus(), 6);
  EXPECT_EQ(m.place_local(3).package, 1);
}

TEST(Machine, BareAritiesAreASyntheticDescription) {
  const Machine m("2 3");
  EXPECT_TRUE(m.synthetic());
  EXPECT_EQ(m.num_pus(), 6);
}

TEST(Machine, XmlRoundTripGivesTheSameMachine) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string spec = "package:2 numa:2 core:3 pu:2";
  const std::string xml = dir.file("machine.xml");
  ASSERT_TRUE(export_synthetic_xml(spec, xml));

  const Machine syn(spec);
  const Machine loaded(xml);
  EXPECT_FALSE(loaded.synthetic());
  EXPECT_TRUE(loaded.emulated());
  EXPECT_EQ(loaded.source(), "XML '" + xml + "'");
  EXPECT_EQ(loaded.num_packages(), 2);
  EXPECT_EQ(loaded.num_numa(), 4);
  EXPECT_EQ(loaded.num_cores(), 12);
  EXPECT_EQ(loaded.num_pus(), 24);
  EXPECT_EQ(loaded.summary(), syn.summary());
  for (int l = 0; l < 30; ++l) EXPECT_EQ(loaded.place_local(l), syn.place_local(l)) << "local rank " << l;
  // Binding on an emulated machine binds nothing and succeeds.
  EXPECT_TRUE(loaded.bind_self(0, "core").is_ok());
}

TEST(Machine, BadSpecsNameTheVariableAndTheSpec) {
  expect_bad_spec("bogus:3");
  expect_bad_spec("package:2 core:x");
  expect_bad_spec("core");
  expect_bad_spec("/nonexistent/strata/machine.xml");
  expect_bad_spec("no-such-file");
}

TEST(Machine, FileThatIsNotXmlIsABadSpec) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir.file("garbage.xml");
  {
    std::ofstream out(path);
    out << "this is not an hwloc topology\n";
  }
  expect_bad_spec(path);
}

TEST(Machine, NegativeLocalRankIsRejected) {
  const Machine m("core:2");
  EXPECT_THROW((void)m.place_local(-1), Error);
  const Status s = m.bind_self(-1, "core");
  EXPECT_EQ(s.code(), Errc::invalid_argument);
  EXPECT_NE(s.message().find("local_rank"), std::string::npos) << s.message();
}

TEST(Machine, UnknownBindPolicyIsRejected) {
  const Machine m;
  const Status s = m.bind_self(0, "socket");
  EXPECT_EQ(s.code(), Errc::invalid_argument);
  EXPECT_NE(s.message().find("'socket'"), std::string::npos) << s.message();
  EXPECT_TRUE(m.bind_self(0, "none").is_ok());
}

TEST(Machine, ThisMachineLoadsAndPlacesWithinItsCores) {
  const Machine m;
  EXPECT_FALSE(m.synthetic());
  EXPECT_FALSE(m.emulated());
  EXPECT_EQ(m.source(), "this machine");
  ASSERT_GE(m.num_cores(), 1);
  EXPECT_GE(m.num_pus(), m.num_cores());
  for (int l = 0; l < 3; ++l) {
    const RankPlace p = m.place_self(l);
    EXPECT_GE(p.core, 0);
    EXPECT_LT(p.core, m.num_cores());
    EXPECT_LT(p.numa, m.num_numa());
    EXPECT_LT(p.package, m.num_packages());
  }
}

TEST(Machine, BindingToACoreIsSeenByPlaceSelf) {
  const Machine m;
  cpu_set_t saved;
  CPU_ZERO(&saved);
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  const int target = m.num_cores() - 1;  // the last core, so round-robin of local rank 0 would differ
  const Status s = m.bind_self(target, "core");
  if (!s.is_ok()) GTEST_SKIP() << "binding not permitted here: " << s.message();
  const RankPlace p = m.place_self(0);
  EXPECT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
  EXPECT_EQ(p.core, target);
  EXPECT_GE(p.pu, 0);
}

}  // namespace
}  // namespace strata
