// The simulator against closed forms on small synthetic machines (one rank
// per host, only the NIC costs anything), determinism, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/sim/autotune.hpp"
#include "strata/sim/sim.hpp"

namespace {

using strata::sim::CostModel;
using strata::sim::MachineSpec;
using strata::sim::Result;
namespace coll = strata::coll;

constexpr double kBw = 10e9;  // 80 Gbit/s
constexpr std::uint64_t kFrag = 128 * 1024;

struct Job {
  std::vector<strata::RankPlace> places;
  coll::Group group;
  coll::Call call;
};

// A collective on every rank of `hosts` hosts of synthetic topology `topology`.
Job machine_job(int hosts, const char* topology, coll::Kind kind, std::uint64_t count, int root = 0) {
  MachineSpec m;
  m.hosts = hosts;
  m.topology = topology;
  Job r;
  r.places = strata::sim::place_ranks(m);
  r.group = strata::sim::world_group(r.places);
  r.call.kind = kind;
  r.call.count = count;
  r.call.root = root;
  return r;
}

// n hosts of one core each.
Job one_per_host(int n, coll::Kind kind, std::uint64_t bytes) { return machine_job(n, "core:1", kind, bytes); }

Result simulate(const Job& r, const CostModel& c) { return strata::sim::simulate(r.group, r.call, r.places, c); }

TEST(Sim, PipelinedChainBroadcastTakesKPlusNMinus2FragmentTimes) {
  for (int n : {2, 3, 5, 8}) {
    Job r = one_per_host(n, coll::Kind::broadcast, 8 * kFrag);  // k = 8 fragments
    r.call.algo.name = "single";
    r.call.algo.hierarchical = false;
    r.call.algo.single = {coll::Shape::knomial, 1};  // radix 1 = chain
    r.call.algo.fragment = kFrag;
    const double step = static_cast<double>(kFrag) / kBw;
    const Result pure = simulate(r, CostModel::pure_network(kBw, 0));
    EXPECT_NEAR(pure.max_finish(), (8 + n - 2) * step, 1e-9) << "n=" << n;
    // With latency L: the fragments stream, so each hop adds one L. With
    // grants (the default, as in the engine) the root's first put waits on
    // its copy of the child's flag: no message; with signals (no flags) it
    // waits for a ready-to-receive signal first: one L more.
    const double lat = 2e-6;
    const Result with_lat = simulate(r, CostModel::pure_network(kBw, lat));
    EXPECT_NEAR(with_lat.finish.back(), (8 + n - 2) * step + (n - 1) * lat, 1e-9) << "n=" << n;
    r.group = strata::sim::world_group(r.places, std::size_t{1} << 20, 4, /*flags=*/false);
    ASSERT_FALSE(r.group.grants);
    const Result rtr = simulate(r, CostModel::pure_network(kBw, lat));
    EXPECT_NEAR(rtr.finish.back(), (8 + n - 2) * step + n * lat, 1e-9) << "n=" << n;
  }
}

TEST(Sim, BinomialBroadcastTakesCeilLog2NMessageTimes) {
  const std::uint64_t bytes = 1 << 20;  // fits the window slot: one message per edge
  for (int n : {2, 3, 5, 8, 13, 16}) {
    Job r = one_per_host(n, coll::Kind::broadcast, bytes);
    r.call.algo.name = "single";
    r.call.algo.hierarchical = false;
    r.call.algo.single = {coll::Shape::knomial, 2};
    r.call.algo.fragment = std::size_t{1} << 40;  // none
    const Result res = simulate(r, CostModel::pure_network(kBw, 0));
    const double depth = std::ceil(std::log2(static_cast<double>(n)));
    EXPECT_NEAR(res.max_finish(), depth * static_cast<double>(bytes) / kBw, 1e-9) << "n=" << n;
  }
}

// Hand-offs (docs/simulator.md): on one host a 2-rank broadcast is the root's
// put into the leaf's window at handoff_write_bw, then the leaf's copy out of
// its window at handoff_read_bw; nothing else costs anything here. Unset
// (0), both fall back to the copy bandwidth; a hand-off is never faster than
// the plain copy at that size.
TEST(Sim, OneHostBroadcastIsAWriteAndAReadHandOff) {
  const std::uint64_t bytes = 1 << 20;
  Job r = machine_job(1, "core:2", coll::Kind::broadcast, bytes);
  r.call.algo.name = "single";
  r.call.algo.hierarchical = false;
  r.call.algo.single = {coll::Shape::flat, 0};
  r.call.algo.fragment = std::size_t{1} << 40;
  CostModel c = CostModel::pure_network(kBw, 0);
  c.handoff_write_bw = 20e9;
  c.handoff_read_bw = 40e9;
  const double b = static_cast<double>(bytes);
  EXPECT_NEAR(simulate(r, c).max_finish(), b / 20e9 + b / 40e9, 1e-9);
  c.copy_bw = 25e9;  // slower than the read hand-off: the copy's own limit wins
  EXPECT_NEAR(simulate(r, c).max_finish(), b / 20e9 + b / 25e9, 1e-9);
  c.handoff_write_bw = c.handoff_read_bw = 0;  // unset: plain copies at copy_bw both ways
  EXPECT_NEAR(simulate(r, c).max_finish(), 2 * b / 25e9, 1e-9);
}

TEST(Sim, FlatBroadcastSerializesOnTheRootNic) {
  const std::uint64_t bytes = 1 << 20;
  for (int n : {2, 4, 7}) {
    Job r = one_per_host(n, coll::Kind::broadcast, bytes);
    r.call.algo.name = "single";
    r.call.algo.hierarchical = false;
    r.call.algo.single = {coll::Shape::flat, 0};
    r.call.algo.fragment = std::size_t{1} << 40;
    const Result res = simulate(r, CostModel::pure_network(kBw, 0));
    EXPECT_NEAR(res.max_finish(), (n - 1) * static_cast<double>(bytes) / kBw, 1e-9) << "n=" << n;
  }
}

TEST(Sim, RingAllreduceUnderPureBandwidthTakesTwoNMinus1OverN) {
  for (int n : {2, 3, 4, 5, 6}) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(n) << 20;  // equal blocks of 1 MiB
    Job r = one_per_host(n, coll::Kind::allreduce, bytes / 4);
    r.call.dtype = strata::dag::DataType::f32;
    r.call.algo.name = "ring";
    const Result res = simulate(r, CostModel::pure_network(kBw, 0));
    const double expect = 2.0 * (n - 1) / n * static_cast<double>(bytes) / kBw;
    for (int k = 0; k < n; ++k) EXPECT_NEAR(res.finish[static_cast<std::size_t>(k)], expect, 1e-9) << "n=" << n;
  }
}

