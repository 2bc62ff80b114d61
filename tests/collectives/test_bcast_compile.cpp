// Broadcast compiler without processes, push and pull: every rank's slice is
// compiled and validated across ranks, then executed over the fake transport
// (random release order) and checked against the root's buffer, for several
// group shapes (one host, 2x2 NUMA, two hosts, cyclic placement, two packages
// per host), trees,
// fragmentations, every root and per-level directions (all push, all pull,
// mixed). Also: pull is refused where it does not apply.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../common/fake_ranks.hpp"
#include "strata/collectives/compile.hpp"
#include "strata/dag/executor.hpp"

namespace {

using strata::coll::Call;
using strata::coll::Direction;
using strata::coll::Group;
using strata::coll::Kind;
namespace dag = strata::dag;

using fake_ranks::make_group;
using fake_ranks::Place;

// Direction sets: all push, all pull, and two mixtures (package and NUMA edges differ in both).
struct Dirs {
  Direction host, numa, core, single, package;
  const char* label;
};
const Dirs kDirs[] = {
    {Direction::push, Direction::push, Direction::push, Direction::push, Direction::push, "push"},
    {Direction::pull, Direction::pull, Direction::pull, Direction::pull, Direction::pull, "pull"},
    {Direction::pull, Direction::push, Direction::pull, Direction::pull, Direction::pull,
     "host:pull,package:pull,numa:push,core:pull"},
    {Direction::push, Direction::pull, Direction::push, Direction::push, Direction::push,
     "host:push,package:push,numa:pull,core:push"},
};

Call make_call(int root, std::size_t count, bool hierarchical, const Dirs& d, std::size_t fragment,
               std::size_t halves) {
  Call c;
  c.kind = Kind::broadcast;
  c.dtype = dag::DataType::i32;
  c.root = root;
  c.count = count;
  c.algo.name = hierarchical ? "tree" : "single";
  c.algo.hierarchical = hierarchical;
  c.algo.single = {strata::coll::Shape::knomial, 2};
  c.algo.dir_host = d.host;
  c.algo.dir_numa = d.numa;
  c.algo.dir_core = d.core;
  c.algo.dir_single = d.single;
  c.algo.dir_package = d.package;
  c.algo.fragment = fragment;
  c.algo.halves_threshold = halves;
  return c;
}

std::vector<const dag::Plan*> raw(const std::vector<std::shared_ptr<const dag::Plan>>& p) {
  std::vector<const dag::Plan*> r;
  for (const auto& x : p) r.push_back(x.get());
  return r;
}

using fake_ranks::data_or_null;
using fake_ranks::FakeRanks;

std::int32_t val(int root, std::size_t i) { return static_cast<std::int32_t>(root * 100000 + (i % 9973) + 1); }

struct SimCase {
  int n;
  Place place;
  std::size_t slot;
};

class BcastSim : public ::testing::TestWithParam<SimCase> {};

TEST_P(BcastSim, EveryDirectionMatchesTheRootsBuffer) {
  const int n = GetParam().n;
  const auto nn = static_cast<std::size_t>(n);
  const Group g0 = make_group(n, GetParam().place, GetParam().slot);
  FakeRanks sim(n, GetParam().slot, 7 + static_cast<std::uint64_t>(n));
  int pulls = 0;
  for (const Dirs& d : kDirs)
    for (bool hier : {true, false})
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{3001}})
        for (int frag = 0; frag < 3; ++frag)
          for (int root = 0; root < n; ++root) {
            if (frag > 0 && count != 3001) continue;
            const std::size_t fixed = frag == 1 ? 1024 : 0;
            const std::size_t halves = frag == 2 ? 2048 : 0;
            const std::string what = std::string(d.label) + (hier ? " tree" : " single") + " n=" + std::to_string(n) +
                                     " count=" + std::to_string(count) + " frag=" + std::to_string(frag) +
                                     " root=" + std::to_string(root);
            std::vector<std::shared_ptr<const dag::Plan>> plans;
            Group g = g0;
            for (int r = 0; r < n; ++r) {
              g.rank = r;
              ASSERT_NO_THROW(
                  plans.push_back(strata::coll::compile(g, make_call(root, count, hier, d, fixed, halves), 1)))
                  << what;
            }
            const strata::Status st = dag::validate(raw(plans));
            ASSERT_TRUE(st.is_ok()) << what << ": " << st.message();
            for (const auto& p : plans) {
              for (const dag::Node& nd : p->nodes()) {
                if (nd.kind != dag::NodeKind::get) continue;
                {
                  ++pulls;
                  ASSERT_NE(d.label, std::string("push")) << what << ": a get in a push plan";
                  ASSERT_TRUE(nd.src.offset >= g.slot_bytes && nd.src.offset + nd.src.len <= 2 * g.slot_bytes)
                      << what << ": get outside the peer's slot";
                }
              }
            }
            std::vector<std::vector<std::int32_t>> buf(nn);
            for (std::size_t r = 0; r < nn; ++r) buf[r].assign(count, -1);
            for (std::size_t i = 0; i < count; ++i) buf[static_cast<std::size_t>(root)][i] = val(root, i);
            // buf[root] is the input, every other buf[r] the output.
            ASSERT_TRUE(sim.run(plans, [&](int r) -> FakeRanks::Io {
              void* mine = data_or_null(buf[static_cast<std::size_t>(r)]);
              return r == root ? FakeRanks::Io{mine, nullptr} : FakeRanks::Io{nullptr, mine};
            })) << what;
            for (std::size_t r = 0; r < nn; ++r)
              for (std::size_t i = 0; i < count; ++i)
                ASSERT_EQ(buf[r][i], val(root, i)) << what << " rank " << r << " element " << i;
          }
  if (n > 1) {
    EXPECT_GT(pulls, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, BcastSim,
                         ::testing::Values(SimCase{1, Place::one, 1 << 20}, SimCase{2, Place::one, 1 << 20},
                                           SimCase{3, Place::one, 4096}, SimCase{5, Place::hosts2, 8192},
                                           SimCase{8, Place::numa4, 1 << 16}, SimCase{8, Place::cyclic, 4096},
                                           SimCase{11, Place::cyclic, 1 << 20}, SimCase{8, Place::packages, 8192},
                                           SimCase{12, Place::packages, 1 << 16}));

TEST(BcastCompile, PullIsRefusedWhereItDoesNotApplyNamingDirectionCollectiveAndRank) {
  Group g = make_group(4, Place::one, 1 << 20);
  g.rank = 2;
  for (Kind k : {Kind::reduce, Kind::allreduce, Kind::gather, Kind::allgather, Kind::alltoall}) {
    Call c;
    c.kind = k;
    c.dtype = dag::DataType::i32;
    c.count = 4;
    c.algo.dir_core = Direction::pull;
    std::string m = "no error";
    try {
      (void)strata::coll::compile(g, c, 0);
    } catch (const strata::Error& e) {
      m = e.what();
    }
    EXPECT_NE(m.find("'direction'"), std::string::npos) << m;
    EXPECT_NE(m.find(strata::coll::to_string(k)), std::string::npos) << m;
    EXPECT_NE(m.find("rank 2"), std::string::npos) << m;
  }
  // Persistent broadcast plans (direct mode) keep push: accepted, no gets.
  Call c = make_call(0, 100, true, kDirs[1], 0, 0);
  c.direct = true;
  std::shared_ptr<const dag::Plan> p;
  ASSERT_NO_THROW(p = strata::coll::compile(g, c, 0));
  ASSERT_NE(p, nullptr);
  for (const dag::Node& nd : p->nodes()) EXPECT_NE(nd.kind, dag::NodeKind::get);
}

// A parent with several children on other hosts posts fragment-major: each of
// fragment f + 1's network puts depends on fragment f's first network put, so
// the executor cannot post one child's whole message before the next child's
// first fragment (docs/algorithms.md, "Broadcast"). Same-host puts (one memcpy
// at the post) are not ordered.
TEST(BcastCompile, NetworkPutsOfSeveralChildrenAreFragmentMajor) {
  for (const bool grants : {true, false}) {
    SCOPED_TRACE(grants ? "granted flags" : "ready-to-receive signals");
    Group g = make_group(5, Place::one, 1 << 20);
    g.host = {0, 1, 2, 3, 0};  // ranks 1-3 on other hosts, rank 4 beside the root
    g.flags = grants;
    g.grants = grants;
    Call c = make_call(0, (1 << 20) / 4, false, kDirs[0], 128 * 1024, 0);  // 1 MiB in 8 fragments
    c.algo.single = {strata::coll::Shape::flat, 0};
    std::shared_ptr<const dag::Plan> root;
    ASSERT_NO_THROW(root = strata::coll::compile(g, c, 0));
    // The root's puts in plan order, per child: fragment f is the f-th put to that child.
    std::vector<std::vector<dag::NodeId>> to(5);
    for (dag::NodeId id = 0; id < root->size(); ++id)
      if (root->node(id).kind == dag::NodeKind::put_with_signal)
        to[static_cast<std::size_t>(root->node(id).peer)].push_back(id);
    for (int ch = 1; ch < 5; ++ch) ASSERT_EQ(to[static_cast<std::size_t>(ch)].size(), 8u) << "child " << ch;
    auto depends = [&](dag::NodeId a, dag::NodeId b) {
      const auto& d = root->node(a).deps;
      return std::find(d.begin(), d.end(), b) != d.end();
    };
    for (std::size_t f = 1; f < 8; ++f) {
      for (int ch = 1; ch <= 3; ++ch)
        EXPECT_TRUE(depends(to[static_cast<std::size_t>(ch)][f], to[1][f - 1]))
            << "fragment " << f << " to rank " << ch << " does not wait for fragment " << f - 1 << " to rank 1";
      EXPECT_FALSE(depends(to[4][f], to[1][f - 1])) << "the same-host put of fragment " << f << " is ordered";
    }
    // The whole broadcast, every rank's slice, over the fake transport in
    // random order (the signal protocol: the fake ranks bind no flag tables).
    if (grants) continue;
    std::vector<std::shared_ptr<const dag::Plan>> plans;
    for (int r = 0; r < 5; ++r) {
      g.rank = r;
      plans.push_back(strata::coll::compile(g, c, 1));
    }
    const strata::Status st = dag::validate(raw(plans));
    ASSERT_TRUE(st.is_ok()) << st.message();
    FakeRanks sim(5, 1 << 20, 11);
    std::vector<std::vector<std::int32_t>> buf(5, std::vector<std::int32_t>(c.count, -1));
    for (std::size_t i = 0; i < c.count; ++i) buf[0][i] = val(0, i);
    ASSERT_TRUE(sim.run(plans, [&](int r) -> FakeRanks::Io {
      void* mine = buf[static_cast<std::size_t>(r)].data();
      return r == 0 ? FakeRanks::Io{mine, nullptr} : FakeRanks::Io{nullptr, mine};
    }));
    for (std::size_t r = 1; r < 5; ++r)
      for (std::size_t i = 0; i < c.count; i += 997)
        ASSERT_EQ(buf[r][i], val(0, i)) << "rank " << r << " element " << i;
  }
}

TEST(BcastCompile, EdgeDirectionFollowsThePlacesOfBothEnds) {
  const Group g = make_group(8, Place::hosts2, 1 << 20);  // hosts {0..3}, {4..7}; numa r % 2
  strata::coll::Algorithm a;
  a.dir_host = Direction::pull;
  a.dir_numa = Direction::push;
  a.dir_core = Direction::pull;
  EXPECT_EQ(strata::coll::edge_direction(g, a, 0, 4), Direction::pull);  // other host
  EXPECT_EQ(strata::coll::edge_direction(g, a, 0, 1), Direction::push);  // same host, other NUMA
  EXPECT_EQ(strata::coll::edge_direction(g, a, 0, 2), Direction::pull);  // same NUMA
  a.hierarchical = false;
  EXPECT_EQ(strata::coll::edge_direction(g, a, 0, 1), Direction::push);  // single level: dir_single
  a.dir_single = Direction::pull;
  EXPECT_EQ(strata::coll::edge_direction(g, a, 0, 1), Direction::pull);
}

TEST(BcastCompile, EdgeDirectionClassifiesPackageEdges) {
  const Group g = make_group(16, Place::packages, 1 << 20);  // hosts {0..7}, {8..15}; package (r % 8) / 4
  strata::coll::Algorithm a;
  a.dir_host = Direction::push;
  a.dir_package = Direction::pull;
  a.dir_numa = Direction::push;
  a.dir_core = Direction::pull;
  EXPECT_EQ(strata::coll::edge_direction(g, a, 0, 8), Direction::push);   // other host
  EXPECT_EQ(strata::coll::edge_direction(g, a, 0, 4), Direction::pull);   // same host, other package
  EXPECT_EQ(strata::coll::edge_direction(g, a, 8, 12), Direction::pull);  // ... on the second host
  EXPECT_EQ(strata::coll::edge_direction(g, a, 0, 2), Direction::push);   // same package, other NUMA
  EXPECT_EQ(strata::coll::edge_direction(g, a, 4, 5), Direction::pull);   // same NUMA region
  EXPECT_STREQ(strata::coll::edge_level(g, 0, 8), "host");
  EXPECT_STREQ(strata::coll::edge_level(g, 3, 4), "package");
  EXPECT_STREQ(strata::coll::edge_level(g, 4, 6), "numa");
  EXPECT_STREQ(strata::coll::edge_level(g, 6, 7), "core");
  // Without package ids (one package per host), the same pair is a NUMA edge.
  Group one = g;
  one.package.clear();
  EXPECT_EQ(strata::coll::edge_direction(one, a, 0, 4), Direction::push);
  EXPECT_STREQ(strata::coll::edge_level(one, 3, 4), "numa");
}

// 'package:2 numa:2 core:2 pu:1' (8 ranks, one host): the broadcast tree runs
// 0 -> 4 over the package edge, then each package leader feeds its own NUMA
// regions. With a flat NUMA level the root therefore sends to 4, 2 and 1 only
// (without the package level it sent to 2, 4 and 6); with package:pull the
// package leader 4 reads from 0 and nobody else pulls.
TEST(BcastCompile, TwoPackagePlanUsesPackageEdges) {
  Group g = make_group(8, Place::packages, 1 << 16);
  Call c = make_call(0, 3001, true, kDirs[0], 0, 0);
  c.algo.numa = {strata::coll::Shape::flat, 0};
  c.algo.dir_package = Direction::pull;

  const std::vector<strata::coll::TreeEdge> edges = strata::coll::plan_tree(g, c);
  ASSERT_EQ(edges.size(), 7u);
  int package_edges = 0;
  for (const strata::coll::TreeEdge& e : edges) {
    EXPECT_FALSE(e.hop);
    if (e.level == "package") {
      ++package_edges;
      EXPECT_EQ(e.parent, 0);
      EXPECT_EQ(e.child, 4);
      EXPECT_EQ(e.direction, Direction::pull);
    } else {
      EXPECT_EQ(e.direction, Direction::push) << e.parent << " -> " << e.child;
    }
    if (e.child == 6) {
      EXPECT_EQ(e.parent, 4);
      EXPECT_EQ(e.level, "numa");
    }
  }
  EXPECT_EQ(package_edges, 1);

  std::vector<std::shared_ptr<const dag::Plan>> plans;
  for (int r = 0; r < 8; ++r) {
    g.rank = r;
    ASSERT_NO_THROW(plans.push_back(strata::coll::compile(g, c, 1))) << "rank " << r;
  }
  const strata::Status st = dag::validate(raw(plans));
  ASSERT_TRUE(st.is_ok()) << st.message();
  auto peers = [&](int r, dag::NodeKind kind) {
    std::vector<int> out;
    for (const dag::Node& nd : plans[static_cast<std::size_t>(r)]->nodes())
      if (nd.kind == kind && std::find(out.begin(), out.end(), nd.peer) == out.end()) out.push_back(nd.peer);
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(peers(0, dag::NodeKind::put_with_signal), (std::vector<int>{1, 2}));  // 4 pulls
  EXPECT_EQ(peers(4, dag::NodeKind::get), (std::vector<int>{0}));
  EXPECT_EQ(peers(4, dag::NodeKind::put_with_signal), (std::vector<int>{5, 6}));
  EXPECT_EQ(peers(6, dag::NodeKind::put_with_signal), (std::vector<int>{7}));
  for (int r : {1, 2, 3, 5, 6, 7}) EXPECT_TRUE(peers(r, dag::NodeKind::get).empty()) << "rank " << r;

  FakeRanks sim(8, 1 << 16, 5);
  std::vector<std::vector<std::int32_t>> buf(8, std::vector<std::int32_t>(c.count, -1));
  for (std::size_t i = 0; i < c.count; ++i) buf[0][i] = val(0, i);
  ASSERT_TRUE(sim.run(plans, [&](int r) -> FakeRanks::Io {
    void* mine = buf[static_cast<std::size_t>(r)].data();
    return r == 0 ? FakeRanks::Io{mine, nullptr} : FakeRanks::Io{nullptr, mine};
  }));
  for (std::size_t r = 1; r < 8; ++r)
    for (std::size_t i = 0; i < c.count; ++i) ASSERT_EQ(buf[r][i], val(0, i)) << "rank " << r << " element " << i;

  // The same group without package ids: the flat NUMA level hangs every NUMA leader off the root.
  g.package.clear();
  g.rank = 0;
  c.algo.dir_package = Direction::push;
  std::vector<int> kids;
  for (const strata::coll::TreeEdge& e : strata::coll::plan_tree(g, c))
    if (e.parent == 0) kids.push_back(e.child);
  EXPECT_EQ(kids, (std::vector<int>{2, 4, 6, 1}));
}

}  // namespace
