// Multilevel trees (host leaders -> NUMA leaders -> cores) over synthetic placements.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "patterns/multilevel.hpp"
#include "patterns/rank_order.hpp"

namespace sp = strata::patterns;

namespace {

struct Layout {
  std::string name;
  std::vector<sp::Place> places;
};

// Block placement: hosts of the given sizes, each split into `numa` regions of equal-ish size.
Layout block(const std::vector<int>& host_sizes, int numa) {
  Layout l{"block", {}};
  for (std::size_t h = 0; h < host_sizes.size(); ++h) {
    l.name += "_" + std::to_string(host_sizes[h]);
    for (int i = 0; i < host_sizes[h]; ++i) l.places.push_back({static_cast<int>(h), i * numa / host_sizes[h]});
  }
  l.name += "x" + std::to_string(numa);
  return l;
}

// Cyclic placement: rank r on host r % hosts, NUMA (r / hosts) % numa.
Layout cyclic(int n, int hosts, int numa) {
  Layout l{"cyclic" + std::to_string(n) + "_" + std::to_string(hosts) + "x" + std::to_string(numa), {}};
  for (int r = 0; r < n; ++r) l.places.push_back({r % hosts, (r / hosts) % numa});
  return l;
}

std::vector<Layout> layouts() {
  std::vector<Layout> v;
  v.push_back(block({1}, 1));
  v.push_back(block({2}, 1));
  v.push_back(block({8}, 2));
  v.push_back(block({4, 4}, 2));
  v.push_back(block({3, 5, 2}, 2));
  v.push_back(block({6, 6, 6}, 3));
  v.push_back(block({1, 1, 1, 1, 1}, 1));
  v.push_back(block({7, 4, 9}, 4));
  v.push_back(cyclic(12, 3, 2));
  v.push_back(cyclic(11, 2, 3));
  // Host ids need not be dense or sorted.
  v.push_back({"sparse_ids", {{7, 1}, {3, 0}, {7, 0}, {3, 0}, {7, 1}, {3, 5}, {9, 2}}});
  return v;
}

std::vector<sp::MultilevelShape> shapes() {
  std::vector<sp::MultilevelShape> v;
  const sp::TreeShape s[] = {sp::TreeShape::binomial(), sp::TreeShape::flat(), sp::TreeShape::chain(),
                             sp::TreeShape::knomial(3), sp::TreeShape::binary()};
  for (auto pol : {sp::RootPolicy::extra_hop, sp::RootPolicy::promote})
    for (std::size_t i = 0; i < 5; ++i) v.push_back({s[i], s[(i + 1) % 5], s[(i + 2) % 5], pol});
  return v;
}

}  // namespace

TEST(Multilevel, LeadersAreLowestRanksAndHostLeadersLeadTheirNumaRegion) {
  for (const Layout& l : layouts()) {
    const int n = static_cast<int>(l.places.size());
    for (int root = 0; root < n; ++root) {
      for (auto pol : {sp::RootPolicy::extra_hop, sp::RootPolicy::promote}) {
        const sp::Leaders ld = sp::compute_leaders(l.places, root, pol);
        for (int r = 0; r < n; ++r) {
          const auto ur = static_cast<std::size_t>(r);
          const int hl = ld.host_leader[ur];
          const int nl = ld.numa_leader[ur];
          EXPECT_EQ(l.places[static_cast<std::size_t>(hl)].host, l.places[ur].host);
          EXPECT_EQ(l.places[static_cast<std::size_t>(nl)].host, l.places[ur].host);
          EXPECT_EQ(l.places[static_cast<std::size_t>(nl)].numa, l.places[ur].numa);
          EXPECT_EQ(ld.numa_leader[static_cast<std::size_t>(hl)], hl) << l.name;
          const bool root_group =
              pol == sp::RootPolicy::promote && l.places[ur].host == l.places[static_cast<std::size_t>(root)].host;
          if (root_group) {
            EXPECT_EQ(hl, root);
          }
          if (r == hl) {
            EXPECT_EQ(nl, r);
          }
        }
        for (int r = 0; r < n; ++r) {
          // Leader is the lowest rank of its group (unless promoted): check the host leader.
          const auto ur = static_cast<std::size_t>(r);
          if (pol == sp::RootPolicy::extra_hop) {
            for (int q = 0; q < ld.host_leader[ur]; ++q)
              EXPECT_NE(l.places[static_cast<std::size_t>(q)].host, l.places[ur].host) << l.name;
          }
        }
      }
    }
  }
}