Job hierarchical_machine() { return machine_job(6, "package:2 numa:2 core:3 pu:1", coll::Kind::broadcast, 3 << 20, 5); }

TEST(Sim, SameInputGivesTheSameOutput) {
  const Job r = hierarchical_machine();
  const CostModel c;  // every cost on: NIC and memory contention, progress, workers
  const Result a = simulate(r, c);
  const Result b = simulate(r, c);
  ASSERT_EQ(a.finish.size(), 72u);
  EXPECT_EQ(a.finish, b.finish);
  EXPECT_EQ(a.events, b.events);
  ASSERT_EQ(a.critical_path.size(), b.critical_path.size());
  for (std::size_t i = 0; i < a.critical_path.size(); ++i) {
    EXPECT_EQ(a.critical_path[i].rank, b.critical_path[i].rank);
    EXPECT_EQ(a.critical_path[i].node, b.critical_path[i].node);
    EXPECT_EQ(a.critical_path[i].end, b.critical_path[i].end);
  }
}

TEST(Sim, CriticalPathEndsAtTheLastCompletionAndStartsAtTheRoot) {
  const Job r = hierarchical_machine();
  const Result res = strata::sim::simulate(r.group, r.call, r.places, CostModel{}, 100000);
  ASSERT_FALSE(res.critical_path.empty());
  EXPECT_DOUBLE_EQ(res.critical_path.front().end, res.max_finish());
  EXPECT_EQ(res.critical_path.back().via, "start");
  for (std::size_t i = 1; i < res.critical_path.size(); ++i)
    EXPECT_LE(res.critical_path[i].end, res.critical_path[i - 1].ready + 1e-12);
  // Data comes from the root: the chain passes through it.
  bool root_seen = false;
  for (const auto& s : res.critical_path) root_seen = root_seen || s.rank == r.call.root;
  EXPECT_TRUE(root_seen);
}

TEST(Sim, StrictExitCompletesEveryRankTogetherLooseDoesNot) {
  // Compiling strict plans is slow in Debug + sanitizer builds: a smaller machine (3 x 8 ranks).
  Job r = machine_job(3, "package:2 numa:2 core:2 pu:1", coll::Kind::broadcast, 256 << 10, 5);
  const Result loose = simulate(r, CostModel{});
  r.call.entry_all = r.call.exit_all = true;
  const Result strict = simulate(r, CostModel{});
  EXPECT_LT(loose.min_finish(), 0.8 * loose.max_finish());
  EXPECT_GT(strict.min_finish(), 0.9 * strict.max_finish());
  EXPECT_GT(strict.max_finish(), loose.max_finish());
}

TEST(Sim, BlockingCallsOfAFlatBroadcastAddUp) {
  // K calls in a blocking loop, pure bandwidth: the root's NIC is busy
  // (n - 1) N / B per call and nothing else waits, so K (n - 1) N / B.
  const std::uint64_t bytes = 1 << 20;
  const int n = 4;
  Job r = one_per_host(n, coll::Kind::broadcast, bytes);
  r.call.algo.name = "single";
  r.call.algo.hierarchical = false;
  r.call.algo.single = {coll::Shape::flat, 0};
  r.call.algo.fragment = std::size_t{1} << 40;
  strata::sim::Stream st;
  st.instances = 5;
  const Result res = strata::sim::simulate(r.group, r.call, r.places, CostModel::pure_network(kBw, 0), 8, st);
  ASSERT_EQ(res.instance_finish.size(), 5u);
  for (int i = 0; i < 5; ++i)
    EXPECT_NEAR(res.instance_finish[static_cast<std::size_t>(i)], (i + 1) * (n - 1) * static_cast<double>(bytes) / kBw,
                1e-9)
        << "call " << i;
}

TEST(Sim, StreamsLongerThanTheCreditsComplete) {
  // Nonblocking: 10 calls over 4 window slots; flag_waits of call i wait for
  // the peers' call i - 4, roots for this rank's call i - 4.
  Job r = hierarchical_machine();
  r.call.count = 64 << 10;
  for (bool blocking : {true, false}) {
    strata::sim::Stream st;
    st.instances = 10;
    st.blocking = blocking;
    const Result res = strata::sim::simulate(r.group, r.call, r.places, CostModel{}, 8, st);
    ASSERT_EQ(res.instance_finish.size(), 10u);
    const Result one = simulate(r, CostModel{});
    EXPECT_GT(res.max_finish(), 3 * one.max_finish()) << "blocking=" << blocking;
    EXPECT_DOUBLE_EQ(res.max_finish(), *std::max_element(res.instance_finish.begin(), res.instance_finish.end()));
  }
}

TEST(Sim, StrictCallsInALoopCostMoreThanLooseOnes) {
  // Seed 004: loose calls pipeline behind each other, strict ones cannot.
  Job r = machine_job(MachineSpec{}.hosts, "package:2 numa:2 core:2 pu:1", coll::Kind::reduce, 2);
  r.call.dtype = strata::dag::DataType::f32;
  strata::sim::Stream st;
  st.instances = 6;
  const double loose = strata::sim::simulate(r.group, r.call, r.places, CostModel{}, 1, st).max_finish();
  r.call.entry_all = r.call.exit_all = true;
  const double strict = strata::sim::simulate(r.group, r.call, r.places, CostModel{}, 1, st).max_finish();
  EXPECT_GT(strict, 2 * loose);
}

TEST(Sim, NumaMemoryBandwidthIsShared) {
  // One host, one NUMA region, a flat core-level broadcast: the root's copies
  // into its 7 peers' windows share the region's memory bandwidth.
  Job r = machine_job(MachineSpec{}.hosts, "numa:1 core:8 pu:1", coll::Kind::broadcast, 8 << 20);
  CostModel c = CostModel::pure_network(kBw, 0);
  c.copy_bw = 10e9;
  const double fast = simulate(r, c).max_finish();
  c.numa_mem_bw = 5e9;  // less than one stream: the bucket, not the copy, is the limit
  const double slow = simulate(r, c).max_finish();
  EXPECT_GT(slow, 1.5 * fast);
}

TEST(Sim, MismatchedPlansAreRefusedNamingTheRank) {
  using namespace strata::dag;
  PlanBuilder b0("t", 0, 2);
  b0.signal(1, 7);
  PlanBuilder b1("t", 1, 2);
  b1.nop();
  MachineSpec m;
  m.hosts = 2;
  m.topology = "core:1";
  const auto places = strata::sim::place_ranks(m);
  try {
    (void)strata::sim::simulate_plans({b0.build(), b1.build()}, places, CostModel{});
    FAIL() << "a signal to a slot without a wait node was accepted";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 signals slot 7 of rank 1"), std::string::npos) << e.what();
  }
}

TEST(Sim, BadParametersAreNamed) {
  CostModel c;
  try {
    c.set("nic_gbits", "100");
    FAIL();
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'nic_gbits'"), std::string::npos) << e.what();
  }
  try {
    c.set("nic_lat_us", "-1");
    FAIL();
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nic_lat_us"), std::string::npos) << e.what();
  }
  c.set("nic_gbit", "200");
  EXPECT_DOUBLE_EQ(c.nic_bw, 25e9);
  const std::string path = ::testing::TempDir() + "strata_sim_machine.txt";
  {
    std::ofstream f(path);
    f << "# a machine\nhosts = 3\ntopology = package:2 core:2 pu:1\nnic_gbit = 100\ncopy_gbs = banana\n";
  }
  MachineSpec m;
  try {
    strata::sim::load_machine_file(path, &m, &c);
    FAIL();
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("copy_gbs"), std::string::npos) << e.what();
  }
  EXPECT_EQ(m.hosts, 3);
  EXPECT_DOUBLE_EQ(c.nic_bw, 12.5e9);
  std::remove(path.c_str());
  MachineSpec bad;
  bad.topology = "core";
  EXPECT_THROW((void)strata::sim::place_ranks(bad), strata::Error);
}