TEST(Multilevel, EdgesRespectTheirLevelAndCountsMatchTheHierarchy) {
  for (const Layout& l : layouts()) {
    const int n = static_cast<int>(l.places.size());
    std::set<int> hosts;
    std::set<std::pair<int, int>> regions;
    for (const sp::Place& p : l.places) {
      hosts.insert(p.host);
      regions.insert({p.host, p.numa});
    }
    for (const sp::MultilevelShape& shape : shapes()) {
      for (int root = 0; root < n; ++root) {
        const sp::MultilevelTree mt = sp::build_multilevel_tree(l.places, root, shape);
        const sp::Tree& t = mt.tree;
        const sp::Leaders ld = sp::compute_leaders(l.places, root, shape.policy);
        const std::string ctx = l.name + " root=" + std::to_string(root);
        ASSERT_EQ(t.size(), n);
        EXPECT_EQ(t.root(), ld.host_leader[static_cast<std::size_t>(root)]) << ctx;
        if (shape.policy == sp::RootPolicy::promote) {
          EXPECT_FALSE(mt.has_extra_hop()) << ctx;
        } else {
          EXPECT_EQ(mt.has_extra_hop(), ld.host_leader[static_cast<std::size_t>(root)] != root) << ctx;
        }
        int count[3] = {0, 0, 0};
        for (int r = 0; r < n; ++r) {
          const auto ur = static_cast<std::size_t>(r);
          const int p = t.parent(r);
          if (p < 0) continue;
          const sp::Place a = l.places[static_cast<std::size_t>(p)];
          const sp::Place b = l.places[ur];
          const int lv = t.level(r);
          ASSERT_GE(lv, 0);
          ASSERT_LE(lv, 2);
          ++count[lv];
          switch (static_cast<sp::TreeLevel>(lv)) {
            case sp::TreeLevel::host:
              EXPECT_NE(a.host, b.host) << ctx;
              EXPECT_EQ(ld.host_leader[static_cast<std::size_t>(p)], p) << ctx;
              EXPECT_EQ(ld.host_leader[ur], r) << ctx;
              break;
            case sp::TreeLevel::numa:
              EXPECT_EQ(a.host, b.host) << ctx;
              EXPECT_NE(a.numa, b.numa) << ctx;
              EXPECT_EQ(ld.numa_leader[static_cast<std::size_t>(p)], p) << ctx;
              EXPECT_EQ(ld.numa_leader[ur], r) << ctx;
              break;
            case sp::TreeLevel::core:
              EXPECT_EQ(a.host, b.host) << ctx;
              EXPECT_EQ(a.numa, b.numa) << ctx;
              EXPECT_NE(ld.numa_leader[ur], r) << ctx;
              break;
          }
          // Send order: wider levels first.
          const auto kids = t.children(p);
          for (std::size_t i = 1; i < kids.size(); ++i) EXPECT_LE(t.level(kids[i - 1]), t.level(kids[i])) << ctx;
        }
        EXPECT_EQ(count[0], static_cast<int>(hosts.size()) - 1) << ctx;
        EXPECT_EQ(count[1], static_cast<int>(regions.size() - hosts.size())) << ctx;
        EXPECT_EQ(count[2], n - static_cast<int>(regions.size())) << ctx;
      }
    }
  }
}

TEST(Multilevel, RootOfTheTreeIsTheRootsHostLeaderAndTheExtraHopIsExposed) {
  // Two hosts of 4, two NUMA regions each: root 6 is not a leader.
  const std::vector<sp::Place> places = block({4, 4}, 2).places;
  const sp::MultilevelTree hop = sp::build_multilevel_tree(places, 6, {});
  EXPECT_EQ(hop.tree.root(), 4);
  EXPECT_EQ(hop.root, 6);
  EXPECT_TRUE(hop.has_extra_hop());
  EXPECT_EQ(hop.tree.parent(0), 4);  // host level rotated to the root's host
  sp::MultilevelShape promote;
  promote.policy = sp::RootPolicy::promote;
  const sp::MultilevelTree pr = sp::build_multilevel_tree(places, 6, promote);
  EXPECT_EQ(pr.tree.root(), 6);
  EXPECT_FALSE(pr.has_extra_hop());
  EXPECT_EQ(pr.tree.parent(0), 6);
  EXPECT_EQ(pr.tree.parent(4), 6);  // NUMA level: 6 leads host 1 and region (1, 1)
  EXPECT_EQ(pr.tree.parent(7), 6);
}

TEST(Multilevel, FlatShapesGiveTheTwoLevelPictureOfSeed000) {
  // 3 hosts x 4 ranks, 1 NUMA region each, all flat: leaders 0,4,8.
  const std::vector<sp::Place> places = block({4, 4, 4}, 1).places;
  sp::MultilevelShape s{sp::TreeShape::flat(), sp::TreeShape::flat(), sp::TreeShape::flat(), sp::RootPolicy::extra_hop};
  const sp::MultilevelTree mt = sp::build_multilevel_tree(places, 0, s);
  const std::vector<int> kids(mt.tree.children(0).begin(), mt.tree.children(0).end());
  EXPECT_EQ(kids, (std::vector<int>{4, 8, 1, 2, 3}));
  EXPECT_EQ(mt.tree.height(), 2);
}

TEST(Multilevel, SingleLevelVariantIgnoresTheHierarchy) {
  for (int n = 1; n <= 20; ++n)
    for (int root = 0; root < n; ++root) {
      const sp::MultilevelTree t = sp::build_single_level_tree(n, root, sp::TreeShape::binomial());
      EXPECT_FALSE(t.has_extra_hop());
      EXPECT_EQ(t.tree.root(), root);
      for (int r = 0; r < n; ++r) EXPECT_EQ(t.tree.level(r), 0);
    }
}

TEST(Multilevel, BlockPlacementRootedAtZeroKeepsContiguousSubtrees) {
  for (const Layout& l : layouts()) {
    if (l.name.rfind("block", 0) != 0) continue;
    for (const sp::MultilevelShape& shape : shapes()) {
      const sp::MultilevelTree mt = sp::build_multilevel_tree(l.places, 0, shape);
      EXPECT_TRUE(mt.tree.contiguous()) << l.name;
      sp::CombineOrder order;
      EXPECT_TRUE(sp::compute_rank_order(mt.tree, order)) << l.name;
    }
  }
}

TEST(Multilevel, RejectsBadArguments) {
  EXPECT_THROW((void)sp::build_multilevel_tree({}, 0, {}), std::invalid_argument);
  EXPECT_THROW((void)sp::build_multilevel_tree({{0, 0}, {0, 0}}, 2, {}), std::invalid_argument);
}