// ---------------------------------------------------------------- autotune (strata-tune --simulate)
strata::sim::AutotuneOptions small_search() {
  strata::sim::AutotuneOptions o;
  o.quick = true;
  o.sizes = {8, 64 << 10};
  o.allreduce_sizes = {1024, 64 << 10, 1 << 20};
  o.machine_name = "test.machine";
  o.tool = "test";
  return o;
}

TEST(Autotune, SameMachineSameDecisionsAndAValidFile) {
  MachineSpec m;
  m.hosts = 4;
  m.topology = "package:1 numa:2 core:2 pu:1";
  const CostModel cost;
  const auto a = strata::sim::autotune(m, cost, small_search());
  const auto b = strata::sim::autotune(m, cost, small_search());
  EXPECT_EQ(a.file.table, b.file.table);
  ASSERT_EQ(a.compare.size(), b.compare.size());
  for (std::size_t i = 0; i < a.compare.size(); ++i) EXPECT_EQ(a.compare[i].tuned_us, b.compare[i].tuned_us);
  EXPECT_GT(a.simulations, 0u);
  EXPECT_EQ(a.file.machine.cpu_model, "simulated:test.machine");
  EXPECT_EQ(a.file.machine.cores, 16u);
  EXPECT_EQ(a.file.machine.numa_nodes, 8u);
  // The document parses back (the parser validates every decision's range).
  const strata::coll::TuningFile back = strata::coll::parse_tuning(a.file.to_json(), "autotune");
  EXPECT_EQ(back.table, a.file.table);
  const auto meas = nlohmann::json::parse(back.measurements);
  ASSERT_TRUE(meas.contains("searches"));
  EXPECT_TRUE(meas["searches"].contains("broadcast_tree_host"));
  // A simulated table is for no real machine: an engine here ignores it.
  EXPECT_FALSE(back.machine.difference(strata::coll::Fingerprint::here()).empty());
  // Every searched collective and size is in the comparison.
  EXPECT_EQ(a.compare.size(), 2u + 2u + 3u);
  for (const auto& p : a.compare) EXPECT_GT(p.default_us, 0);
}

TEST(Autotune, HugeLatencyAndInfiniteBandwidthPickAOneHopHostTree) {
  // Only the network latency costs anything: a tree of depth d takes d
  // latencies, so a one-hop tree over the 8 hosts (flat, or k-nomial of
  // radix >= 8) is optimal and the chain (depth 7) is the worst.
  MachineSpec m;
  m.hosts = 8;
  m.topology = "package:1 numa:1 core:2 pu:1";
  const CostModel cost = CostModel::pure_network(0, 1e-3);
  strata::sim::AutotuneOptions o = small_search();
  o.max_loss = 10;  // let the best score win
  const auto r = strata::sim::autotune(m, cost, o);
  for (std::uint64_t v : {r.file.table.broadcast_tree_host, r.file.table.reduce_tree_host}) {
    EXPECT_TRUE(v == 0 || v >= 8) << v;
  }
  // ... and the simulated broadcast gets faster than the default binomial tree (depth 3).
  for (const auto& p : r.compare)
    if (p.collective == "broadcast") {
      EXPECT_LT(p.tuned_us, p.default_us * 0.8) << p.bytes;
    }
}

TEST(Autotune, TunedTableReachesTheSimulatedPlans) {
  // The simulator compiles under Group::tuning: a chain host tree from the
  // table is slower than the default tree in a latency-bound model.
  MachineSpec m;
  m.hosts = 8;
  m.topology = "package:1 numa:1 core:1 pu:1";
  const auto places = strata::sim::place_ranks(m);
  const CostModel cost = CostModel::pure_network(0, 1e-3);
  coll::Group g = strata::sim::world_group(places);
  const coll::Call c = strata::sim::automatic_call(g, coll::Kind::broadcast, 64);
  const double def = strata::sim::simulated_seconds(g, c, places, cost);
  coll::Tuning t;
  t.broadcast_tree_host = 1;
  g.tuning = std::make_shared<const coll::Tuning>(t);
  const double chain = strata::sim::simulated_seconds(g, c, places, cost);
  EXPECT_GT(chain, 1.5 * def);
}

}  // namespace
